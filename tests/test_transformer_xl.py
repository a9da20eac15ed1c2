"""Transformer-XL: relative attention against a NumPy reference, causality across segments,
memory exactness, the adaptive softmax, the paper-size parameter count, saving and training."""

import numpy as np
import pytest
from keras import ops
from keras.src.testing import TestCase

from keras_tse import losses, zoo
from keras_tse.layers import AdaptiveEmbedding, RelativeAttention, TransformerXLBlock
from keras_tse.layers.relative_attention import relative_shift
from keras_tse.zoo import presets
from tests import reference

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

NORMS = ("post", "pre", "deescalate")
# eq. (21)'s other causal settings: at the block output, and the mean over the segment only
OUTPUT = dict(deescalate_at="output")
SEGMENT_MEAN = dict(deescalate_memory=False)
ARMS = [(norm, {}) for norm in NORMS] + [("deescalate", OUTPUT), ("deescalate", SEGMENT_MEAN)]
TINY = dict(depth=2, vocab_size=60, hidden_dim=16, num_heads=2, head_dim=8, ffn_dim=24, cutoffs=(12, 30), batch_size=2)


def _numpy(x):
    return ops.convert_to_numpy(x)


def _randomise_trainable(model, seed=3, scale=0.3):
    """Random values for every trainable weight (LayerNorm scales around 1), so every weight matters."""
    rng = np.random.default_rng(seed)
    for w in model.trainable_weights:
        offset = 1.0 if w.path.endswith("gamma") else 0.0
        w.assign((scale * rng.standard_normal(tuple(w.shape)) + offset).astype("float32"))


def _tiny(norm, segment_len=5, mem_len=5, **kwargs):
    model = zoo.transformer_xl(norm=norm, segment_len=segment_len, mem_len=mem_len, **{**TINY, **kwargs})
    _randomise_trainable(model)
    return model


class TransformerXLLayerTest(TestCase):
    def test_relative_attention_harness(self):
        self.run_layer_test(
            RelativeAttention,
            init_kwargs={"num_heads": 2, "head_dim": 4, "attention_dropout": 0.1},
            input_shape=(2, 5, 8),
            expected_output_shape=(2, 5, 8),
            expected_num_trainable_weights=5,  # qkv, position, output kernels; u, v
            expected_num_non_trainable_weights=0,
            expected_num_seed_generators=1,
        )

    def test_block_harness_without_memory(self):
        self.run_layer_test(
            TransformerXLBlock,
            init_kwargs={"num_heads": 2, "ffn_dim": 12, "norm": "deescalate", "dropout": 0.1, "attention_dropout": 0.1},
            input_shape=(2, 5, 8),
            expected_output_shape=(2, 5, 8),
            # attention 5; 2 LayerNorms x 2; FFN 2 x (kernel, bias)
            expected_num_trainable_weights=13,
            expected_num_non_trainable_weights=0,
            expected_num_seed_generators=4,  # attention dropout + three branch dropouts
            supports_masking=True,
        )

    def test_block_harness_with_memory(self):
        self.run_layer_test(
            TransformerXLBlock,
            init_kwargs={"num_heads": 2, "ffn_dim": 12, "norm": "deescalate", "mem_len": 3},
            input_shape=(2, 5, 8),
            expected_output_shape=(2, 5, 8),
            expected_num_trainable_weights=13,
            expected_num_non_trainable_weights=3,  # memory, memory_length, ffn_input_memory
            expected_num_seed_generators=0,  # no dropout
            supports_masking=True,
            run_training_check=False,  # the harness's fit uses other batch sizes than the memory's
        )

    def test_adaptive_embedding_harness(self):
        self.run_layer_test(
            AdaptiveEmbedding,
            init_kwargs={"vocab_size": 30, "hidden_dim": 8, "cutoffs": [10, 20], "div_val": 2},
            input_data=np.arange(12).reshape(2, 6).astype("int32"),
            expected_output_shape=(2, 6, 8),
            # tables 3, projections 2 (widths 4 and 2 differ from 8), biases 3, cluster kernel + bias
            expected_num_trainable_weights=10,
            run_training_check=False,  # integer inputs
        )


def test_relative_shift_aligns_distances():
    # x[i, c] encodes distance K - 1 - c; after the shift, column j must hold distance i + M - j.
    t_len, m_len = 3, 2
    keys = t_len + m_len
    x = np.tile(np.arange(keys - 1, -1, -1, dtype="float32"), (1, 1, t_len, 1))
    shifted = _numpy(relative_shift(ops.convert_to_tensor(x)))[0, 0]
    for i in range(t_len):
        for j in range(i + m_len + 1):
            assert shifted[i, j] == i + m_len - j


@pytest.mark.usefixtures("float32_matmuls")  # a float32 reference: TF32 on a GPU misses its tolerance
@pytest.mark.parametrize("filled", [0, 2, 4])
@pytest.mark.parametrize("probe", [False, True])
def test_relative_attention_matches_reference(filled, probe):
    rng = np.random.default_rng(filled)
    layer = RelativeAttention(num_heads=2, head_dim=3)
    x, memory = rng.standard_normal((2, 4, 6)).astype("float32"), rng.standard_normal((2, 4, 6)).astype("float32")
    layer.build(x.shape)
    for w in layer.weights:
        w.assign((0.4 * rng.standard_normal(tuple(w.shape))).astype("float32"))
    expected, expected_p = reference.relative_attention(
        x,
        memory,
        filled,
        *(
            _numpy(w)
            for w in (
                layer.qkv_dense.kernel,
                layer.position_dense.kernel,
                layer.output_dense.kernel,
                layer.content_bias,
                layer.position_bias,
            )
        ),
        num_heads=2,
        head_dim=3,
    )
    outputs = layer(x, memory=memory, memory_length=np.int32(filled), return_attention_scores=probe)
    if probe:
        outputs, scores = outputs
        np.testing.assert_allclose(_numpy(scores), expected_p, atol=1e-5)
    np.testing.assert_allclose(_numpy(outputs), expected, atol=1e-4)


@pytest.mark.parametrize("norm, options", ARMS[:4])
def test_two_segments_with_memory_equal_one_pass_over_both(norm, options):
    # With mem_len = segment_len, segment 2 attends to exactly the states segment 1 produced, so the
    # recurrence must reproduce a memory-less pass over the concatenated context.
    model = _tiny(norm, **options)
    single = zoo.transformer_xl(norm=norm, segment_len=10, mem_len=0, **TINY, **options)
    for a, b in zip(single.trainable_weights, model.trainable_weights):
        assert a.path == b.path
        a.assign(b)
    ids = np.random.default_rng(0).integers(0, 60, (2, 10)).astype("int32")
    model.reset_memory()
    first, second = _numpy(model(ids[:, :5])), _numpy(model(ids[:, 5:]))
    whole = _numpy(single(ids))
    np.testing.assert_allclose(first, whole[:, :5], atol=2e-5)
    np.testing.assert_allclose(second, whole[:, 5:], atol=2e-5)


def _two_segments(model, ids):
    model.reset_memory()
    return np.concatenate([_numpy(model(ids[:, :5])), _numpy(model(ids[:, 5:]))], axis=1)


@pytest.mark.parametrize("norm, options", ARMS)
@pytest.mark.parametrize("position", [2, 5, 8])  # inside segment 1, first of segment 2, inside segment 2
def test_no_future_leakage_within_and_across_segments(norm, options, position):
    model = _tiny(norm, **options)
    ids = np.random.default_rng(1).integers(0, 60, (2, 10)).astype("int32")
    changed = ids.copy()
    changed[:, position:] = (changed[:, position:] + 7) % 60  # the token at `position` and every later one
    before, after = _two_segments(model, ids), _two_segments(model, changed)
    np.testing.assert_allclose(after[:, :position], before[:, :position], atol=1e-6)
    assert np.abs(after[:, position:] - before[:, position:]).max() > 1e-3


def test_leaky_global_deescalation_reads_later_tokens_and_equals_literal_eq_21():
    """The measurement-only arm leaks: changing only the last token of a segment moves position 0."""
    model = _tiny("deescalate_leaky_global")
    ids = np.random.default_rng(1).integers(0, 60, (2, 10)).astype("int32")
    changed = ids.copy()
    changed[:, 4] = (changed[:, 4] + 7) % 60  # the last token of segment 1
    before, after = _two_segments(model, ids), _two_segments(model, changed)
    assert np.abs(after[:, 0] - before[:, 0]).max() > 1e-3
    # the block's FFN input is Y2 - tau * mean over the segment's T positions (eq. 21 as printed)
    block = TransformerXLBlock(2, 24, head_dim=8, norm="deescalate_leaky_global", tau=0.5)
    y2 = np.random.default_rng(4).standard_normal((2, 5, 16)).astype("float32")
    block.build(y2.shape)
    np.testing.assert_allclose(_numpy(block.de_escalation(y2)), y2 - 0.5 * y2.mean(axis=1, keepdims=True), atol=1e-6)
    assert zoo.transformer_xl(norm="deescalate_leaky_global", **TINY).get_config()["norm"] == "deescalate_leaky_global"


@pytest.mark.parametrize("norm, options", ARMS)
def test_memory_carries_context_and_reset_forgets_it(norm, options):
    model = _tiny(norm, **options)
    rng = np.random.default_rng(2)
    first_a, first_b, second = (rng.integers(0, 60, (2, 5)).astype("int32") for _ in range(3))
    model.reset_memory()
    model(first_a)
    after_a = _numpy(model(second))
    model.reset_memory()
    model(first_b)
    after_b = _numpy(model(second))
    assert np.abs(after_a - after_b).max() > 1e-3  # segment 2 reads segment 1 through the memory
    model.reset_memory()
    fresh = _numpy(model(second))
    model.reset_memory()
    np.testing.assert_allclose(_numpy(model(second)), fresh, atol=1e-6)


def test_segment_mean_leaves_the_memory_out_of_eq_21_only():
    """The segment-only mean keeps no memory of eq. (21)'s inputs; on a first segment (empty memory) it
    is the memory mean, after it the two differ by the mean alone."""
    with_memory, segment_only = _tiny("deescalate"), _tiny("deescalate", **SEGMENT_MEAN)
    assert segment_only.get_layer("block_00").deescalation_memory is None
    assert with_memory.get_layer("block_00").deescalation_memory.path.endswith("ffn_input_memory")
    assert _tiny("deescalate", **OUTPUT).get_layer("block_00").deescalation_memory.path.endswith("output_memory")
    for a, b in zip(segment_only.trainable_weights, with_memory.trainable_weights):
        a.assign(b)
    ids = np.random.default_rng(5).integers(0, 60, (2, 10)).astype("int32")
    first, second = _two_segments(with_memory, ids), _two_segments(segment_only, ids)
    np.testing.assert_allclose(second[:, :5], first[:, :5], atol=1e-6)
    assert np.abs(second[:, 5:] - first[:, 5:]).max() > 1e-3


def test_eq_21_options_are_checked():
    with pytest.raises(ValueError, match="Received: deescalate_at='input'"):
        TransformerXLBlock(2, 24, norm="deescalate", deescalate_at="input")
    with pytest.raises(ValueError, match="Received: norm='deescalate_leaky_global', deescalate_at='output'"):
        TransformerXLBlock(2, 24, norm="deescalate_leaky_global", deescalate_at="output")


@pytest.mark.usefixtures("float32_matmuls")  # a float32 reference: TF32 on a GPU misses its tolerance
def test_adaptive_softmax_matches_reference_and_sums_to_one():
    layer = AdaptiveEmbedding(60, 16, cutoffs=(12, 30))
    layer.build()
    rng = np.random.default_rng(4)
    for w in layer.weights:
        w.assign(rng.standard_normal(tuple(w.shape)).astype("float32"))
    hidden = rng.standard_normal((2, 3, 16)).astype("float32")
    log_probs = _numpy(layer(hidden, reverse=True))
    expected = reference.adaptive_log_softmax(
        hidden,
        [_numpy(t) for t in layer.tables],
        [_numpy(b) for b in layer.biases],
        _numpy(layer.cluster_kernel),
        _numpy(layer.cluster_bias),
        (12, 30),
    )
    np.testing.assert_allclose(log_probs, expected, atol=1e-4)
    np.testing.assert_allclose(np.exp(log_probs).sum(-1), 1.0, atol=1e-5)


def test_adaptive_softmax_with_projections_sums_to_one():
    layer = AdaptiveEmbedding(100, 16, cutoffs=(10, 40, 70), div_val=2)
    layer.build()
    rng = np.random.default_rng(5)
    for w in layer.weights:
        w.assign(rng.standard_normal(tuple(w.shape)).astype("float32"))
    log_probs = _numpy(layer(rng.standard_normal((3, 4, 16)).astype("float32"), reverse=True))
    assert log_probs.shape == (3, 4, 100)
    np.testing.assert_allclose(np.exp(log_probs.astype("float64")).sum(-1), 1.0, atol=1e-5)


def test_adaptive_embedding_looks_up_each_cluster_and_scales():
    layer = AdaptiveEmbedding(30, 4, cutoffs=(10, 20))
    layer.build()
    ids = np.array([[0, 9, 10, 25]], "int32")
    expected = (
        np.stack(
            [
                _numpy(layer.tables[0])[0],
                _numpy(layer.tables[0])[9],
                _numpy(layer.tables[1])[0],
                _numpy(layer.tables[2])[5],
            ]
        )
        * 2.0
    )  # sqrt(hidden_dim = 4)
    np.testing.assert_allclose(_numpy(layer(ids))[0], expected, rtol=1e-6)


@pytest.mark.one_backend
def test_paper_size_model_has_about_201m_parameters():
    model = zoo.from_preset("transformer_xl60_wt103_deescalate")
    trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)
    assert 195e6 <= trainable <= 207e6, trainable  # the paper: "about 201M"
    memory = [w for w in model.non_trainable_weights if w.path.endswith("/memory")]
    assert len(memory) == 60 and tuple(memory[0].shape) == (40, 150, 410)


@pytest.mark.xla_optimized  # the presets' widths: the passes save more than they cost
@pytest.mark.parametrize(
    "name, overrides",
    [
        ("transformer_xl8_small", {}),
        ("transformer_xl16_wt103_base", {"batch_size": 1, "segment_len": 4, "mem_len": 4}),  # CPU-sized call
    ],
)
def test_preset_forward_pass_is_normalised(name, overrides):
    model = zoo.from_preset(name, **overrides)
    config = model.get_config()
    ids = np.random.default_rng(0).integers(0, config["vocab_size"], (config["batch_size"], config["segment_len"]))
    log_probs = _numpy(model.predict(ids.astype("int32"), batch_size=config["batch_size"], verbose=0))
    assert log_probs.shape == (config["batch_size"], config["segment_len"], config["vocab_size"])
    np.testing.assert_allclose(np.exp(log_probs.astype("float64")).sum(-1), 1.0, atol=1e-4)


@pytest.mark.one_backend
def test_paper_presets_are_the_three_variants_of_sec_3_4():
    p = presets()
    paper = ("post", "pre", "deescalate")
    assert [p[f"transformer_xl60_wt103_{n}"]["config"]["norm"] for n in paper] == list(paper)


def test_batch_size_is_checked():
    model = _tiny("post")
    with pytest.raises(ValueError, match=r"batch size 2.*Received: inputs.shape=\(3, 5, 16\)"):
        model(np.zeros((3, 5), "int32"))


def test_shuffled_fit_is_refused():
    model = _tiny("post")
    model.compile(optimizer="adam", loss=losses.LogProbabilityCrossentropy())
    with pytest.raises(ValueError, match="Received: shuffle=True"):
        model.fit(np.zeros((4, 5), "int32"), np.zeros((4, 5), "int32"), batch_size=2, shuffle=True)


def test_bad_arguments_name_the_value():
    with pytest.raises(ValueError, match="Received: norm='rmsnorm'"):
        zoo.transformer_xl(norm="rmsnorm", **TINY)
    with pytest.raises(ValueError, match=r"Received: cutoffs=\(30, 12\)"):
        zoo.transformer_xl(**{**TINY, "cutoffs": (30, 12)})
    with pytest.raises(ValueError, match="Received: mem_len=-1"):
        TransformerXLBlock(2, 8, mem_len=-1)
    with pytest.raises(ValueError, match="fixed batch size"):
        TransformerXLBlock(2, 8, mem_len=3).build((None, 5, 8))


def test_log_probability_crossentropy_reads_the_targets_entries():
    log_probs = np.log(np.array([[[0.5, 0.25, 0.25], [0.1, 0.1, 0.8]]], "float32"))
    value = _numpy(losses.LogProbabilityCrossentropy()(np.array([[0, 2]]), log_probs))
    np.testing.assert_allclose(value, -(np.log(0.5) + np.log(0.8)) / 2, rtol=1e-6)


def test_eq_21_options_on_a_norm_that_ignores_them_are_refused():
    with pytest.raises(ValueError, match=r"tau set\(s\) de-escalation .* Received: norm='post', tau=0.3"):
        zoo.transformer_xl(norm="post", tau=0.3, **TINY)
    with pytest.raises(ValueError, match="Received: norm='deescalate_leaky_global', deescalate_memory=False"):
        zoo.transformer_xl(norm="deescalate_leaky_global", deescalate_memory=False, **TINY)
    zoo.transformer_xl(norm="deescalate_leaky_global", tau=0.5, **TINY)  # the leaky arm has a tau
