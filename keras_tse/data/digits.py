"""scikit-learn's 8x8 handwritten digits: real data that ships inside an installed package, so the
demo and tests run offline. 1,797 grey images with values 0..16, ten classes."""

import numpy as np


def load_digits(test_fraction=0.2, seed=0):
    """Returns `(x_train, y_train), (x_test, y_test)`: float32 `[N, 8, 8, 1]` images scaled to
    zero mean and unit variance (training statistics), int32 labels; a fixed stratified-free
    random split by `seed`."""
    try:
        from sklearn.datasets import load_digits as sklearn_digits
    except ImportError as error:
        raise ImportError(
            "The digits data ships with scikit-learn: pip install 'keras_tse[demo]' (or scikit-learn)."
        ) from error
    digits = sklearn_digits()
    images = digits.images.astype("float32")[..., None]
    labels = digits.target.astype("int32")
    order = np.random.default_rng(seed).permutation(len(labels))
    cut = int(round(len(labels) * (1 - test_fraction)))
    train, test = order[:cut], order[cut:]
    mean, std = images[train].mean(), images[train].std()
    return ((images[train] - mean) / std, labels[train]), ((images[test] - mean) / std, labels[test])
