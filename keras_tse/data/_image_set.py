"""What the three image loaders (CIFAR-10, MNIST, Fashion-MNIST) share: the order of sources and the
content check every source gets, whether files, a pickle, an npz or TensorFlow Datasets."""

import collections
import os

import numpy as np

from keras_tse import _checks
from keras_tse.data import tfds_source

# A data set as a loader describes it: TFDS's name for it, the name errors use, the standard release's
# images per class ({"train": [...], "test": [...]}), one image's shape, and two functions of
# data_dir: `files` (a split and where it came from, or None) and `fetch` (the same after downloading,
# or a FileNotFoundError naming what to fetch; a second argument says whether downloading is on).
ImageSet = collections.namedtuple("ImageSet", "tfds_name title counts image_shape files fetch")


def default_data_dir():
    """`$KERAS_TSE_DATA_DIR`, else `~/.keras_tse/datasets`: where every loader looks when given no data_dir."""
    return os.environ.get("KERAS_TSE_DATA_DIR") or os.path.join(os.path.expanduser("~"), ".keras_tse", "datasets")


def load_image_set(image_set, data_dir, download, source, tfds_dir):
    """`(x_train, y_train), (x_test, y_test)` from the first source `source` allows (see
    `tfds_source`: files, TFDS, then the download), checked against the standard release."""
    data_dir = data_dir or default_data_dir()
    _checks.one_of("source", source, tfds_source.SOURCES)
    found = None if source == "tfds" else image_set.files(data_dir)
    if found is None:
        split = tfds_source.from_tfds(image_set.tfds_name, source, tfds_dir, download)
        found = (split, f"tensorflow-datasets {image_set.tfds_name}") if split is not None else None
    split, origin = found or image_set.fetch(data_dir, download)
    return checked(split, image_set, origin)


def checked(split, image_set, origin):
    """The split, after checking image shape and dtype, label range and the per-class counts."""
    name, counts, shape = image_set.title, image_set.counts, image_set.image_shape
    for (x, y), part in zip(split, ("train", "test")):
        if x.shape[1:] != shape or x.dtype != np.uint8 or len(x) != len(y):
            raise ValueError(
                f"{name} {part} from {origin} has images {x.shape} {x.dtype} and {len(y)} labels; "
                f"expected uint8 [N, {', '.join(map(str, shape))}] with one label each."
            )
        classes = len(counts[part])  # the standard release's per-class counts name its classes
        in_range = len(y) and y.min() >= 0 and y.max() < classes
        found = np.bincount(y, minlength=classes).tolist() if in_range else sorted(set(y.tolist()))
        if found != counts[part]:
            raise ValueError(
                f"{name} {part} from {origin} is not the standard release: per-class counts {found}, "
                f"expected {counts[part]}. Fetch the files again."
            )
    return split
