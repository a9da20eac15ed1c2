"""AttentionDiagnostics: the callback's numbers are the spectral functions applied to each block."""

import csv

import keras
import numpy as np
import pytest
from keras import ops

from keras_tse.analysis import spectral
from keras_tse.analysis.diagnostics import block_diagnostics
from keras_tse.callbacks import AttentionDiagnostics
from tests.helpers import tiny_transformer_xl, tiny_vit

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py


def _tiny_vit():
    return tiny_vit(norm="post")


def test_diagnostics_equal_the_spectral_functions_on_each_block():
    model = _tiny_vit()
    x = np.random.default_rng(0).standard_normal((3, 8, 8, 1)).astype("float32")
    stats = block_diagnostics(model, x)
    block_1 = model.get_layer("block_01")
    block_1_input = keras.Model(model.input, block_1.input)(x)
    _, scores = block_1(block_1_input, return_attention_scores=True)
    expected_entropy = np.mean(ops.convert_to_numpy(spectral.attention_entropy(scores)), axis=0)
    np.testing.assert_allclose(stats[1]["entropy"], expected_entropy, rtol=1e-5)
    attention = block_1.self_attention
    qk = spectral.qk_spectrum(attention.query_dense.kernel, attention.key_dense.kernel, num_heads=2)
    np.testing.assert_allclose(stats[1]["variance"], ops.convert_to_numpy(qk["variance"]), rtol=1e-5)
    assert len(stats) == 2 and stats[0]["entropy"].shape == (2,)
    assert np.all(stats[0]["entropy"] <= np.log(17) + 1e-5)  # 16 patches + class token


def test_callback_logs_and_csv_during_fit(tmp_path):
    model = _tiny_vit()
    rng = np.random.default_rng(1)
    x, y = rng.standard_normal((16, 8, 8, 1)).astype("float32"), rng.integers(0, 10, 16)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    callback = AttentionDiagnostics(x[:4], csv_path=str(tmp_path / "attention.csv"))
    history = model.fit(x, y, batch_size=8, epochs=2, verbose=0, callbacks=[callback])
    assert sorted(k for k in history.history if k != "loss") == ["entropy_last", "qk_variance_last"]
    with open(tmp_path / "attention.csv") as f:
        rows = list(csv.DictReader(f))
    second = [float(r["entropy"]) for r in rows if r["epoch"] == "1" and r["block"] == "1"]
    assert history.history["entropy_last"][-1] == pytest.approx(np.mean(second), rel=1e-5)
    assert len(rows) == 3 * 2 * 2  # train begin + 2 epoch ends, x 2 blocks x 2 heads
    assert {r["when"] for r in rows} == {"train_begin", "epoch_end"}
    final = block_diagnostics(model, x[:4])
    last = [r for r in rows if r["epoch"] == "1" and r["block"] == "1"]
    np.testing.assert_allclose([float(r["entropy"]) for r in last], final[1]["entropy"], rtol=1e-4)


def test_transformer_xl_probe_leaves_the_memory_as_found():
    model = tiny_transformer_xl()
    ids = np.random.default_rng(2).integers(0, 40, (6, 6)).astype("int32")
    model(ids[:2])
    before = [ops.convert_to_numpy(v) for v in model.non_trainable_variables]
    stats = block_diagnostics(model, ids[4:6], warmup_inputs=ids[2:4])
    after = [ops.convert_to_numpy(v) for v in model.non_trainable_variables]
    for a, b in zip(before, after):
        np.testing.assert_array_equal(a, b)
    assert all(np.isfinite(s["entropy"]).all() and s["entropy"].shape == (2,) for s in stats)
    # with a filled memory, query rows see up to 12 keys: entropy may exceed log(6) but not log(12)
    assert all((s["entropy"] <= np.log(12) + 1e-5).all() for s in stats)


def test_logs_all_and_tensorboard(tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    model = _tiny_vit()
    x = np.random.default_rng(1).standard_normal((8, 8, 8, 1)).astype("float32")
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    callback = AttentionDiagnostics(x[:4], logs="all", tensorboard_dir=str(tmp_path / "tb"))
    history = model.fit(x, np.zeros(8, "int32"), batch_size=8, epochs=1, verbose=0, callbacks=[callback])
    assert {"entropy_0", "entropy_1", "qk_variance_0", "qk_variance_1"} <= set(history.history)
    events = EventAccumulator(str(tmp_path / "tb"))
    events.Reload()
    values = [e.value for e in events.Scalars("entropy/block_1")]  # train begin, epoch end
    assert len(values) == 2 and values[-1] == pytest.approx(history.history["entropy_1"][-1], rel=1e-6)


@pytest.mark.one_backend
def test_bad_frequency_is_refused():
    with pytest.raises(ValueError, match="Received: every_n_batches=0"):
        AttentionDiagnostics(np.zeros((1, 8, 8, 1)), every_n_batches=0)
