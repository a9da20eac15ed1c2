"""`norm="centred_attention"` ("Mind the Gap"'s `(P - U) V`): the attention against NumPy with `P` the layer's own
scores, for a bidirectional, a causal and a padded query, Transformer-XL's over a partly filled memory; tokens all
alike get nothing from attention; a ViT's `.keras` round trip, on every backend. Its causal forms, its config round
trip and its training from the command line are in the every-layout tests (tests/test_gpt.py, tests/test_generate.py,
tests/test_layouts.py)."""

import keras
import numpy as np
import pytest

from keras_tse import zoo
from keras_tse.layers import RelativeAttention, SelfAttention, TransformerBlock
from tests.helpers import randomise_weights

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

X = np.random.default_rng(0).normal(size=(2, 5, 8)).astype("float32")


def _uniform(allowed):
    """U: each row uniform over its allowed keys."""
    allowed = allowed.astype("float64")
    return allowed / allowed.sum(-1, keepdims=True)


def _by_hand(layer, scores, values, allowed, outputs_of):
    """The output projection of `(P - U) V`, `P` the scores the layer returns, in float64."""
    batch, heads, tokens, _ = scores.shape
    context = np.einsum("bnts,bsnh->btnh", scores.astype("float64") - _uniform(allowed), values)
    return keras.ops.convert_to_numpy(outputs_of(context.reshape(batch, tokens, -1).astype("float32")))


@pytest.mark.parametrize("causal, padded", [(False, False), (True, False), (False, True)])
def test_centred_attention_is_p_minus_u_times_v_by_hand(causal, padded):
    """At most 2e-5 from the NumPy `(P - U) V W_O`; the fused kernel's path (no scores asked) gives the same."""
    layer = SelfAttention(2, causal=causal, centred=True)
    layer.build(X.shape)
    randomise_weights(layer)
    mask = np.array([[True] * 5, [True, True, True, False, False]]) if padded else None
    outputs, scores = layer(X, mask=mask, return_attention_scores=True)
    values = keras.ops.convert_to_numpy(layer.value_dense(X)).reshape(2, 5, 2, 4).astype("float64")
    allowed = np.ones((2, 1, 5, 5), bool)
    allowed = allowed & np.tril(np.ones((5, 5), bool)) if causal else allowed
    allowed = allowed & mask[:, None, None, :] if padded else allowed
    expected = _by_hand(layer, keras.ops.convert_to_numpy(scores), values, allowed, layer.output_dense)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(outputs), expected, atol=2e-5)
    fused = keras.ops.convert_to_numpy(layer(X, mask=mask))
    np.testing.assert_allclose(fused, expected, atol=2e-5)


def test_transformer_xl_centres_over_the_filled_memory_and_the_segment():
    """Two of three memory slots filled: each query's U is uniform over those two and the segment up to it."""
    layer = RelativeAttention(2, 4, centred=True)
    memory = np.random.default_rng(1).normal(size=(2, 3, 8)).astype("float32")
    outputs, scores = layer(X, memory=memory, memory_length=2, return_attention_scores=True)
    context = np.concatenate([memory, X], axis=1)
    qkv = keras.ops.convert_to_numpy(layer.qkv_dense(context)).reshape(2, 8, 6, 4)
    values = qkv[:, :, 4:].astype("float64")  # [query | key | value] heads
    filled = np.array([False, True, True] + [True] * 5)
    allowed = (np.arange(8)[None, :] <= np.arange(5)[:, None] + 3) & filled[None, :]
    expected = _by_hand(layer, keras.ops.convert_to_numpy(scores), values, allowed, layer.output_dense)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(outputs), expected, atol=2e-5)


def test_tokens_all_alike_get_nothing_but_the_output_bias_from_centred_attention():
    """`(P - U) 1 = 0`: the leading eigenspace the paper's escalation runs in is gone, so identical tokens
    (the end point of escalation) receive only the output projection's bias; uncentred, they receive V's row."""
    alike = np.repeat(X[:, :1], 5, axis=1)
    centred = SelfAttention(2, centred=True)
    plain = SelfAttention(2)
    for layer in (centred, plain):
        layer.build(alike.shape)
    randomise_weights(centred)
    plain.set_weights(centred.get_weights())
    bias = keras.ops.convert_to_numpy(centred.output_dense.bias)
    got = keras.ops.convert_to_numpy(centred(alike))
    np.testing.assert_allclose(got, np.broadcast_to(bias, alike.shape), atol=1e-5)
    assert np.abs(keras.ops.convert_to_numpy(plain(alike)) - bias).max() > 1e-2


def test_a_centred_attention_block_is_algorithm_1_on_the_centred_attention():
    """The layout changes the attention and nothing else: its block is the post-norm block of the same weights
    whose attention sublayer is centred."""
    block = TransformerBlock(2, 16, norm="centred_attention")
    block.build(X.shape)
    randomise_weights(block)
    assert block.self_attention.centred and not TransformerBlock(2, 16, norm="post").layout.centred_attention
    post = TransformerBlock(2, 16, norm="post")
    post.build(X.shape)
    post.set_weights(block.get_weights())
    post.self_attention.centred = True
    np.testing.assert_allclose(keras.ops.convert_to_numpy(block(X)), keras.ops.convert_to_numpy(post(X)), atol=1e-6)


def test_a_centred_attention_vit_saves_and_loads(tmp_path):
    images = np.random.default_rng(2).uniform(0, 255, (2, 8, 8, 1)).astype("float32")
    vit = dict(image_size=8, patch_size=4, hidden_dim=16, num_heads=2, ffn_dim=32, num_classes=3, channels=1)
    model = zoo.vit(depth=2, norm="centred_attention", **vit)
    model.save(tmp_path / "m.keras")
    again = keras.saving.load_model(tmp_path / "m.keras")
    assert again.get_layer("block_01").self_attention.centred
    expected = keras.ops.convert_to_numpy(model(images))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(again(images)), expected, atol=1e-6)
