import keras
import numpy as np
import pytest
from keras import ops
from keras.src.testing import TestCase

from keras_tse.layers import PostNormBlock, PreNormBlock
from tests import reference
from tests.helpers import randomise_weights, run_block_harness

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

BLOCK_VARIANTS = [
    (PostNormBlock, {}),
    (PostNormBlock, {"deescalate": "output"}),
    (PostNormBlock, {"deescalate": "pre_ffn", "trainable_tau": True}),
    (PreNormBlock, {}),
]


class BlockLayerTest(TestCase):
    # trainable weights: attention 3 kernels + output kernel/bias; 2 LayerNorms x 2; FFN 2 x (kernel, bias)
    def test_post_norm_harness(self):
        run_block_harness(self, PostNormBlock, {}, 13)

    def test_post_norm_deescalate_output_harness(self):
        run_block_harness(self, PostNormBlock, {"deescalate": "output"}, 13)

    def test_post_norm_deescalate_pre_ffn_harness(self):
        run_block_harness(self, PostNormBlock, {"deescalate": "pre_ffn", "tau": 0.5, "trainable_tau": True}, 14)

    def test_pre_norm_harness(self):
        run_block_harness(self, PreNormBlock, {}, 13)

    def test_causal_post_norm_harness(self):
        run_block_harness(self, PostNormBlock, {"deescalate": "pre_ffn", "causal": True}, 13)


def _x(shape=(2, 6, 8), seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


def _built(cls, x, **kwargs):
    """A block whose every weight, LayerNorm scales and biases included, is random (not 1 / 0)."""
    block = cls(num_heads=2, ffn_dim=12, **kwargs)
    block.build(x.shape)
    return randomise_weights(block)


def _numpy_parts(block):
    n = lambda w: ops.convert_to_numpy(w).astype("float64")  # noqa: E731
    sa = block.self_attention
    attention_weights = [
        n(w)
        for w in (
            sa.query_dense.kernel,
            sa.key_dense.kernel,
            sa.value_dense.kernel,
            sa.output_dense.kernel,
            sa.output_dense.bias,
        )
    ]
    ln1 = (n(block.attention_norm.gamma), n(block.attention_norm.beta), block.layer_norm_epsilon)
    ln2 = (n(block.ffn_norm.gamma), n(block.ffn_norm.beta), block.layer_norm_epsilon)

    def ffn(h):
        inner = np.maximum(h @ n(block.ffn_inner.kernel) + n(block.ffn_inner.bias), 0.0)  # ReLU
        return inner @ n(block.ffn_outer.kernel) + n(block.ffn_outer.bias)

    return attention_weights, ln1, ln2, ffn


def algorithm_1(block, x, causal=False, deescalate=None, tau=1.0, alpha=1.0):
    """Algorithm 1 of the paper, step by step, with de-escalation (eq. 21) where asked."""
    attention_weights, ln1, ln2, ffn = _numpy_parts(block)
    sa, _ = reference.self_attention(x, *attention_weights, 2, causal=causal)
    y1 = x + alpha * sa  # step 1
    y2 = reference.layer_norm(y1, *ln1)  # step 2
    if deescalate == "pre_ffn":
        y2 = reference.deescalate(y2, tau, causal=causal)
    y3 = y2 + ffn(y2)  # step 3
    y4 = reference.layer_norm(y3, *ln2)  # step 4
    if deescalate == "output":
        y4 = reference.deescalate(y4, tau, causal=causal)
    return y4


def eq_19(block, x, alpha=1.0):
    attention_weights, ln1, ln2, ffn = _numpy_parts(block)
    x_hat = reference.layer_norm(x, *ln1)
    y = x + alpha * reference.self_attention(x_hat, *attention_weights, 2)[0]
    return y + ffn(reference.layer_norm(y, *ln2))


@pytest.mark.usefixtures("float32_matmuls")  # a float32 reference: TF32 on a GPU misses its tolerance
@pytest.mark.parametrize("deescalate", [None, "output", "pre_ffn"])
@pytest.mark.parametrize("causal", [False, True])
def test_post_norm_block_is_algorithm_1(deescalate, causal):
    x = _x()
    block = _built(PostNormBlock, x, alpha=0.7, deescalate=deescalate, tau=0.6, causal=causal)
    want = algorithm_1(block, x.astype("float64"), causal=causal, deescalate=deescalate, tau=0.6, alpha=0.7)
    np.testing.assert_allclose(ops.convert_to_numpy(block(x)), want, atol=5e-5)


@pytest.mark.usefixtures("float32_matmuls")  # a float32 reference: TF32 on a GPU misses its tolerance
def test_pre_norm_block_is_eq_19():
    x = _x()
    block = _built(PreNormBlock, x, alpha=0.7)
    np.testing.assert_allclose(ops.convert_to_numpy(block(x)), eq_19(block, x.astype("float64"), alpha=0.7), atol=5e-5)


@pytest.mark.parametrize("cls, extra", BLOCK_VARIANTS)
def test_probe_path_gives_the_same_output_and_p(cls, extra):
    x = _x()
    block = _built(cls, x, **extra)
    fused = ops.convert_to_numpy(block(x))
    probed, p = block(x, return_attention_scores=True)
    np.testing.assert_allclose(ops.convert_to_numpy(probed), fused, atol=2e-5)
    assert tuple(p.shape) == (2, 2, 6, 6)
    np.testing.assert_allclose(ops.convert_to_numpy(p).sum(-1), 1.0, atol=1e-6)


@pytest.mark.parametrize("cls, extra", BLOCK_VARIANTS)
def test_causal_blocks_have_no_future_leakage(cls, extra):
    x = _x((1, 7, 8))
    block = _built(cls, x, causal=True, **extra)
    base = ops.convert_to_numpy(block(x))
    for t in range(6):
        moved = x.copy()
        moved[:, t + 1 :] += 5.0 * _x((1, 6 - t, 8), seed=t + 1)
        np.testing.assert_allclose(ops.convert_to_numpy(block(moved))[:, : t + 1], base[:, : t + 1], atol=1e-5)


@pytest.mark.parametrize("cls, extra", BLOCK_VARIANTS)
def test_padding_does_not_move_real_tokens(cls, extra):
    x = _x((2, 6, 8))
    mask = np.arange(6)[None, :] < np.array([6, 3])[:, None]
    block = _built(cls, x, **extra)
    base = ops.convert_to_numpy(block(x, mask=mask))
    noisy = np.where(mask[..., None], x, 50.0).astype("float32")
    np.testing.assert_allclose(ops.convert_to_numpy(block(noisy, mask=mask))[mask], base[mask], atol=1e-5)


def test_dropout_is_active_only_in_training():
    x = _x()
    block = _built(PostNormBlock, x, dropout=0.5, attention_dropout=0.5)
    inference = ops.convert_to_numpy(block(x, training=False))
    np.testing.assert_allclose(ops.convert_to_numpy(block(x)), inference)
    assert not np.allclose(ops.convert_to_numpy(block(x, training=True)), inference)


@pytest.mark.parametrize(
    "kwargs, pattern",
    [
        ({"deescalate": "input"}, r"one of \(None, 'output', 'pre_ffn'\). Received: deescalate='input'"),
        ({"activation": "elu"}, r"one of \('relu', 'gelu', 'silu', 'tanh'\). Received: activation='elu'"),
        ({"tau": 2.0}, "Received: tau=2.0"),
        ({"alpha": 0.0}, "Received: alpha=0.0"),
        ({"dropout": -0.1}, "Received: dropout=-0.1"),
    ],
)
def test_bad_post_norm_arguments_are_rejected(kwargs, pattern):
    with pytest.raises(ValueError, match=pattern):
        PostNormBlock(num_heads=2, ffn_dim=8, **kwargs)


@pytest.mark.parametrize("cls", [PostNormBlock, PreNormBlock])
def test_hidden_size_that_does_not_divide_is_rejected(cls):
    with pytest.raises(ValueError, match=r"choose num_heads in \[1, 2, 3, 6\].*hidden=6, num_heads=4"):
        cls(num_heads=4, ffn_dim=8)(_x((1, 3, 6)))


@pytest.mark.parametrize("cls", [PostNormBlock, PreNormBlock])
def test_rank_two_input_is_rejected(cls):
    with pytest.raises(ValueError, match=r"Received: inputs.shape=\(3, 8\)"):
        cls(num_heads=2, ffn_dim=8)(_x((3, 8)))


def test_pre_norm_has_no_deescalate_argument():
    with pytest.raises(ValueError, match="deescalate"):
        PreNormBlock(num_heads=2, ffn_dim=8, deescalate="output")


@pytest.mark.parametrize("cls, extra", BLOCK_VARIANTS)
def test_mixed_bfloat16_tracks_float32(cls, extra):
    x = _x((2, 16, 8))
    full = _built(cls, x, **extra)
    half = cls(num_heads=2, ffn_dim=12, dtype="mixed_bfloat16", **extra)
    half.build(x.shape)
    half.set_weights(full.get_weights())
    out = half(x)
    assert keras.backend.standardize_dtype(out.dtype) == "bfloat16"
    assert all(w.dtype == "float32" for w in half.weights)
    # bfloat16 keeps 8 bits of mantissa (relative step 2^-8 = 0.4% per rounding, a few roundings deep):
    # an absolute bound for the normalised outputs, a relative one for pre-norm's unnormalised stream.
    np.testing.assert_allclose(
        ops.convert_to_numpy(ops.cast(out, "float32")), ops.convert_to_numpy(full(x)), atol=0.1, rtol=2e-2
    )
