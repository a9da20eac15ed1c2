"""The depth-enabling baselines: DeepNorm, ReZero and LayerScale, in the ViT and Transformer-XL."""

import math

import keras
import numpy as np
import pytest
from keras.src.testing import TestCase

from keras_tse import zoo
from keras_tse.layers import (
    DeepNormBlock,
    LayerScaleBlock,
    ReZeroBlock,
    TransformerXLBlock,
    cait_layer_scale_init,
    deepnorm_constants,
)
from tests.helpers import randomise_weights, run_block_harness, tiny_transformer_xl, tiny_vit

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py


def _numpy(x):
    return keras.ops.convert_to_numpy(x)


def _x(shape=(2, 6, 16), seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype("float32")


class BaselineLayerTest(TestCase):
    def test_deepnorm_harness(self):
        run_block_harness(self, DeepNormBlock, {"residual_scale": 2.0, "init_gain": 0.3}, 13)

    def test_rezero_harness(self):  # 5 attention (3 kernels, output kernel + bias) + 4 FFN + resweight, no LN
        run_block_harness(self, ReZeroBlock, {}, 10)

    def test_layerscale_harness(self):  # 13 + two per-channel scales
        run_block_harness(self, LayerScaleBlock, {"layer_scale_init": 1e-5}, 15)

    def test_transformer_xl_block_harness_each_baseline(self):
        for norm, trainable in (("deepnorm", 13), ("rezero", 10), ("layerscale", 15)):
            self.run_layer_test(
                TransformerXLBlock,
                init_kwargs={"num_heads": 2, "ffn_dim": 12, "norm": norm},
                input_shape=(2, 5, 8),
                expected_output_shape=(2, 5, 8),
                expected_num_trainable_weights=trainable,
                expected_num_seed_generators=0,
                supports_masking=True,
            )


def test_deepnorm_constants_of_the_paper():
    # DeepNet Fig. 2, encoder-only and decoder-only: (2N)^(1/4), (8N)^(-1/4). By hand:
    np.testing.assert_allclose(deepnorm_constants(80), (3.5566, 0.19882), rtol=1e-4)  # 160^.25, 640^-.25
    np.testing.assert_allclose(deepnorm_constants(6), (1.8612, 0.37992), rtol=1e-4)
    with pytest.raises(ValueError, match="Received: num_layers=0"):
        deepnorm_constants(0)


def _xavier_std(kernel, gain):
    fan_in, fan_out = kernel.shape[0], kernel.shape[-1]
    return gain * math.sqrt(2.0 / (fan_in + fan_out))


def test_vit_deepnorm_alpha_and_init_scales():
    depth = 12
    alpha, beta = (2 * depth) ** 0.25, (8 * depth) ** -0.25
    model = zoo.vit(depth=depth, norm="deepnorm", hidden_dim=64, ffn_dim=128, num_heads=4)
    block = model.get_layer("block_05")
    assert block.norm == "deepnorm"
    assert block.residual_scale == pytest.approx(alpha) and block.init_gain == pytest.approx(beta)
    attention = block.self_attention
    for dense, gain in (
        (attention.query_dense, 1.0),
        (attention.key_dense, 1.0),
        (attention.value_dense, beta),
        (attention.output_dense, beta),
        (block.ffn_inner, beta),
        (block.ffn_outer, beta),
    ):
        kernel = _numpy(dense.kernel)
        assert abs(kernel.mean()) < 0.1 * _xavier_std(kernel, gain)
        assert kernel.std() == pytest.approx(_xavier_std(kernel, gain), rel=0.06), dense.name


def test_deepnorm_block_is_layer_norm_of_alpha_x_plus_branch():
    x = _x()
    block = DeepNormBlock(2, 12, residual_scale=1.7, init_gain=0.5)
    block.build(x.shape)
    randomise_weights(block)
    x = keras.ops.convert_to_tensor(x)
    y2 = block.attention_norm(1.7 * x + block.self_attention(x))
    y4 = block.ffn_norm(1.7 * y2 + block.ffn_outer(block.ffn_inner(y2)))
    np.testing.assert_allclose(_numpy(block(x)), _numpy(y4), atol=1e-5)


def test_transformer_xl_deepnorm_uses_decoder_constants_and_scales_the_value_columns():
    depth = 6
    model = tiny_transformer_xl(
        depth=depth,
        norm="deepnorm",
        vocab_size=50,
        hidden_dim=64,
        num_heads=4,
        head_dim=16,
        ffn_dim=128,
        segment_len=4,
        mem_len=4,
        cutoffs=(20,),
    )
    block = model.get_layer("block_02")
    alpha, beta = deepnorm_constants(depth)
    assert block.residual_scale == pytest.approx(alpha) and block.init_gain == pytest.approx(beta)
    qkv = _numpy(block.self_attention.qkv_dense.kernel)  # [64, 3 * 64]: q | k | v
    for part, gain in zip(np.split(qkv, 3, axis=1), (1.0, 1.0, beta)):
        assert part.std() == pytest.approx(_xavier_std(part, gain), rel=0.08)
    ffn = _numpy(block.ffn_inner.kernel)
    assert ffn.std() == pytest.approx(_xavier_std(ffn, beta), rel=0.06)


def test_rezero_block_is_the_identity_at_initialisation():
    x = _x()
    block = ReZeroBlock(2, 12)
    np.testing.assert_array_equal(_numpy(block(x)), x)
    assert not any("norm" in w.path for w in block.weights)  # no LayerNorm
    block.layout_state.assign(0.5)
    assert np.abs(_numpy(block(x)) - x).max() > 1e-2


def test_rezero_vit_and_transformer_xl_pass_their_embedding_through_every_block():
    model = tiny_vit(depth=6, norm="rezero")
    embedded = keras.Model(model.input, model.get_layer("embedding_dropout").output)
    stack = keras.Model(model.input, model.get_layer("block_05").output)
    images = np.random.default_rng(0).normal(size=(2, 8, 8, 1)).astype("float32")
    np.testing.assert_array_equal(_numpy(stack(images)), _numpy(embedded(images)))

    block = TransformerXLBlock(2, 12, mem_len=3, norm="rezero")
    x = _x((2, 4, 16))
    block.build(x.shape)
    block(x)  # fills the memory: at init the output must still be the input
    np.testing.assert_array_equal(_numpy(block(x)), x)


@pytest.mark.parametrize("depth, expected", [(12, 0.1), (18, 0.1), (24, 1e-5), (36, 1e-6)])
def test_layerscale_initial_scales_follow_cait(depth, expected):
    assert cait_layer_scale_init(depth) == expected
    model = tiny_vit(depth=depth, norm="layerscale")
    for i in (0, depth - 1):
        block = model.get_layer(f"block_{i:02d}")
        assert block.norm == "layerscale"
        for scale in block.layout_state:
            np.testing.assert_array_equal(_numpy(scale), np.full((16,), expected, "float32"))
    txl = tiny_transformer_xl(
        depth=depth, norm="layerscale", vocab_size=50, ffn_dim=32, segment_len=4, mem_len=4, cutoffs=(20,)
    )
    np.testing.assert_array_equal(
        _numpy(txl.get_layer("block_00").layout_state[1]), np.full((16,), expected, "float32")
    )


def test_layerscale_block_scales_each_branch_per_channel():
    x = _x()
    block = LayerScaleBlock(2, 12, layer_scale_init=0.5)
    block.build(x.shape)
    randomise_weights(block)
    l1, l2 = (np.linspace(0.1, 1.0, 16).astype("float32"), np.linspace(-1.0, 1.0, 16).astype("float32"))
    block.layout_state[0].assign(l1)
    block.layout_state[1].assign(l2)
    y = x + l1 * _numpy(block.self_attention(_numpy(block.attention_norm(x))))
    z = y + l2 * _numpy(block.ffn_outer(block.ffn_inner(block.ffn_norm(y))))
    np.testing.assert_allclose(_numpy(block(x)), z, atol=1e-5)


@pytest.mark.parametrize("value", [0, -1e-5, "small"])
def test_bad_layer_scale_init_names_the_value(value):
    with pytest.raises(ValueError, match="Received: layer_scale_init="):
        LayerScaleBlock(2, 12, layer_scale_init=value)


@pytest.mark.parametrize("norm", ["deepnorm", "rezero", "layerscale"])
def test_baseline_vit_saves_and_loads(tmp_path, norm):
    model = tiny_vit(norm=norm)
    for w in model.trainable_weights:  # every weight non-trivial, ReZero's a and LayerScale's l included
        w.assign(np.random.default_rng(len(w.path)).normal(0.0, 0.3, w.shape).astype("float32"))
    images = np.random.default_rng(1).normal(size=(2, 8, 8, 1)).astype("float32")
    path = str(tmp_path / f"{norm}.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    np.testing.assert_allclose(_numpy(loaded(images)), _numpy(model(images)), atol=1e-6)
