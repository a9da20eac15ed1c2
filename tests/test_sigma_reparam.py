"""`SigmaReparamDense` and `norm="sigma_reparam"` (Zhai et al. 2023): the kernel `(gamma / sigma(W)) W`, `sigma` one
power-iteration step from the stored `u` (apple/ml-sigma-reparam's `SpectralNormedWeight`, written out in NumPy
here), `u` moved on only while training; every kernel of the block, and only those."""

import keras
import numpy as np
import pytest

import keras_tse
from keras_tse.layers import ScannedBlocks, SigmaReparamDense
from keras_tse.zoo import vit
from tests.helpers import tiny_transformer_xl

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

TINY = dict(depth=2, image_size=8, patch_size=4, hidden_dim=16, num_heads=2, ffn_dim=32, num_classes=3, channels=1)


def _numpy_step(kernel, u, gamma):
    """The authors' forward in NumPy, their `[out, in]` weight `W` being the Keras kernel transposed: `v = W u`,
    `u' = W^T v` (each to unit length), `sigma = v^T W u'`; returns (gamma W / sigma as a Keras kernel, u')."""
    w = kernel.T
    v = w @ u
    v /= np.linalg.norm(v)
    u_next = w.T @ v
    u_next /= np.linalg.norm(u_next)
    sigma = v @ w @ u_next
    return gamma * kernel / sigma, u_next


def _built(units=5, inputs=4, seed=0):
    layer = SigmaReparamDense(units, activation="relu", name="sigma")
    layer.build((None, inputs))
    rng = np.random.default_rng(seed)
    layer.kernel.assign(rng.standard_normal((inputs, units)).astype("float32"))
    layer.bias.assign(rng.standard_normal(units).astype("float32"))
    u = rng.standard_normal(inputs)
    layer.u.assign((u / np.linalg.norm(u)).astype("float32"))
    layer.gamma.assign(1.7)
    return layer, rng.standard_normal((3, inputs)).astype("float32")


def _numpy(layer):
    return {name: keras.ops.convert_to_numpy(getattr(layer, name)).astype("float64") for name in ("kernel", "u")}


def test_the_layer_is_the_authors_forward_and_moves_u_only_while_training():
    layer, x = _built()
    held = _numpy(layer)
    kernel, u_next = _numpy_step(held["kernel"], held["u"], 1.7)
    expected = np.maximum(x @ kernel + keras.ops.convert_to_numpy(layer.bias), 0)
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(x, training=False)), expected, atol=2e-5)
    np.testing.assert_array_equal(_numpy(layer)["u"], held["u"])  # inference keeps u
    np.testing.assert_allclose(keras.ops.convert_to_numpy(layer(x, training=True)), expected, atol=2e-5)
    np.testing.assert_allclose(_numpy(layer)["u"], u_next, atol=1e-6)  # training moves it one step on
    # repeated steps converge to the spectral norm: the kernel then has gamma as its largest singular value
    for _ in range(30):
        layer(x, training=True)
    effective = keras.ops.convert_to_numpy(layer.effective_kernel())
    assert np.linalg.svd(effective, compute_uv=False)[0] == pytest.approx(1.7, rel=1e-4)


def test_a_fresh_layer_is_the_plain_dense_layer_of_its_kernel_and_trains_gamma_but_not_u():
    keras.utils.set_random_seed(0)
    layer = SigmaReparamDense(6, name="fresh")
    x = np.random.default_rng(1).standard_normal((4, 3)).astype("float32")
    out = keras.ops.convert_to_numpy(layer(x))  # built at this first call
    plain = x @ keras.ops.convert_to_numpy(layer.kernel) + keras.ops.convert_to_numpy(layer.bias)
    np.testing.assert_allclose(out, plain, atol=1e-5)
    top = np.linalg.svd(keras.ops.convert_to_numpy(layer.kernel), compute_uv=False)[0]
    assert float(keras.ops.convert_to_numpy(layer.gamma)) == pytest.approx(top, rel=1e-5)
    assert sorted(w.name for w in layer.trainable_weights) == ["bias", "gamma", "kernel"]
    assert [w.name for w in layer.non_trainable_weights] == ["u"]


def test_every_kernel_of_the_block_is_reparametrised_and_the_model_saves_and_loads(tmp_path):
    keras.utils.set_random_seed(0)
    model = vit(**TINY, norm="sigma_reparam")
    block = model.get_layer("block_00")
    reparametrised = sorted(layer.name for layer in block._flatten_layers() if isinstance(layer, SigmaReparamDense))
    assert reparametrised == ["attention_output", "ffn_inner", "ffn_outer", "key", "query", "value"]
    assert not [layer for layer in model.layers if isinstance(layer, SigmaReparamDense)]  # embedding, head plain
    x = np.random.default_rng(1).standard_normal((8, 8, 8, 1)).astype("float32")
    model.compile(keras.optimizers.Adam(1e-2), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, np.arange(8) % 3, batch_size=4, epochs=1, verbose=0)
    # the measures read the kernels the block multiplies by
    query = block.self_attention.query_dense
    np.testing.assert_allclose(
        keras.ops.convert_to_numpy(block.self_attention.query_key_value_kernels()[0]),
        keras.ops.convert_to_numpy(query.effective_kernel()),
    )
    model.save(tmp_path / "sigma.keras")
    loaded = keras.saving.load_model(tmp_path / "sigma.keras")
    np.testing.assert_allclose(loaded.predict(x, verbose=0), model.predict(x, verbose=0), atol=1e-6)
    loaded_query = loaded.get_layer("block_00").self_attention.query_dense
    np.testing.assert_array_equal(keras.ops.convert_to_numpy(loaded_query.u), keras.ops.convert_to_numpy(query.u))


def test_transformer_xl_reparametrises_its_fused_and_position_kernels():
    model = tiny_transformer_xl(norm="sigma_reparam")
    attention = model.get_layer("block_00").self_attention
    names = sorted(layer.name for layer in attention._flatten_layers() if isinstance(layer, SigmaReparamDense))
    assert names == ["attention_output", "position", "qkv"]


@pytest.mark.one_backend  # the refusals are Python, before any computation
def test_lora_quantization_and_remat_refuse_it_in_one_line():
    with pytest.raises(ValueError, match="Received: remat=True with norm='sigma_reparam'; use remat=False"):
        vit(**TINY, norm="sigma_reparam", remat=True)
    model = vit(**TINY, norm="sigma_reparam")
    with pytest.raises(ValueError, match=r"^\w+: a sigma-reparametrised kernel takes no LoRA adapters"):
        keras_tse.lora.enable_lora(model, 2)
    assert len(model.trainable_weights) == len(model.weights) - 2 * 6  # nothing frozen: each block's six u
    with pytest.raises(ValueError, match=r"cannot be stored quantized. Received: quantize\('int8'\)"):
        model.quantize("int8")


@pytest.mark.usefixtures("float32_matmuls")
def test_a_scanned_stack_moves_each_blocks_u_as_the_unrolled_blocks_do():
    """`scan=True`: the same logits and the same losses over two steps as the unrolled blocks, each block's `u`
    moved on as its unrolled twin's (each block writes its own row of the stack)."""
    keras.utils.set_random_seed(0)
    unrolled = vit(**TINY, norm="sigma_reparam")
    scanned = vit(**TINY, norm="sigma_reparam", scan=True)
    for layer in scanned.layers:
        if layer.name != "blocks" and layer.weights:
            layer.set_weights(unrolled.get_layer(layer.name).get_weights())
    stack = ScannedBlocks.from_blocks([unrolled.get_layer(f"block_{i:02d}") for i in range(2)])
    stack.build(unrolled.get_layer("block_00").input.shape)
    scanned.get_layer("blocks").set_weights([keras.ops.convert_to_numpy(w) for w in stack.weights])
    x, y = np.random.default_rng(1).standard_normal((4, 8, 8, 1)).astype("float32"), np.arange(4) % 3
    np.testing.assert_allclose(scanned.predict(x, verbose=0), unrolled.predict(x, verbose=0), atol=1e-5)
    start = _query_u(scanned)
    losses = []
    for model in (unrolled, scanned):
        model.compile(keras.optimizers.Adam(1e-2), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        losses.append([float(model.train_on_batch(x, y)) for _ in range(2)])
    np.testing.assert_allclose(losses[1], losses[0], rtol=1e-5)
    moved = _query_u(scanned)
    assert not np.allclose(moved, start, atol=1e-6)  # trained: each block's kept state reached its row
    for i in range(2):
        own = unrolled.get_layer(f"block_{i:02d}").self_attention.query_dense.u
        np.testing.assert_allclose(moved[i], keras.ops.convert_to_numpy(own), atol=1e-5)


def _query_u(scanned):
    (u,) = [w for w in scanned.get_layer("blocks").weights if w.path.endswith("_self_attention_query_u")]
    return keras.ops.convert_to_numpy(u).copy()
