import hashlib
import os
import pickle
import tarfile

import keras
import numpy as np
import pytest

from keras_tse import data
from keras_tse.data import cifar10

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py


@pytest.fixture(autouse=True)
def _fake_cifar_counts(monkeypatch):
    """The fake release below: labels 0-3, one each per batch (5 training batches, 1 test batch)."""
    monkeypatch.setattr(cifar10, "COUNTS", {"train": [5] * 4 + [0] * 6, "test": [1] * 4 + [0] * 6})


def _write_fake_cifar(folder, n=4):
    folder.mkdir(parents=True)
    rng = np.random.default_rng(0)
    for name in cifar10.TRAIN_BATCHES + cifar10.TEST_BATCHES:
        batch = {b"data": rng.integers(0, 256, (n, 3072), dtype=np.uint8), b"labels": list(range(n))}
        with open(folder / name, "wb") as f:
            pickle.dump(batch, f)
    return batch


def test_reads_the_extracted_python_release(tmp_path):
    last = _write_fake_cifar(tmp_path / cifar10.FOLDER)
    (x_train, y_train), (x_test, y_test) = data.load_cifar10(str(tmp_path), download=False)
    assert x_train.shape == (20, 32, 32, 3) and x_test.shape == (4, 32, 32, 3) and x_train.dtype == np.uint8
    # channel-first rows of 1024 values become HWC: pixel (0, 1) of channel 2 is value 2048 + 1
    assert x_test[0, 0, 1, 2] == last[b"data"][0, 2048 + 1]
    np.testing.assert_array_equal(y_test, [0, 1, 2, 3])


def test_a_release_with_other_class_counts_is_refused(tmp_path, monkeypatch):
    _write_fake_cifar(tmp_path / cifar10.FOLDER)
    monkeypatch.setattr(cifar10, "COUNTS", {"train": [5000] * 10, "test": [1000] * 10})  # the real release's
    with pytest.raises(ValueError, match=r"CIFAR-10 train from .* per-class counts \[5, 5, 5, 5, 0"):
        data.load_cifar10(str(tmp_path), download=False, source="files")


def test_unknown_source_is_refused(tmp_path):
    with pytest.raises(ValueError, match=r"Received: source='tfds2'"):
        data.load_cifar10(str(tmp_path), source="tfds2")


def test_no_files_and_no_download_names_the_file_and_place(tmp_path):
    with pytest.raises(FileNotFoundError, match=r"cifar-10-python.tar.gz.*c58f30108f718f92721af3b95e74349a"):
        data.load_cifar10(str(tmp_path), download=False)


def _cifar_archive(tmp_path):
    """A small archive in the CIFAR-10 layout, served from a file:// origin, and its MD5."""
    last = _write_fake_cifar(tmp_path / "src" / cifar10.FOLDER)
    origin = tmp_path / "origin"
    origin.mkdir()
    with tarfile.open(origin / cifar10.ARCHIVE, "w:gz") as tar:
        tar.add(tmp_path / "src" / cifar10.FOLDER, arcname=cifar10.FOLDER)
    return origin / cifar10.ARCHIVE, hashlib.md5((origin / cifar10.ARCHIVE).read_bytes()).hexdigest(), last


def test_download_goes_through_keras_get_file_and_checks_the_hash(tmp_path, monkeypatch):
    """The online path with a local file:// origin: keras.utils.get_file fetches, checks the MD5,
    and the archive is extracted and read; an origin whose bytes have another hash is refused."""
    archive, md5, last = _cifar_archive(tmp_path)
    calls = []
    real_get_file = keras.utils.get_file
    monkeypatch.setattr(keras.utils, "get_file", lambda *a, **k: calls.append(a) or real_get_file(*a, **k))
    monkeypatch.setattr(cifar10, "URL", archive.as_uri())
    monkeypatch.setattr(cifar10, "MD5", md5)
    (_, _), (x_test, _) = data.load_cifar10(str(tmp_path / "data"))
    assert x_test[0, 0, 1, 2] == last[b"data"][0, 2048 + 1]
    assert calls == [(cifar10.ARCHIVE, archive.as_uri())]

    monkeypatch.setattr(cifar10, "MD5", "0" * 32)  # the origin now serves bytes of another hash
    with pytest.raises(ValueError, match=r"(?i)hash|corrupt"):
        data.load_cifar10(str(tmp_path / "again"))
    assert not (tmp_path / "again" / cifar10.ARCHIVE).exists()  # nothing left to pass for the archive


def test_failed_download_says_what_to_fetch(tmp_path, monkeypatch):
    monkeypatch.setattr(cifar10, "URL", (tmp_path / "no-such-origin" / cifar10.ARCHIVE).as_uri())
    with pytest.raises(FileNotFoundError, match=rf"put it at {tmp_path}/cifar-10-python.tar.gz"):
        data.load_cifar10(str(tmp_path))
    assert not (tmp_path / cifar10.ARCHIVE).exists()  # no half-downloaded file left to pass for the archive


def test_archive_with_wrong_checksum_is_refused(tmp_path):
    _write_fake_cifar(tmp_path / "src" / cifar10.FOLDER)
    with tarfile.open(tmp_path / cifar10.ARCHIVE, "w:gz") as tar:
        tar.add(tmp_path / "src" / cifar10.FOLDER, arcname=cifar10.FOLDER)
    with pytest.raises(ValueError, match="expected c58f30108f718f92721af3b95e74349a"):
        data.load_cifar10(str(tmp_path))


def test_synthetic_set_has_cifar_format_and_balanced_classes():
    (x, y), (xt, yt) = data.synthetic_cifar10(num_train=300, num_test=50)
    assert x.shape == (300, 32, 32, 3) and x.dtype == np.uint8 and xt.shape == (50, 32, 32, 3)
    assert set(np.unique(y)) == set(range(10))


# SHA-256 of `sklearn.datasets.load_digits()`'s `images` (float64) and `target` (int64) as C-ordered bytes
# (scikit-learn 1.9.1): the source the shipped file was written from. Not installed with the tests: Keras imports
# scikit-learn whenever it is there (its wrappers), 0.7 CPU-s in every process the suite starts.
SCIKIT_LEARN_DIGITS = {
    "images": "20def7f70a702f0af9732fbba4375e147a7d54fe70d8c45569b8e7c1c7010c10",
    "target": "a3c91c262eddcf7ba8f0e37507c30284493c9b20412ffe4af30d536401f7ba21",
}


def test_the_shipped_digits_are_scikit_learns_and_are_standardised():
    from keras_tse.data.digits import digit_images

    images, labels = digit_images()
    as_stored = {"images": images.astype(np.float64), "target": labels.astype(np.int64)}
    digests = {name: hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest() for name, a in as_stored.items()}
    assert digests == SCIKIT_LEARN_DIGITS
    (x, y), (xt, yt) = data.load_digits()
    assert x.shape == (1438, 8, 8, 1) and xt.shape == (359, 8, 8, 1)
    assert abs(x.mean()) < 1e-5 and abs(x.std() - 1) < 1e-5
    # the registered set: the images as stored, which its constants make exactly those standardised images
    spec = data.get_dataset("digits")
    (raw, raw_y), (raw_t, raw_yt) = spec.load_data()
    assert raw.dtype == np.uint8 and raw.max() == 16 and spec.value_range == (0, 16)
    np.testing.assert_array_equal(raw_y, y)
    np.testing.assert_array_equal(raw_yt, yt)
    np.testing.assert_array_equal(data.normalized(raw, **spec.normalization()), x)
    np.testing.assert_array_equal(data.normalized(raw_t, **spec.normalization()), xt)


def test_pipeline_normalises_augments_and_batches():
    (x, y), _ = data.synthetic_cifar10(num_train=70, num_test=10)
    mean, std = cifar10.MEAN, cifar10.STD
    plain = list(data.image_dataset(x, y, 32, mean=mean, std=std))
    assert [len(np.asarray(b[1])) for b in plain] == [32, 32, 6]
    np.testing.assert_allclose(np.asarray(plain[0][0]), data.normalized(x[:32], mean, std), atol=1e-5)
    np.testing.assert_allclose(np.asarray(plain[0][0]), (x[:32] / 255.0 - mean) / std, atol=1e-5)
    augmented = np.asarray(next(iter(data.image_dataset(x, y, 32, augment=True, mean=mean, std=std)))[0])
    assert augmented.shape == (32, 32, 32, 3) and not np.allclose(augmented, np.asarray(plain[0][0]))


def _moved_or_mirrored(image, source, pad):
    """Whether `image` is `source` shifted by at most `pad` pixels each way (zeros shifted in), mirrored
    left-right or not."""
    height, width = source.shape
    for candidate in (source, source[:, ::-1]):
        padded = np.pad(candidate, pad)
        for dy in range(2 * pad + 1):
            for dx in range(2 * pad + 1):
                if np.array_equal(image, padded[dy : dy + height, dx : dx + width]):
                    return True
    return False


@pytest.mark.every_backend  # without tf.data, Keras's layers run on this backend's ops
@pytest.mark.parametrize("pipeline", ["numpy", "tf"])
def test_crop_flip_is_a_padded_random_crop_and_a_flip_the_same_for_the_same_seed(pipeline):
    from keras_tse.data.pipeline import CROP_PAD

    x = np.random.default_rng(0).integers(1, 256, (16, 12, 12, 1)).astype("uint8")  # no 0: the padding is 0
    y = np.arange(16) % 2

    def first_batch(seed):
        batches = data.image_dataset(x, y, 16, augment="crop_flip", seed=seed, pipeline=pipeline)
        return np.asarray(next(iter(batches))[0])[..., 0]

    batch = first_batch(3)
    np.testing.assert_array_equal(first_batch(3), batch)
    assert not np.array_equal(first_batch(4), batch)
    assert all(_moved_or_mirrored(image, source, CROP_PAD) for image, source in zip(batch, x[..., 0]))
    assert sum(not np.array_equal(image, source) for image, source in zip(batch, x[..., 0])) > 8
    with pytest.raises(ValueError, match=r"`augment` must be one of \('randaugment', 'crop_flip', 'none'\)"):
        data.image_dataset(x, y, 16, augment="flip")


@pytest.mark.parametrize("augment", ["crop_flip", "randaugment", "crop_flip+mix"])
def test_an_epochs_augmented_batches_do_not_depend_on_how_far_a_dropped_pass_ran_ahead(augment):
    """Keras's `fit` draws one batch from an iterator to build the model and drops it; prefetch has by
    then augmented a timing-dependent number of batches. Each batch draws from its own seed, so the next
    pass's batches are the same whether the dropped one took one batch or five, and each epoch differs."""
    x = np.random.default_rng(0).integers(1, 256, (96, 12, 12, 3)).astype("uint8")
    mix = dict(mixup=0.8, cutmix=1.0, num_classes=3) if augment.endswith("+mix") else {}
    augment = augment.removesuffix("+mix")

    def passes_after_dropping(ahead):
        batches = data.image_dataset(x, np.arange(96) % 3, 16, augment=augment, seed=3, pipeline="tf", **mix)
        dropped = iter(batches)
        for _ in range(ahead):
            next(dropped)
        del dropped
        passes = []
        for epoch in range(2):  # what fit's callback does before each epoch's pass (`set_epoch`)
            batches.set_epoch(epoch)
            passes.append([np.asarray(batch[0]) for batch in batches])
        return passes

    after_one, after_five = passes_after_dropping(1), passes_after_dropping(5)
    for got, expected in zip(after_five, after_one):
        assert len(got) == len(expected) == 6 and all(map(np.array_equal, got, expected))
    assert not np.array_equal(after_one[0][0], after_one[1][0])  # every epoch draws anew


@pytest.mark.every_backend
@pytest.mark.skipif(keras.backend.backend() != "jax", reason="Keras' Equalization branches on JAX only")
def test_equalization_traced_for_tf_data_gives_the_same_images_with_tensorflows_histogram():
    import tensorflow as tf

    from keras_tse.data import pipeline

    images = np.random.default_rng(0).integers(0, 256, (4, 16, 16, 3)).astype("float32")
    layer = keras.layers.Equalization(value_range=(0, 255))
    spec = tf.TensorSpec([None, 16, 16, 3], tf.float32)
    looped = tf.function(lambda x: layer(x)).get_concrete_function(spec)
    with pipeline.equalization_as_in_tensorflow():
        counted = tf.function(lambda x: layer(x)).get_concrete_function(spec)
    # the loop over 256 bins is gone from the graph; the images are the same
    assert len(counted.graph.get_operations()) < len(looped.graph.get_operations()) / 5
    np.testing.assert_array_equal(counted(tf.constant(images)).numpy(), looped(tf.constant(images)).numpy())
    from keras.src.layers.preprocessing.image_preprocessing import equalization

    assert equalization.backend.backend() == "jax"  # put back


def test_numpy_pipeline_matches_tf_pipeline_shuffled_epoch_by_epoch():
    """Without augmentation the two pipelines give the same batches, shuffled too: each epoch's order is
    one definition (`epoch_order`), not each pipeline's own generator."""
    from keras_tse.data import pipeline

    (x, y), _ = data.synthetic_cifar10(num_train=40, num_test=10)
    scale = dict(mean=cifar10.MEAN, std=cifar10.STD, shuffle=True, seed=5)
    tf_data, numpy_data = (data.image_dataset(x, y, 16, pipeline=p, **scale) for p in ("tf", "numpy"))
    for number in (0, 1):
        tf_data.set_epoch(number)
        numpy_data.set_epoch(number)
        tf_batches = [tuple(np.asarray(t) for t in b) for b in tf_data]
        np_batches = [numpy_data[i] for i in range(len(numpy_data))]
        assert len(np_batches) == 3 == len(tf_batches)
        for (tf_x, tf_y), (np_x, np_y) in zip(tf_batches, np_batches):
            np.testing.assert_array_equal(tf_y, np_y)
            np.testing.assert_allclose(tf_x, np_x, atol=1e-6)
        order = pipeline.epoch_order(40, 5, number)
        np.testing.assert_array_equal(np.concatenate([b[1] for b in np_batches]), y[order])
    assert not np.array_equal(pipeline.epoch_order(40, 5, 0), pipeline.epoch_order(40, 5, 1))
    with pytest.raises(ValueError, match="Received: pipeline='torch'"):
        data.image_dataset(x, y, 16, pipeline="torch")


def test_tf_cpp_min_log_level_silences_tensorflows_start_up_notices():
    """TensorFlow 2.21 prints its start-up notices (twice) before absl's logging reads
    TF_CPP_MIN_LOG_LEVEL; imported through the data package, the variable is obeyed."""
    import importlib.util
    import subprocess
    import sys

    if importlib.util.find_spec("tensorflow") is None:
        pytest.skip("TensorFlow is not installed")
    code = "from keras_tse import data\nimport sys\nprint(data.tensorflow_if_installed() is sys.modules['tensorflow'])"
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=True)
    assert done.stdout.strip() == "True"
    assert "I0000" not in done.stderr and "absl::InitializeLog" not in done.stderr, done.stderr


def test_the_content_check_counts_the_classes_of_the_release_not_ten():
    from keras_tse.data._image_set import ImageSet, checked

    three = ImageSet("none", "Three", {"train": [2, 1, 1], "test": [1, 1, 1]}, (2, 2), None, None)
    x = np.zeros((4, 2, 2), "uint8")
    split = ((x, np.array([0, 0, 1, 2])), (x[:3], np.array([0, 1, 2])))
    assert checked(split, three, "here") is split
    with pytest.raises(ValueError, match=r"per-class counts \[1, 1, 1\], expected \[2, 1, 1\]"):
        checked(((x[:3], np.array([0, 1, 2])), split[1]), three, "here")
    with pytest.raises(ValueError, match=r"per-class counts \[0, 1, 2, 3\]"):  # a label past the classes
        checked(((x, np.array([0, 1, 2, 3])), split[1]), three, "here")


@pytest.mark.parametrize("pipeline", ["numpy", "tf"])
def test_an_epochs_batches_are_its_own_whatever_epochs_were_drawn_before(pipeline):
    """Epoch 1's shuffled, augmented and mixed batches are the same whether epoch 0 was drawn first or not
    (a run resumed at epoch 1 draws them so), and differ from epoch 0's: each a function of (seed, epoch,
    batch) alone (`set_epoch`), on both pipelines."""
    x = np.random.default_rng(0).integers(1, 256, (64, 12, 12, 3)).astype("uint8")
    settings = dict(augment="crop_flip", shuffle=True, seed=3, pipeline=pipeline, mixup=0.5, num_classes=3)

    def epoch(number, after=()):
        batches = data.image_dataset(x, np.arange(64) % 3, 16, **settings)
        for earlier in after:
            batches.set_epoch(earlier)
            list(batches) if pipeline == "tf" else [batches[i] for i in range(len(batches))]
        batches.set_epoch(number)
        drawn = list(batches) if pipeline == "tf" else [batches[i] for i in range(len(batches))]
        return [np.asarray(part) for batch in drawn for part in batch]

    resumed, whole = epoch(1), epoch(1, after=(0,))
    assert len(whole) == 8 and all(map(np.array_equal, resumed, whole))
    assert not np.array_equal(epoch(0)[0], whole[0])


def test_a_tf_data_epoch_has_a_known_number_of_batches_and_fit_never_says_the_input_ran_out(recwarn):
    """Every image once an epoch, the last batch the rest: 20 images in batches of 8 are 3 batches, which tf.data
    knows before a pass (else Keras warns at each epoch's end that the input ran out of data)."""
    x, y = np.random.default_rng(0).integers(0, 255, (20, 8, 8, 1), dtype=np.uint8), np.arange(20) % 2
    batches = data.image_dataset(x, y, 8, shuffle=True, seed=1, pipeline="tf")
    assert int(batches.cardinality()) == 3 and len(list(batches)) == 3
    model = keras.Sequential([keras.Input((8, 8, 1)), keras.layers.Flatten(), keras.layers.Dense(2)])
    model.compile("sgd", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(batches, epochs=2, verbose=0)
    assert not [w for w in recwarn if "ran out of data" in str(w.message)]


def test_a_text_file_is_read_line_by_line_as_its_whole_text_splits_and_a_bad_byte_is_named_where_it_is(tmp_path):
    """`own.TextLines` over chunks of 1 to 7 characters (cutting CRLF pairs, multi-byte characters and lines) gives
    the non-empty lines `read().splitlines()` gives, again at each pass; `own._check_utf8` over chunks of 1 to 7
    bytes names the same offset as decoding the whole file does."""
    from keras_tse._checks import InputError
    from keras_tse.data import own

    text = "caf\u00e9 au lait\r\n\r\n  two  words \rthird\x0cform feed\u2028sep \u65e5\u672c\n\n last"
    path = tmp_path / "t.txt"
    path.write_bytes(text.encode("utf-8"))
    expected = [line for line in text.splitlines() if line.strip()]
    for chunk in range(1, 8):
        lines = own.TextLines(str(path), chunk=chunk)
        assert list(lines) == expected and list(lines) == expected  # a second pass reads the file again
    # with its empty lines (WikiText's <eos>-only lines), a "\r\n" cut between chunks still one line break
    for ending in ("", "\r", "\r\n\n", "\n\r"):
        (tmp_path / "e.txt").write_bytes((text + ending).encode("utf-8"))
        for chunk in range(1, 8):
            lines = own.TextLines(str(tmp_path / "e.txt"), chunk=chunk, keep_empty=True)
            assert list(lines) == (text + ending).splitlines(), (ending, chunk)
    bad = tmp_path / "bad.txt"
    raw = "ab\u00e9c\n".encode() * 3 + b"x\xe9y\n"
    bad.write_bytes(raw)
    with pytest.raises(UnicodeDecodeError) as whole:
        raw.decode("utf-8")
    for chunk in range(1, 8):
        with pytest.raises(InputError, match=rf"bytes that are not UTF-8 \(at byte {whole.value.start}\)"):
            own._check_utf8(str(bad), chunk=chunk)
    cut = tmp_path / "cut.txt"
    cut.write_bytes("ab\u00e9".encode()[:-1])  # a character cut at the end of the file
    with pytest.raises(InputError, match=r"at byte 2\)"):
        own._check_utf8(str(cut), chunk=2)
    own._check_utf8(str(path), chunk=3)  # valid text: no complaint
