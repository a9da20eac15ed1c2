"""Data: CIFAR-10 (download with checksum, or files fetched by hand), scikit-learn's 8x8 digits
(offline, ships with scikit-learn), small synthetic image sets made locally, and the input
pipeline that feeds them to `fit`. The one place in keras_tse allowed to use TensorFlow directly."""

from keras_tse.data.cifar10 import load_cifar10, synthetic_cifar10
from keras_tse.data.digits import load_digits
from keras_tse.data.pipeline import image_dataset, normalized

__all__ = ["load_cifar10", "synthetic_cifar10", "load_digits", "image_dataset", "normalized"]
