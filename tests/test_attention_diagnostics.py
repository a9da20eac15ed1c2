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


@pytest.mark.one_backend  # which keys reach the history, and the event file (the tensorboard package's writer): Python
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


def _keras_mha_like(block, causal_input, normalize):
    """Keras's own `MultiHeadAttention` given the KerasHub block's attention weights (by path), called on the
    block's input (layer-normalised as the block would): the ground truth for the diagnostics' recomputation."""
    weights = {w.path.split("/", 1)[1]: np.asarray(w) for w in block.weights}
    prefix = "self_attention_layer/" if "self_attention_layer/query/kernel" in weights else "self_attention/"
    heads, head_dim = weights[prefix + "query/kernel"].shape[1:]
    mha = keras.layers.MultiHeadAttention(heads, head_dim)
    x = causal_input
    if normalize:
        norm = keras.layers.LayerNormalization(epsilon=block.get_config()["layer_norm_epsilon"])
        norm.build(x.shape)
        norm.set_weights([weights["self_attention_layer_norm/gamma"], weights["self_attention_layer_norm/beta"]])
        x = norm(x)
    mha.build(x.shape, x.shape)
    names = ("query/kernel", "query/bias", "key/kernel", "key/bias", "value/kernel", "value/bias",
             "attention_output/kernel", "attention_output/bias")  # fmt: skip
    mha.set_weights([weights[prefix + name] for name in names])
    return mha, x


@pytest.mark.parametrize("kind", ["bert", "gpt2"])
def test_the_diagnostics_find_kerashub_blocks_and_read_their_attention_as_keras_computes_it(kind):
    """No layer list: a KerasHub BERT's encoder blocks and GPT-2's decoder blocks, bare or de-escalated, each give
    its entropy and QK spectrum; the probabilities recomputed from the block's weights equal Keras's own
    `MultiHeadAttention` on the same weights (GPT-2: its input normalised first, the causal mask)."""
    keras_hub = pytest.importorskip("keras_hub")
    import keras_tse
    from keras_tse.analysis.diagnostics import keras_hub_attention

    keras.utils.set_random_seed(0)
    sizes = dict(
        vocabulary_size=50, num_layers=2, num_heads=2, hidden_dim=8, intermediate_dim=16, max_sequence_length=8
    )
    ids = np.random.default_rng(0).integers(1, 50, (2, 8)).astype("int32")
    inputs = {"token_ids": ids, "padding_mask": np.ones((2, 8), "int32")}
    if kind == "bert":
        model, inputs = keras_hub.models.BertBackbone(**sizes), {**inputs, "segment_ids": np.zeros((2, 8), "int32")}
    else:
        model = keras_hub.models.GPT2Backbone(**sizes)
    stats = block_diagnostics(model, inputs)
    assert len(stats) == 2 and all(s["entropy"].shape == s["variance"].shape == (2,) for s in stats)
    block = model.transformer_layers[1]
    x = keras.Model(model.input, keras.tree.flatten(block.input)[0])(inputs)
    mha, attended = _keras_mha_like(block, x, normalize=kind == "gpt2")
    _, expected = mha(attended, attended, return_attention_scores=True, use_causal_mask=kind == "gpt2")
    scores, w_q, _, heads = keras_hub_attention(block, x)
    np.testing.assert_allclose(ops.convert_to_numpy(scores), ops.convert_to_numpy(expected), atol=1e-6)
    expected_entropy = np.mean(ops.convert_to_numpy(spectral.attention_entropy(expected)), axis=0)
    np.testing.assert_allclose(stats[1]["entropy"], expected_entropy, rtol=1e-5)
    assert heads == 2 and tuple(w_q.shape) == (8, 8)
    fixed = block_diagnostics(keras_tse.deescalate(model), inputs)  # the same weights: block 0 reads the same input
    np.testing.assert_allclose(fixed[0]["entropy"], stats[0]["entropy"], rtol=1e-5)
    np.testing.assert_allclose(fixed[1]["variance"], stats[1]["variance"], rtol=1e-5)
    if kind == "bert":  # inside a task the backbone is one layer: the same blocks, the same numbers
        task = keras_hub.models.BertMaskedLM(model, preprocessor=None)
        in_task = block_diagnostics(task, {**inputs, "mask_positions": np.array([[1, 3], [0, 5]], "int32")})
        np.testing.assert_allclose(in_task[1]["entropy"], stats[1]["entropy"], rtol=1e-5)


def test_the_diagnostics_read_kerashubs_vit_blocks_inside_its_encoder_loop():
    """KerasHub's ViT runs its blocks in one layer's loop (`ViTEncoder`): each block still gives its entropy, equal
    to the block's own Keras `MultiHeadAttention` on its input normalised by its `ln_1` (ViT is pre-norm), the
    input of block 1 being block 0's output; de-escalated, block 0 reads the same input."""
    keras_hub = pytest.importorskip("keras_hub")
    import keras_tse

    keras.utils.set_random_seed(0)
    vit = keras_hub.models.ViTBackbone(
        image_shape=(16, 16, 3), patch_size=4, num_layers=2, num_heads=2, hidden_dim=16, mlp_dim=32
    )
    images = np.random.default_rng(0).random((2, 16, 16, 3)).astype("float32")
    stats = block_diagnostics(vit, images)
    assert len(stats) == 2 and all(s["entropy"].shape == (2,) for s in stats)
    first, second = vit.get_layer("vit_encoder").encoder_layers
    x = first(vit.get_layer("vit_patching_and_embedding")(images))
    normalised = second.layer_norm_1(x)
    _, expected = second.mha(normalised, normalised, return_attention_scores=True)
    expected_entropy = np.mean(ops.convert_to_numpy(spectral.attention_entropy(expected)), axis=0)
    np.testing.assert_allclose(stats[1]["entropy"], expected_entropy, rtol=1e-5)
    fixed = block_diagnostics(keras_tse.deescalate(vit), images)
    np.testing.assert_allclose(fixed[0]["entropy"], stats[0]["entropy"], rtol=1e-5)
    assert not np.allclose(fixed[1]["entropy"], stats[1]["entropy"], rtol=1e-3)  # block 1 reads centred tokens
