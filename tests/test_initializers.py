"""The named weight schemes: each layer's weights follow the distribution its name promises."""

import math
import os

import keras
import numpy as np
import pytest

from keras_tse.layers import (
    PatchEmbedding,
    PostNormBlock,
    RelativeAttention,
    TransformerXLBlock,
    initializers,
)
from keras_tse.zoo import from_preset, vit
from tests.helpers import tiny_vit

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py


def _fans(model):
    """path -> (values, fan_in, fan_out) of every kernel and bias (a bias takes its kernel's fans)."""
    weights = {w.path: keras.ops.convert_to_numpy(w) for w in model.weights}
    fans = {}
    for path, value in weights.items():
        if path.endswith("/kernel"):
            receptive = int(np.prod(value.shape[:-2])) if value.ndim > 2 else 1
            fans[path] = (value, receptive * value.shape[-2], receptive * value.shape[-1])
    for path, value in weights.items():
        if path.endswith("/bias"):
            _, fan_in, fan_out = fans[path[: -len("bias")] + "kernel"]
            fans[path] = (value, fan_in, fan_out)
    return fans


# The named distributions: (bound or None, standard deviation) of a kernel with these fans.
KERNELS = {
    "torch": lambda fi, fo: (1 / math.sqrt(fi), 1 / math.sqrt(3 * fi)),  # U(+-1/sqrt(fan_in))
    "glorot": lambda fi, fo: (math.sqrt(6 / (fi + fo)), math.sqrt(2 / (fi + fo))),
    "normal": lambda fi, fo: (None, 1 / math.sqrt(fi)),  # N(0, 1/d), Sec. 2.4
}


@pytest.mark.parametrize("scheme", sorted(KERNELS))
def test_paper_vit80_weights_follow_the_named_distribution(scheme):
    model = vit(depth=80, norm="deescalate", initializer=scheme)
    fans = _fans(model)
    kernels = [p for p in fans if p.endswith("/kernel")]
    biases = [p for p in fans if p.endswith("/bias") and "norm" not in p]
    # 80 blocks x (q, k, v, out, ffn_inner, ffn_outer) + the patch projection + the head
    assert len(kernels) == 80 * 6 + 2 and len(biases) == 80 * 3 + 2, (len(kernels), len(biases))
    for path in kernels:
        value, fan_in, fan_out = fans[path]
        bound, std = KERNELS[scheme](fan_in, fan_out)
        assert abs(value.std() / std - 1) < 0.08, (path, value.std(), std)
        assert abs(value.mean()) < 4 * std / math.sqrt(value.size), (path, value.mean())
        if bound is not None:
            assert np.abs(value).max() <= bound * (1 + 1e-6), (path, np.abs(value).max(), bound)
            assert np.abs(value).max() > 0.95 * bound, path  # uniform up to the bound, not a narrower law
        else:
            excess = np.mean((value / value.std()) ** 4) - 3  # a normal, not a uniform (-1.2)
            assert abs(excess) < 0.5, (path, excess)
    for path in biases:
        value, fan_in, _ = fans[path]
        if scheme == "torch":  # nn.Linear / nn.Conv2d draw the bias too, from the kernel's U(+-1/sqrt(fan_in))
            bound = 1 / math.sqrt(fan_in)
            assert np.abs(value).max() <= bound * (1 + 1e-6), path
            assert abs(value.std() / (bound / math.sqrt(3)) - 1) < 0.35, (path, value.std())
        else:
            assert not np.any(value), path
    # The patch projection is a convolution: fan_in = patch^2 * channels = 48 (CIFAR-10, patch 4).
    projection = fans["patch_embedding/projection/kernel"]
    assert projection[1] == 48


def test_default_and_presets_use_the_papers_code():
    assert vit(depth=1).get_layer("block_00").initializer == "torch"
    for name in ("vit80_cifar10_post", "vit80_cifar10_pre", "vit80_cifar10_deescalate", "vit24_digits"):
        model = from_preset(name, depth=1)
        assert {model.get_layer("block_00").initializer, model.get_layer("patch_embedding").initializer} == {"torch"}


def test_vit_pytorch_embeddings_are_standard_normal():
    layer = PatchEmbedding(32, 4, 192, embedding_initializer="vit_pytorch")
    layer.build((None, 32, 32, 3))
    positions = keras.ops.convert_to_numpy(layer.position_embedding)
    assert abs(positions.std() - 1) < 0.03 and abs(positions.mean()) < 0.03
    timm = PatchEmbedding(32, 4, 192)
    timm.build((None, 32, 32, 3))
    assert np.abs(keras.ops.convert_to_numpy(timm.position_embedding)).max() <= 0.04  # truncated at 2 std


def test_transformer_xl_keeps_the_reference_init():
    block = TransformerXLBlock(4, 64, head_dim=16)
    block.build((2, 8, 64))
    assert block.initializer == "transformer_xl" and block.self_attention.initializer == "transformer_xl"
    qkv = keras.ops.convert_to_numpy(block.self_attention.qkv_dense.kernel)
    assert abs(qkv.std() / 0.02 - 1) < 0.05
    assert not np.any(keras.ops.convert_to_numpy(block.ffn_inner.bias))
    torch_attention = RelativeAttention(4, 16, initializer="torch")
    torch_attention.build((2, 8, 64))
    kernel = keras.ops.convert_to_numpy(torch_attention.qkv_dense.kernel)
    assert np.abs(kernel).max() <= 1 / 8 and np.abs(kernel).max() > 0.95 / 8


def test_unknown_scheme_is_named():
    with pytest.raises(ValueError, match=r"initializer.*Received: initializer='xavier'"):
        PostNormBlock(2, 8, initializer="xavier")
    with pytest.raises(ValueError, match="initializer"):
        vit(depth=1, initializer="kaiming")


@pytest.mark.parametrize("scheme", ["torch", "normal"])
def test_saved_model_keeps_its_scheme(tmp_path, scheme):
    model = tiny_vit(initializer=scheme, embedding_initializer="vit_pytorch")
    path = os.path.join(tmp_path, "vit.keras")
    model.save(path)
    loaded = keras.saving.load_model(path)
    assert loaded.get_layer("block_01").initializer == scheme
    assert loaded.get_layer("block_01").self_attention.initializer == scheme
    assert loaded.get_layer("patch_embedding").get_config()["embedding_initializer"] == "vit_pytorch"
    x = np.random.default_rng(0).standard_normal((2, 8, 8, 1)).astype("float32")
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(x)), keras.ops.convert_to_numpy(model(x)), atol=1e-5)
    # Rebuilt from the config alone, the fresh weights follow the same scheme.
    rebuilt = keras.Model.from_config(model.get_config())
    assert rebuilt.get_layer("block_00").initializer == scheme


def test_torch_bias_bound_golden():
    # nn.Linear(192, 384): bound 1/sqrt(192) = 0.0721688
    draw = initializers.bias_initializer("torch", 192)
    assert draw.get_config()["maxval"] == pytest.approx(0.0721688, abs=1e-7)
    assert initializers.bias_initializer("glorot", 192) == "zeros"
