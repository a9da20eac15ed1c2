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


def load_digits(test_fraction=0.2, seed=0):
    """Returns `(x_train, y_train), (x_test, y_test)`: float32 `[N, 8, 8, 1]` images scaled to
    zero mean and unit variance (training statistics), int32 labels; a fixed stratified-free
    random split by `seed`."""
    images, labels = digit_images()
    images, labels = images.astype("float32")[..., None], labels.astype("int32")
    order = np.random.default_rng(seed).permutation(len(labels))
    cut = int(round(len(labels) * (1 - test_fraction)))
    train, test = order[:cut], order[cut:]
    mean, std = images[train].mean(), images[train].std()
    return ((images[train] - mean) / std, labels[train]), ((images[test] - mean) / std, labels[test])
