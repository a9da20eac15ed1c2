"""CIFAR-10 (Krizhevsky 2009): the python-pickle release, with its published MD5 checksum.

`load_cifar10(data_dir)` looks for, in order: `data_dir/cifar-10-batches-py/` (extracted),
`data_dir/cifar-10-python.tar.gz` (fetched by hand), a prepared `cifar10` of TensorFlow Datasets
(when installed; `source=`, see `tfds_source`), then downloads the tarball into `data_dir` and checks
it. Offline with none, it stops with a message naming the file and where to put it. Every source is
checked for the standard release's 5,000 / 1,000 images per class.
"""

import functools
import os
import pickle
import tarfile

import numpy as np

from keras_tse.data import _download
from keras_tse.data._image_set import ImageSet, load_image_set

URL = "https://www.cs.toronto.edu/~kriz/cifar-10-python.tar.gz"
ARCHIVE = "cifar-10-python.tar.gz"
MD5 = "c58f30108f718f92721af3b95e74349a"
FOLDER = "cifar-10-batches-py"
TRAIN_BATCHES = [f"data_batch_{i}" for i in range(1, 6)]
TEST_BATCHES = ["test_batch"]
COUNTS = {"train": [5000] * 10, "test": [1000] * 10}  # images per class in the standard release

# Per-channel statistics of the CIFAR-10 training images, in [0, 1] units (widely used values).
MEAN = np.array([0.4914, 0.4822, 0.4465], "float32")
STD = np.array([0.2470, 0.2435, 0.2616], "float32")


def load_cifar10(data_dir=None, download=True, source="auto", tfds_dir=None):
    """Returns `(x_train, y_train), (x_test, y_test)`: uint8 `[N, 32, 32, 3]` images, int32 labels.

    `source` and `tfds_dir`: where TensorFlow Datasets comes in (`keras_tse.data.tfds_source`)."""
    return load_image_set(_image_set(), data_dir, download, source, tfds_dir)


def _image_set():
    # made at each call, so that a test's replaced COUNTS (a fake release) is the one checked
    return ImageSet("cifar10", "CIFAR-10", COUNTS, (32, 32, 3), _files, _download_release)


def _files(data_dir):
    """The extracted release, or the archive fetched by hand (checked, never replaced behind the user's back)."""
    folder, archive = os.path.join(data_dir, FOLDER), os.path.join(data_dir, ARCHIVE)
    if not os.path.isdir(folder):
        if not os.path.exists(archive):
            return None
        _download.check_md5(archive, MD5, "the CIFAR-10 python release", URL)
        with tarfile.open(archive, "r:gz") as tar:
            tar.extractall(data_dir, filter="data")
    return (_read(folder, TRAIN_BATCHES), _read(folder, TEST_BATCHES)), folder


def _download_release(data_dir, download):
    if not download:
        raise FileNotFoundError(_missing_message(data_dir, "downloading is off"))
    _download.get_file(ARCHIVE, URL, data_dir, MD5, "md5", functools.partial(_missing_message, data_dir))
    return _files(data_dir)


def _missing_message(data_dir, why):
    return (
        f"CIFAR-10 is not available ({why}). Fetch {URL} (MD5 {MD5}) on a machine with internet and "
        f"put it at {os.path.join(data_dir, ARCHIVE)} (or extract it there as {FOLDER}/), then rerun "
        f"with --data-dir {data_dir}."
    )


def _read(folder, names):
    images, labels = [], []
    for name in names:
        with open(os.path.join(folder, name), "rb") as f:
            batch = pickle.load(f, encoding="bytes")
        images.append(batch[b"data"].reshape(-1, 3, 32, 32).transpose(0, 2, 3, 1))
        labels.append(np.asarray(batch[b"labels"], "int32"))
    return np.concatenate(images), np.concatenate(labels)


SMOKE_SIZES = dict(num_train=256, num_test=128)  # a smoke run's images: enough to see the loss fall


def smoke_images(seed=0):
    """What `--smoke` on CIFAR-10 reads, offline: synthetic CIFAR-shaped images (`synthetic_cifar10`)."""
    return synthetic_cifar10(**SMOKE_SIZES, seed=seed)


def synthetic_cifar10(num_train=512, num_test=128, seed=0):
    """A small CIFAR-shaped set made locally, for smoke runs and tests (no download).

    Class k is a smooth colour pattern (a class-specific mean colour and a sinusoidal stripe of
    class-specific orientation) plus pixel noise: learnable, but not in one step. Same format as
    `load_cifar10`: uint8 `[N, 32, 32, 3]`, int32 labels.
    """
    rng = np.random.default_rng(seed)
    colours = rng.uniform(60, 196, size=(10, 3))
    angles = np.linspace(0, np.pi, 10, endpoint=False)
    grid = np.stack(np.meshgrid(np.arange(32), np.arange(32), indexing="ij"), -1)  # [32, 32, 2]

    def make(n):
        labels = rng.integers(0, 10, n).astype("int32")
        direction = np.stack([np.cos(angles[labels]), np.sin(angles[labels])], -1)  # [n, 2]
        stripes = np.sin(np.einsum("hwc,nc->nhw", grid, direction) * 0.6)[..., None]  # [n, 32, 32, 1]
        images = colours[labels][:, None, None, :] + 40 * stripes + rng.normal(0, 25, (n, 32, 32, 3))
        return np.clip(images, 0, 255).astype("uint8"), labels

    return make(num_train), make(num_test)
