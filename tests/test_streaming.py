"""`keras-tse train vit --dataset folder --stream`: an image folder read batch by batch (`keras_tse.data.ImageFiles`)
gives the pixels, the statistics and the run the in-memory path gives, and a streamed run stopped and resumed is
the uninterrupted in-memory run digit for digit."""

import csv
import os
import subprocess
import sys

import numpy as np
import pytest

from keras_tse import data
from keras_tse.data import own
from tests.test_kill_resume import STOP_AFTER  # Ctrl-C once an epoch is backed up

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py; the pixels depend on no backend

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _folder(root, classes=3, per_class=10):
    """Class folders of PNGs of several sizes (resized on reading), each class its own mean colour."""
    from PIL import Image

    rng = np.random.default_rng(0)
    for c in range(classes):
        os.makedirs(root / f"c{c}")
        for i in range(per_class):
            base = np.zeros((18 + i % 3, 20 + i % 5, 3)) + rng.integers(0, 255, 3) * (c + 1) / classes
            image = np.clip(base + rng.normal(0, 40, base.shape), 0, 255).astype("uint8")
            Image.fromarray(image).save(root / f"c{c}" / f"{i}.png")
    return str(root)


def test_image_files_read_as_the_loaded_arrays_and_index_as_arrays_do(tmp_path):
    """`load_image_folder(stream=True)`: the same labels and class names; decoded, the same uint8 pixels; an int
    row, a slice, an int array and a boolean mask index as on the array (the last three without reading); the
    per-channel statistics are the array's (two-pass NumPy) to 1e-12, and the same streamed or not."""
    folder = _folder(tmp_path / "images")
    (x, y), (x_test, y_test), names = own.load_image_folder(folder, 12)
    (files, y_files), (test_files, y_test_files), same_names = own.load_image_folder(folder, 12, stream=True)
    assert isinstance(files, data.ImageFiles) and files.shape == x.shape == (24, 12, 12, 3) and files.dtype == x.dtype
    assert names == same_names and y.tolist() == y_files.tolist() and y_test.tolist() == y_test_files.tolist()
    assert np.array_equal(np.asarray(files), x) and np.array_equal(np.asarray(test_files), x_test)
    mask = y == 1
    for key in (slice(3, 9), np.array([5, 0, 7]), mask):
        view = files[key]
        assert isinstance(view, data.ImageFiles) and np.array_equal(np.asarray(view), x[key])
    assert np.array_equal(files[4], x[4]) and np.asarray(files, "float32").dtype == np.float32
    mean, std = data.channel_statistics(x, chunk=5)
    pixels = x.reshape(-1, 3).astype("float64") / 255.0
    np.testing.assert_allclose(mean, pixels.mean(0), rtol=1e-12)
    np.testing.assert_allclose(std, pixels.std(0), rtol=1e-12)
    streamed = data.channel_statistics(files, chunk=5)
    assert streamed[0].tolist() == mean.tolist() and streamed[1].tolist() == std.tolist()


@pytest.mark.starts_processes
def test_a_streamed_run_stopped_and_resumed_is_the_in_memory_run_digit_for_digit(tmp_path):
    """The folder decoded into memory, 3 epochs uninterrupted; the same folder streamed, Ctrl-C in epoch 2, then the
    same command: every epoch's training and validation loss and accuracy are the in-memory run's, digit for digit
    (the same pixels, statistics, order and crop-and-flip draws: each a function of the seed, epoch and batch)."""
    folder = _folder(tmp_path / "images")
    argv = ["train", "vit", "--dataset", "folder", "--data-dir", folder, "--image-size", "16", "--patch-size", "4"]
    argv += ["--depth", "1", "--hidden-dim", "16", "--num-heads", "2", "--epochs", "3", "--batch-size", "8"]
    argv += ["--augment", "crop_flip", "--data-pipeline", "numpy", "--norm", "deescalate", "--verbose", "0"]
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3", "PYTHONPATH": ROOT}

    def run(stop_after, out, *more):
        command = [sys.executable, "-c", STOP_AFTER, str(stop_after), *argv, *more, "--out", str(out)]
        done = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
        return done.returncode, done.stderr[-2000:]

    code, err = run(99, tmp_path / "memory")
    assert code == 0, err
    assert run(1, tmp_path / "streamed", "--stream")[0] == 130  # stopped inside epoch 2, backed up after epoch 1
    code, err = run(99, tmp_path / "streamed", "--stream")
    assert code == 0, err

    def rows(folder):
        with open(tmp_path / folder / "deescalate" / "history.csv", newline="") as f:
            return [{k: v for k, v in row.items() if k.split("_")[0] in ("epoch", "loss", "accuracy", "val")}
                    for row in csv.DictReader(f)]  # fmt: skip

    memory = rows("memory")
    assert len(memory) == 3 and rows("streamed") == memory


def test_stream_reads_only_an_image_folder_with_the_numpy_pipeline(tmp_path, capsys):
    """`--stream` with a benchmark set, or with tf.data asked for: one line each, before any image is read."""
    from keras_tse.cli import main as cli

    folder = _folder(tmp_path / "images", per_class=2)
    code = cli.main(["train", "vit", "--dataset", "digits", "--stream", "--out", str(tmp_path / "a")])
    assert (
        code == 2
        and "--stream: received with --dataset digits; expected --dataset folder or npz (read batch by batch)"
        in capsys.readouterr().err
    )
    argv = ["train", "vit", "--dataset", "folder", "--data-dir", folder, "--stream", "--data-pipeline", "tf"]
    assert cli.main([*argv, "--depth", "1", "--out", str(tmp_path / "b")]) == 2
    assert "--data-pipeline: received tf with --stream; expected numpy" in capsys.readouterr().err


def _arrays(path, compressed=False, grey=True):
    rng = np.random.default_rng(0)
    shape = (30, 8, 8) if grey else (30, 8, 8, 3)
    save = np.savez_compressed if compressed else np.savez
    x, x_test = rng.uniform(0, 255, shape).astype("float32"), rng.integers(0, 256, (9, *shape[1:]), dtype="uint8")
    save(path, x_train=x, y_train=np.arange(30) % 3, x_test=x_test, y_test=np.arange(9) % 3)
    return str(path)


def test_an_npz_streamed_reads_the_arrays_numpy_loads_row_for_row(tmp_path):
    """`load_npz(path, stream=True)`: each split memory-mapped where numpy.savez stored it, indexed as an array is
    (an int, a slice, an int array, a mask; subsets of subsets), a grey image's channel added; its conversion the
    array `numpy.load` gives; a compressed file's arrays, which cannot be read in place, refused in one line."""
    from keras_tse._checks import InputError

    path = _arrays(tmp_path / "d.npz")
    (x, y), (x_test, _) = own.load_npz(path)
    (sx, sy), (sx_test, _) = own.load_npz(path, stream=True)
    assert isinstance(sx, own.StoredRows) and isinstance(sx.array, np.memmap)
    assert sx.shape == x.shape == (30, 8, 8, 1) and sx.dtype == x.dtype and sx_test.dtype == np.uint8
    np.testing.assert_array_equal(np.asarray(sx), x)
    np.testing.assert_array_equal(np.asarray(sx_test), x_test)
    np.testing.assert_array_equal(sy, y)
    rows = np.array([5, 0, 29, 5])
    np.testing.assert_array_equal(sx[7], x[7])
    for key in (slice(3, 11), rows, np.arange(30) % 4 == 1):
        np.testing.assert_array_equal(np.asarray(sx[key]), x[key])
    np.testing.assert_array_equal(np.asarray(sx[rows][1:3]), x[rows][1:3])
    with pytest.raises(InputError, match=r"x_train: received a compressed array \(numpy.savez_compressed\); expected"):
        own.load_npz(_arrays(tmp_path / "c.npz", compressed=True), stream=True)


def test_an_npz_streamed_trains_as_in_memory_digit_for_digit(tmp_path, capsys):
    """`keras-tse train vit --dataset npz --stream`: every epoch's losses and accuracies are the in-memory run's, to
    the last digit (the same arrays, statistics, order and crop-and-flip draws)."""
    from keras_tse.cli import main as cli

    path = _arrays(tmp_path / "d.npz", grey=False)
    argv = ["train", "vit", "--dataset", "npz", "--data-dir", path, "--patch-size", "4", "--depth", "1"]
    argv += ["--hidden-dim", "8", "--num-heads", "2", "--epochs", "2", "--batch-size", "8", "--augment", "crop_flip"]
    argv += ["--data-pipeline", "numpy", "--norm", "deescalate", "--verbose", "0"]
    histories = []
    for out, more in (("memory", []), ("streamed", ["--stream"])):
        assert cli.main([*argv, *more, "--out", str(tmp_path / out)]) == 0, capsys.readouterr().err[-2000:]
        with open(tmp_path / out / "deescalate" / "history.csv", newline="") as f:
            histories.append([{k: v for k, v in row.items() if k.split("_")[0] in ("epoch", "loss", "accuracy", "val")}
                              for row in csv.DictReader(f)])  # fmt: skip
    assert len(histories[0]) == 2 and histories[1] == histories[0]
