"""`norm="admin"` (Admin, Liu et al. 2020): a block against its NumPy forward, post-norm with each shortcut times
omega; omega for a depth as the authors' package computes it, and a block against that package's residual module on
the same weights. Its config round trip, causal forms and training from the command line are in the every-layout
tests (tests/test_layouts.py, tests/test_gpt.py, tests/test_generate.py)."""

import math

import keras
import numpy as np
import pytest

from keras_tse import layouts, zoo
from keras_tse.layers import TransformerBlock
from keras_tse.layouts.admin import admin_omega
from tests.helpers import randomise_weights

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

X = np.random.default_rng(0).normal(size=(2, 5, 8))
QKV = ("query", "key", "value")


def _numpy(layer):
    return {w.path.split("/", 1)[1]: keras.ops.convert_to_numpy(w).astype("float64") for w in layer.weights}


def _layer_norm(x, w, name, epsilon=1e-5):
    mean, var = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    return (x - mean) / np.sqrt(var + epsilon) * w[f"{name}/gamma"] + w[f"{name}/beta"]


def _attention(x, w, heads=2):
    q, k, v = (x @ w[f"self_attention/{n}/kernel"] for n in ("query", "key", "value"))
    q, k, v = (t.reshape(*t.shape[:2], heads, -1) for t in (q, k, v))
    scores = np.einsum("btnh,bsnh->bnts", q, k) / math.sqrt(q.shape[-1])
    p = np.exp(scores - scores.max(-1, keepdims=True))
    context = np.einsum("bnts,bsnh->btnh", p / p.sum(-1, keepdims=True), v).reshape(x.shape)
    return context @ w["self_attention/attention_output/kernel"] + w["self_attention/attention_output/bias"]


def _admin_block(x, w, omega):
    """Admin's sub-layers in float64: `y = LN(omega x + Attn(x))`, `z = LN(omega y + relu(y W_1) W_2)`."""
    y = _layer_norm(omega * x + _attention(x, w), w, "attention_norm")
    ffn = np.maximum(y @ w["ffn_inner/kernel"] + w["ffn_inner/bias"], 0) @ w["ffn_outer/kernel"] + w["ffn_outer/bias"]
    return _layer_norm(omega * y + ffn, w, "ffn_norm")


def test_an_admin_block_is_post_norm_with_each_shortcut_times_omega_by_hand():
    """Every weight random: at most 2e-5 from the NumPy forward at omega 2.5; at omega 1 the block is post-norm's on
    the same weights, and at 2.5 it is not."""
    block = TransformerBlock(2, 16, norm="admin", residual_scale=2.5)
    block.build(X.shape)
    randomise_weights(block)
    weights = _numpy(block)
    got = keras.ops.convert_to_numpy(block(X.astype("float32")))
    np.testing.assert_allclose(got, _admin_block(X, weights, 2.5), atol=2e-5)
    post = TransformerBlock(2, 16, norm="post")
    post.build(X.shape)
    post.set_weights(block.get_weights())
    plain = keras.ops.convert_to_numpy(post(X.astype("float32")))
    np.testing.assert_allclose(plain, _admin_block(X, weights, 1.0), atol=2e-5)
    assert np.abs(plain - got).max() > 1e-2


def test_omega_for_a_depth_is_the_authors_o_log_n_value_in_every_block():
    """N = 2 residual sub-layers a block: depth 6 gives sqrt(13 / ln 13 - 1) = 2.0170, depth 80 sqrt(161 / ln 161 -
    1) = 5.5393; a zoo model's blocks carry it, and `residual_scale` given overrides it."""
    assert admin_omega(6) == pytest.approx(math.sqrt(13 / math.log(13) - 1)) == pytest.approx(2.01701, abs=1e-5)
    assert layouts.get_layout("admin").for_depth(80) == {"residual_scale": pytest.approx(5.53933, abs=1e-5)}
    model = zoo.vit(depth=3, image_size=8, patch_size=4, hidden_dim=8, num_heads=2, num_classes=3, norm="admin")
    assert {model.get_layer(f"block_{i:02d}").layout_options["residual_scale"] for i in range(3)} == {admin_omega(3)}
    given = zoo.vit(depth=2, image_size=8, patch_size=4, hidden_dim=8, num_heads=2, num_classes=3, norm="admin",
                    layout_options={"residual_scale": 3.0})  # fmt: skip
    assert given.get_layer("block_01").layout_options["residual_scale"] == 3.0
    with pytest.raises(ValueError, match="residual_scale"):
        TransformerBlock(2, 16, norm="admin", residual_scale=0.0)


@pytest.mark.one_backend
def test_an_admin_block_matches_the_authors_package_on_the_same_weights():
    """`admin_torch` 0.1.0 (Microsoft's Admin package, Apache-2.0): its `calculate_init` gives the same omega, and a
    post-norm layer whose shortcuts are its `as_module(2N)` residual (attention and FFN written in PyTorch on this
    block's weights) gives this block's output within 2e-5."""
    admin_torch = pytest.importorskip("admin_torch")
    torch = pytest.importorskip("torch")
    depth = 6
    assert admin_torch.calculate_init(2 * depth) == pytest.approx(admin_omega(depth), rel=1e-12)
    block = TransformerBlock(2, 16, norm="admin", **layouts.get_layout("admin").for_depth(depth))
    block.build(X.shape)
    randomise_weights(block)
    w = {k: torch.tensor(v) for k, v in _numpy(block).items()}
    x = torch.tensor(X)

    def layer_norm(t, name):
        return torch.nn.functional.layer_norm(t, (t.shape[-1],), w[f"{name}/gamma"], w[f"{name}/beta"], 1e-5)

    heads = [(x @ w[f"self_attention/{n}/kernel"]).reshape(2, 5, 2, -1).transpose(1, 2) for n in QKV]
    context = torch.nn.functional.scaled_dot_product_attention(*heads).transpose(1, 2).reshape(2, 5, 8)
    attended = context @ w["self_attention/attention_output/kernel"] + w["self_attention/attention_output/bias"]
    y = layer_norm(admin_torch.as_module(2 * depth)(x, attended), "attention_norm")
    ffn = torch.relu(y @ w["ffn_inner/kernel"] + w["ffn_inner/bias"]) @ w["ffn_outer/kernel"] + w["ffn_outer/bias"]
    expected = layer_norm(admin_torch.as_module(2 * depth)(y, ffn), "ffn_norm")
    got = keras.ops.convert_to_numpy(block(X.astype("float32")))
    np.testing.assert_allclose(got, expected.numpy(), atol=2e-5)
