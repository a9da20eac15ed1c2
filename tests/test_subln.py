"""`norm="subln"` (Sub-LN, Magneto): a block against its NumPy forward, eq. (19) with a LayerNorm before each branch's
last projection; the kernels at gamma = sqrt(log 2N); Transformer-XL's attention takes the same LayerNorm. Its config
round trip, causal forms and training from the command line are in the every-layout tests (tests/test_layouts.py,
tests/test_gpt.py, tests/test_generate.py)."""

import math

import keras
import numpy as np
import pytest

from keras_tse import layouts
from keras_tse.layers import TransformerBlock, TransformerXLBlock
from tests.helpers import randomise_weights

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

X = np.random.default_rng(0).normal(size=(2, 5, 8))


def _numpy(layer):
    return {w.path.split("/", 1)[1]: keras.ops.convert_to_numpy(w).astype("float64") for w in layer.weights}


def _layer_norm(x, w, name, epsilon=1e-5):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon) * w[f"{name}/gamma"] + w[f"{name}/beta"]


def _softmax(z):
    e = np.exp(z - z.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _sub_ln_block(x, w, heads=2):
    """Eq. (19) with Sub-LN, in float64: `y = x + LN(Attn(LN x)) W_O`, `z = y + LN(relu(LN(y) W_1)) W_2`."""
    x_hat = _layer_norm(x, w, "attention_norm")
    q, k, v = (x_hat @ w[f"self_attention/{n}/kernel"] for n in ("query", "key", "value"))
    split = lambda t: t.reshape(*t.shape[:2], heads, -1)  # noqa: E731
    q, k, v = split(q), split(k), split(v)
    p = _softmax(np.einsum("btnh,bsnh->bnts", q, k) / math.sqrt(q.shape[-1]))
    context = np.einsum("bnts,bsnh->btnh", p, v).reshape(x.shape[0], x.shape[1], -1)
    attended = _layer_norm(context, w, "self_attention/sub_norm")
    y = x + attended @ w["self_attention/attention_output/kernel"] + w["self_attention/attention_output/bias"]
    inner = np.maximum(_layer_norm(y, w, "ffn_norm") @ w["ffn_inner/kernel"] + w["ffn_inner/bias"], 0)
    return y + _layer_norm(inner, w, "ffn_sub_norm") @ w["ffn_outer/kernel"] + w["ffn_outer/bias"]


def test_a_subln_block_is_eq_19_with_a_layer_norm_before_each_last_projection_by_hand():
    """Every weight random (the four LayerNorms' too): at most 2e-5 from the NumPy forward; without the two inner
    LayerNorms (the pre-norm block on the same weights) the output differs."""
    block = TransformerBlock(2, 16, norm="subln")
    block.build(X.shape)
    randomise_weights(block)
    got = keras.ops.convert_to_numpy(block(X.astype("float32")))
    np.testing.assert_allclose(got, _sub_ln_block(X, _numpy(block)), atol=2e-5)
    pre = TransformerBlock(2, 16, norm="pre")
    pre.build(X.shape)
    shared = {w.path.split("/", 1)[1]: w for w in pre.weights}
    for path, value in _numpy(block).items():
        if path in shared:
            shared[path].assign(value.astype("float32"))
    assert np.abs(keras.ops.convert_to_numpy(pre(X.astype("float32"))) - got).max() > 1e-2


def test_subln_draws_the_value_output_and_ffn_kernels_at_gamma_sqrt_log_2n():
    """For N = 80: gamma = sqrt(log 160) = 2.253; each kernel's spread is Xavier-normal's at its gain (within 8%
    over 4,096 to 8,192 draws), the query's and key's at gain 1."""
    options = layouts.get_layout("subln").for_depth(80)
    assert options == {"subln_gain": pytest.approx(math.sqrt(math.log(160)))}
    block = TransformerBlock(4, 128, norm="subln", **options)
    block.build((1, 3, 64))
    attention = block.self_attention
    gamma = options["subln_gain"]
    for kernel, gain in ((attention.query_dense.kernel, 1.0), (attention.value_dense.kernel, gamma),
                         (attention.output_dense.kernel, gamma), (block.ffn_outer.kernel, gamma)):  # fmt: skip
        fan_in, fan_out = kernel.shape
        expected = gain * math.sqrt(2 / (fan_in + fan_out))
        assert np.std(keras.ops.convert_to_numpy(kernel)) == pytest.approx(expected, rel=0.08), kernel.path


def test_transformer_xls_relative_attention_takes_the_sub_layer_norm():
    """Transformer-XL's block under Sub-LN: its attention normalises the heads' output before W_O (a LayerNorm
    whose gamma set to 0 leaves only the output bias of the attention branch), over memory and segment."""
    block = TransformerXLBlock(2, 16, norm="subln", mem_len=3)
    tokens = X.astype("float32")
    block(tokens)
    attention = block.self_attention
    assert attention.sub_norm and [w.path.rsplit("/", 1)[1] for w in attention.sub_layer_norm.weights] == [
        "gamma",
        "beta",
    ]
    attention.sub_layer_norm.gamma.assign(np.zeros(attention.sub_layer_norm.gamma.shape, "float32"))
    attention.sub_layer_norm.beta.assign(np.zeros(attention.sub_layer_norm.beta.shape, "float32"))
    attended = keras.ops.convert_to_numpy(attention(tokens, memory=tokens[:, :3], memory_length=3))
    np.testing.assert_allclose(attended, 0.0, atol=1e-6)  # the reference's output projection has no bias
