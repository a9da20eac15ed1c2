"""TensorFlow Datasets as a source of CIFAR-10, MNIST and Fashion-MNIST (the `tfds` extra).

Every image loader takes `source=`:

- `"auto"` (default): files in `--data-dir` first (a copy the user placed is what they meant); then
  TFDS, if `tensorflow-datasets` is installed and already holds the data set prepared in its data
  folder (`tfds_dir`, else `$TFDS_DATA_DIR` or `~/tensorflow_datasets`: no network, no second copy);
  then the loader's own checksummed download through `keras.utils.get_file`.
- `"files"`: `--data-dir` files, else the loader's own download. TFDS is never imported.
- `"tfds"`: TFDS only; with `download=True` TFDS downloads and prepares the data set itself.

TFDS stores a split in its own shuffled order, so a run fed from TFDS sees other batches than one
fed from the files (the same images and labels: the loaders check the per-class counts either way).
"""

import importlib.util

import numpy as np

from keras_tse import _checks

SOURCES = ("auto", "files", "tfds")


def from_tfds(name, source, tfds_dir=None, download=True):
    """`(x_train, y_train), (x_test, y_test)` from TFDS when `source` says to use it, else None.

    `"tfds"` always uses it (and downloads through TFDS when `download`); `"auto"` only when
    tensorflow-datasets is installed and holds `name` prepared; `"files"` never.
    """
    _checks.one_of("source", source, SOURCES)
    if source == "files" or (source == "auto" and importlib.util.find_spec("tensorflow_datasets") is None):
        return None
    try:
        import tensorflow_datasets as tfds
    except ImportError as error:
        raise ImportError(
            f"source='tfds' needs tensorflow-datasets: pip install 'keras_tse[tfds]'. Received: source={source!r}"
        ) from error
    builder = tfds.builder(name, data_dir=tfds_dir)
    if not builder.is_prepared():
        if source == "auto":
            return None
        if not download:
            raise FileNotFoundError(
                f"TFDS holds no prepared {name} in {builder.data_dir} and downloading is off. "
                f"Run `tfds build {name}` on a machine with internet, or pass download=True."
            )
        builder.download_and_prepare()
    return _split(tfds, builder, "train"), _split(tfds, builder, "test")


def _split(tfds, builder, split):
    """One split as NumPy: uint8 images `[N, H, W, C]`, int32 labels (TFDS's are int64)."""
    images, labels = tfds.as_numpy(builder.as_dataset(split=split, as_supervised=True, batch_size=-1))
    return np.asarray(images, "uint8"), np.asarray(labels, "int32")
