"""Transformer-XL training on the offline corpus: data path, fit with memory, checkpoints, resume."""

import csv
import hashlib
import os
import zipfile

import keras
import numpy as np
import pytest

from keras_tse import data, losses, zoo
from keras_tse.data import wikitext
from keras_tse.training import LMTrainConfig, fit_language_model, read_history, read_steps
from tests.helpers import only_on

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

SMALL = dict(depth=2, hidden_dim=32, num_heads=2, head_dim=16, ffn_dim=64, segment_len=16, mem_len=16, batch_size=4,
             cutoffs=(100, 300))  # fmt: skip


@pytest.fixture(scope="module")
def corpus():
    return data.load_python_docs(max_vocab=600)


def _model(norm, vocab_size=600, **kwargs):
    return zoo.transformer_xl(norm=norm, vocab_size=vocab_size, **{**SMALL, **kwargs})


# --- data ---------------------------------------------------------------------------------------


@pytest.mark.one_backend
def test_vocabulary_orders_by_count_with_eos_first():
    vocab = data.Vocabulary.build(["b a b", "c b a", ""])
    assert vocab.symbols == ["<eos>", "b", "a", "c"]
    np.testing.assert_array_equal(vocab.encode(["a c", ""]), [2, 3, 0, 0])  # <eos> after every line
    capped = data.Vocabulary.build(["b a b", "c b a"], max_size=3)
    assert capped.symbols == ["<eos>", "<unk>", "b"]
    np.testing.assert_array_equal(capped.encode(["a b"]), [1, 2, 0])
    with pytest.raises(ValueError, match="'zebra' is not in the vocabulary"):
        vocab.encode(["zebra"])


@pytest.mark.one_backend
def test_lm_segments_is_transformer_xl_ordered_iterator():
    ids = np.arange(23)  # 2 streams of 11 tokens (one dropped); windows of 3: (11 - 1) // 3 = 3 windows
    x, y = data.lm_segments(ids, batch_size=2, segment_len=3)
    np.testing.assert_array_equal(x, [[0, 1, 2], [11, 12, 13], [3, 4, 5], [14, 15, 16], [6, 7, 8], [17, 18, 19]])
    np.testing.assert_array_equal(y, x + 1)
    with pytest.raises(ValueError, match="Too few tokens"):
        data.lm_segments(np.arange(5), batch_size=2, segment_len=3)


@pytest.mark.one_backend
def test_segment_stream_reads_on_across_epochs_and_wraps():
    x, y = data.lm_segments(np.arange(23), batch_size=2, segment_len=3)  # 3 windows
    stream = data.SegmentStream(x, y, batch_size=2, steps_per_epoch=2)
    assert len(stream) == 2
    firsts = []
    for epoch in range(3):
        stream.set_epoch(epoch)
        firsts += [int(stream[i][0][0, 0]) for i in range(2)]
    assert firsts == [0, 3, 6, 0, 3, 6]  # global steps 0..5 read windows 0, 1, 2, 0, 1, 2


@pytest.mark.one_backend
def test_a_stream_read_from_the_ids_gives_lm_segments_batches_as_views_of_a_memory_mapped_file(tmp_path):
    """`SegmentStream.from_ids` over a memory-mapped token file: for several batch sizes, segment lengths and shards,
    every batch of three epochs (wrapping around) equals the one the copied `lm_segments` arrays give, and is a view
    of the file's map, not a copy of the corpus."""
    ids = np.arange(1_003, dtype="int32")
    np.save(tmp_path / "ids.npy", ids)
    mapped = np.load(tmp_path / "ids.npy", mmap_mode="r")
    for batch, segment, shard in ((4, 7, (0, 1)), (6, 5, (1, 3)), (2, 3, (1, 2))):
        x, y = data.lm_segments(ids, batch, segment, shard)
        copied = data.SegmentStream(x, y, batch // shard[1], steps_per_epoch=5)
        read = data.SegmentStream.from_ids(mapped, batch, segment, steps_per_epoch=5, shard=shard)
        assert read.windows == copied.windows and len(read) == 5
        for epoch in range(3):
            copied.set_epoch(epoch)
            read.set_epoch(epoch)
            for i in range(5):
                for expected, got in zip(copied[i], read[i]):
                    np.testing.assert_array_equal(got, expected)
                    assert np.shares_memory(got, mapped)


@pytest.mark.one_backend
def test_python_docs_corpus_is_real_text_split_in_three(corpus):
    ids, vocab = corpus
    assert len(vocab) == 600 and vocab.symbols[:3] == ["<eos>", "<unk>", "the"]
    assert len(ids["train"]) > 50_000 and len(ids["valid"]) > 5_000 and len(ids["test"]) > 5_000


def _fake_wikitext(folder):
    os.makedirs(folder, exist_ok=True)
    texts = {"train": " = Title = \n the cat sat on the mat \n the end \n", "valid": " the cat \n", "test": " mat \n"}
    for split, text in texts.items():
        with open(os.path.join(folder, f"wiki.{split}.tokens"), "w") as f:
            f.write(text)


@pytest.mark.one_backend
def test_wikitext_from_the_standard_layout_and_then_from_its_cache(tmp_path):
    _fake_wikitext(tmp_path / "wikitext-103")
    ids, vocab = data.load_wikitext103(str(tmp_path), download=False)
    assert vocab.symbols[:2] == ["<eos>", "the"]
    assert vocab.decode(ids["valid"]) == "the cat <eos>"
    assert all((tmp_path / "wikitext-103" / wikitext.CACHE.format(split=s)).exists() for s in wikitext.SPLITS)
    assert isinstance(ids["train"], np.memmap)  # a token file, read memory-mapped
    os.remove(tmp_path / "wikitext-103" / "wiki.train.tokens")  # the cache alone must do now
    again, vocab_again = data.load_wikitext103(str(tmp_path), download=False)
    assert vocab_again.symbols == vocab.symbols
    np.testing.assert_array_equal(again["train"], ids["train"])


@pytest.mark.one_backend
def test_wikitext_missing_names_the_zip_and_the_place(tmp_path):
    with pytest.raises(FileNotFoundError, match=rf"wikitext-103-v1.zip.*{wikitext.MD5}.*put it at {tmp_path}"):
        data.load_wikitext103(str(tmp_path), download=False)


@pytest.mark.one_backend
def test_wikitext_zip_with_wrong_checksum_is_refused(tmp_path):
    _fake_wikitext(tmp_path / "src" / "wikitext-103")
    with zipfile.ZipFile(tmp_path / wikitext.ARCHIVE, "w") as z:
        for name in os.listdir(tmp_path / "src" / "wikitext-103"):
            z.write(tmp_path / "src" / "wikitext-103" / name, f"wikitext-103/{name}")
    with pytest.raises(ValueError, match=f"expected {wikitext.MD5}"):
        data.load_wikitext103(str(tmp_path))


@pytest.mark.one_backend
def test_wikitext_download_tries_every_mirror_through_get_file(tmp_path, monkeypatch):
    """file:// mirrors: none answers -> the message names the failure and leaves nothing behind; the
    first missing and the second serving -> keras.utils.get_file fetches from the second."""
    missing = [(tmp_path / f"mirror{i}" / wikitext.ARCHIVE).as_uri() for i in (1, 2)]
    monkeypatch.setattr(wikitext, "URLS", tuple(missing))
    with pytest.raises(FileNotFoundError, match=r"the download failed: .*mirror1.*mirror2"):
        data.load_wikitext103(str(tmp_path / "data"))
    assert not (tmp_path / "data" / wikitext.ARCHIVE).exists()

    served = tmp_path / "served"
    served.mkdir()
    with zipfile.ZipFile(served / wikitext.ARCHIVE, "w") as z:
        for split in ("train", "valid", "test"):
            z.writestr(f"wikitext-103/wiki.{split}.tokens", " = Title = \n the cat sat on the mat \n")
    monkeypatch.setattr(wikitext, "URLS", (missing[0], (served / wikitext.ARCHIVE).as_uri()))
    monkeypatch.setattr(wikitext, "MD5", hashlib.md5((served / wikitext.ARCHIVE).read_bytes()).hexdigest())
    ids, vocab = data.load_wikitext103(str(tmp_path / "data"))
    assert len(ids["train"]) == len(ids["test"]) > 0 and "cat" in vocab.symbols


# --- fit with memory ----------------------------------------------------------------------------


def _stream_loss(model, x, y):
    return model.evaluate(x, y, batch_size=model.input.shape[0], verbose=0)


@pytest.mark.parametrize("norm", [only_on("post", "tensorflow"), only_on("pre", "jax"), only_on("deescalate", "torch")])
def test_fit_on_the_offline_corpus_lowers_the_loss(corpus, norm):
    ids, _ = corpus
    model = _model(norm)
    x, y = data.lm_segments(ids["train"], 4, 16)
    x, y = x[:160], y[:160]  # 40 ordered batches
    model.compile(keras.optimizers.Adam(2e-3), losses.LogProbabilityCrossentropy())
    before = _stream_loss(model, x, y)
    model.fit(x, y, batch_size=4, epochs=3, verbose=0)
    after = _stream_loss(model, x, y)
    assert after < before - 0.5, (before, after)
    memory_length = [w for w in model.non_trainable_weights if w.path.endswith("memory_length")]
    assert all(int(keras.ops.convert_to_numpy(w)) == 16 for w in memory_length)  # evaluate filled it


@pytest.mark.skipif(
    keras.backend.backend() == "tensorflow", reason="a training regression test, run under JAX and PyTorch (CI time)"
)
def test_deep_deescalated_model_trains_from_a_fresh_memory(corpus):
    # Regression: with tau = 1, position 0 of a fresh stream used to be de-escalated to an exact zero
    # vector, whose LayerNorm Jacobian (1/sqrt(eps) per norm) overflowed the gradient at depth >= 8.
    ids, _ = corpus
    model = zoo.from_preset("transformer_xl8_small", vocab_size=600, cutoffs=(100, 300))
    x, y = data.lm_segments(ids["train"], 8, 32)
    model.compile(keras.optimizers.Adam(2.5e-4), losses.LogProbabilityCrossentropy())
    history = model.fit(x[:48], y[:48], batch_size=8, epochs=1, verbose=0)
    assert np.isfinite(history.history["loss"][0])


def test_evaluate_starts_from_an_empty_memory_every_time(corpus):
    ids, _ = corpus
    model = _model("deescalate")
    x, y = data.lm_segments(ids["valid"], 4, 16)
    model.compile(keras.optimizers.Adam(1e-3), losses.LogProbabilityCrossentropy())
    first = _stream_loss(model, x[:16], y[:16])
    model(x[16:20])  # leaves other states in the memory
    assert _stream_loss(model, x[:16], y[:16]) == pytest.approx(first, rel=1e-6)


def test_checkpoint_reloads_with_its_memory_and_training_continues(corpus, tmp_path):
    ids, _ = corpus
    model = _model("deescalate")
    x, y = data.lm_segments(ids["train"], 4, 16)
    x, y = x[:80], y[:80]
    model.compile(keras.optimizers.Adam(2e-3), losses.LogProbabilityCrossentropy())
    model.fit(x, y, batch_size=4, epochs=1, verbose=0)
    path = str(tmp_path / "txl.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert isinstance(loaded, zoo.TransformerXL)
    for a, b in zip(model.weights, loaded.weights):
        assert a.path == b.path and tuple(a.shape) == tuple(b.shape)
        np.testing.assert_array_equal(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b))
    memory = loaded.get_layer("block_00").memory
    assert tuple(memory.shape) == (4, 16, 32) and np.abs(keras.ops.convert_to_numpy(memory)).max() > 0
    steps_before = int(keras.ops.convert_to_numpy(loaded.optimizer.iterations))
    before = _stream_loss(loaded, x, y)
    loaded.fit(x, y, batch_size=4, epochs=2, verbose=0)
    assert int(keras.ops.convert_to_numpy(loaded.optimizer.iterations)) == steps_before + 40
    assert _stream_loss(loaded, x, y) < before


class _StopAt(keras.callbacks.Callback):
    """Fails at the start of an epoch, as a killed process would, after the backup of the one before."""

    def __init__(self, epoch):
        super().__init__()
        self.epoch = epoch

    def on_epoch_begin(self, epoch, logs=None):
        if epoch == self.epoch:
            raise KeyboardInterrupt


@pytest.mark.one_backend  # the stream and the resume are the backend-independent part; loading is checked per backend
def test_interrupted_run_resumes_reading_the_stream_where_it_stopped(corpus, tmp_path, monkeypatch):
    ids, vocab = corpus
    config = LMTrainConfig(steps=12, eval_interval=4, batch_size=4, learning_rate=1e-3, log_interval=2)
    run_dir = str(tmp_path / "run")
    import keras_tse.training.language_model as lm

    real_train = lm.train_run

    def interrupted(*args, extra_callbacks=(), **kwargs):
        return real_train(*args, extra_callbacks=[*extra_callbacks, _StopAt(2)], **kwargs)

    monkeypatch.setattr(lm, "train_run", interrupted)
    with pytest.raises(KeyboardInterrupt):
        fit_language_model(_model("post"), ids["train"], ids["valid"], run_dir, config, verbose=0)
    assert [int(e) for e in read_history(os.path.join(run_dir, "history.csv"))["epoch"]] == [0, 1]
    monkeypatch.setattr(lm, "train_run", real_train)
    seen = []
    original_getitem = data.SegmentStream.__getitem__

    def spy(self, index):
        seen.append((self.epoch * self.steps_per_epoch + index) % self.windows)
        return original_getitem(self, index)

    monkeypatch.setattr(data.SegmentStream, "__getitem__", spy)
    summary = fit_language_model(_model("post"), ids["train"], ids["valid"], run_dir, config, verbose=0)
    assert summary["epochs"] == 3
    assert seen[-4:] == [8, 9, 10, 11], seen  # epoch 2 read on at step 8
    assert not any(2 <= w < 8 for w in seen), seen  # not from the start (windows 0, 1: Keras peeking at the spec)
    steps, values = read_steps(os.path.join(run_dir, "steps.csv"))
    np.testing.assert_array_equal(steps, [2, 4, 6, 8, 10, 12])
    assert np.isfinite(values).all()
    with open(os.path.join(run_dir, "history.csv")) as f:
        rows = list(csv.DictReader(f))
    assert [int(r["epoch"]) for r in rows] == [0, 1, 2]
    assert float(rows[-1]["val_perplexity"]) == pytest.approx(np.exp(float(rows[-1]["val_loss"])), rel=1e-6)


class _MemoryAtEpochBegin(keras.callbacks.Callback):
    """Records how many memory slots of block_00 are filled when each epoch begins."""

    def __init__(self):
        super().__init__()
        self.filled = []

    def on_epoch_begin(self, epoch, logs=None):
        block = self.model.get_layer("block_00")
        self.filled.append(int(keras.ops.convert_to_numpy(block.memory_length)))


def test_fit_empties_the_memory_at_each_epoch_start(corpus):
    ids, _ = corpus
    model = _model("post")
    x, y = data.lm_segments(ids["train"], 4, 16)
    model.compile(keras.optimizers.Adam(1e-3), losses.LogProbabilityCrossentropy())
    model(x[:4])  # fills the memory before fit
    spy = _MemoryAtEpochBegin()
    model.fit(x[:40], y[:40], batch_size=4, epochs=2, verbose=0, callbacks=[spy])  # ResetMemory runs first
    assert spy.filled == [0, 0]
    assert int(keras.ops.convert_to_numpy(model.get_layer("block_00").memory_length)) == 16  # kept within


def test_a_leaky_model_is_also_read_causally_with_its_own_weights(corpus, tmp_path):
    """`causal_twin`: the leaky model's trained weights, evaluated in the causal model, give the second
    test perplexity; it is what an independent causal model holding those weights computes."""
    from keras_tse.training.language_model import evaluate_stream

    ids, _ = corpus
    config = LMTrainConfig(steps=8, eval_interval=8, batch_size=4, learning_rate=1e-3, log_interval=4)
    keras.utils.set_random_seed(0)
    leaky = _model("deescalate_leaky_global")
    test = ids["test"][: 4 * 16 * 3 + 1]
    summary = fit_language_model(
        leaky,
        ids["train"],
        ids["valid"],
        str(tmp_path / "run"),
        config,
        verbose=0,
        test_ids=test,
        causal_twin=lambda: _model("deescalate"),
    )
    independent = _model("deescalate")
    for source, target in zip(leaky.trainable_weights, independent.trainable_weights):
        target.assign(keras.ops.convert_to_numpy(source))
    independent.compile(loss=losses.LogProbabilityCrossentropy())
    assert summary["test_loss_causal"] == pytest.approx(evaluate_stream(independent, test), rel=1e-5)
    assert abs(summary["test_loss_causal"] - summary["test_loss"]) > 1e-3  # the mean is not the same mean
    assert summary["test_perplexity_causal"] == pytest.approx(np.exp(summary["test_loss_causal"]))
