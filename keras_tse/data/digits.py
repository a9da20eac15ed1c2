"""The 8x8 handwritten digits (scikit-learn's `load_digits`): real data that ships inside this package
(`digits.npz`, 45 KB), so the demo, `keras-tse train vit --dataset digits` and the tests run offline with
nothing more installed. 1,797 grey images with values 0..16, ten classes.

Source: E. Alpaydin and C. Kaynak, "Optical Recognition of Handwritten Digits", the UCI Machine Learning
Repository (1998), CC BY 4.0: the test set of that data as scikit-learn ships it, in its order (the images
and labels of `sklearn.datasets.load_digits()`, stored as uint8; a test checks them against it)."""

import os

import numpy as np

FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "digits.npz")


def digit_images():
    """(images uint8 `[1797, 8, 8]` with values 0..16, labels uint8 `[1797]`), as stored."""
    with np.load(FILE) as stored:
        return stored["images"], stored["labels"]


# The pixels' mean and std over the training split of `load_digit_splits()` (seed 0), in [0, 1] units (value / 16):
# the constants every run normalises the digits with (`keras_tse.data.normalized`), as CIFAR-10's are, and that
# the model's `ImagePreprocessor` records, so that a trained model takes the digits as stored. In float32 they
# give the images `load_digits()` standardises with that split's own statistics, bit for bit.
MEAN = 0.30545897079276774
STD = 0.3760237203830944
VALUE_RANGE = (0, 16)


def load_digit_splits(test_fraction=0.2, seed=0):
    """Returns `(x_train, y_train), (x_test, y_test)`: uint8 `[N, 8, 8, 1]` images with values 0..16 (as
    stored), int32 labels; a fixed random split by `seed`."""
    images, labels = digit_images()
    order = np.random.default_rng(seed).permutation(len(labels))
    cut = int(round(len(labels) * (1 - test_fraction)))
    train, test = order[:cut], order[cut:]
    images, labels = images[..., None], labels.astype("int32")
    return (images[train], labels[train]), (images[test], labels[test])


def load_digits(test_fraction=0.2, seed=0):
    """Returns `(x_train, y_train), (x_test, y_test)`: float32 `[N, 8, 8, 1]` images scaled to
    zero mean and unit variance (training statistics), int32 labels; the split of `load_digit_splits`."""
    (x_train, y_train), (x_test, y_test) = load_digit_splits(test_fraction, seed)
    x_train, x_test = x_train.astype("float32"), x_test.astype("float32")
    mean, std = x_train.mean(), x_train.std()
    return ((x_train - mean) / std, y_train), ((x_test - mean) / std, y_test)
