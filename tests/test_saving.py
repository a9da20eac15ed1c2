"""A `.keras` file saved on this backend loads and predicts the same on the other two (keras_tse's layers and
models, and a KerasHub backbone de-escalated by `keras_tse.deescalate`)."""

import os
import subprocess
import sys
import textwrap

import keras
import numpy as np
import pytest

import keras_tse
from keras_tse import lora
from keras_tse.layers import DeEscalation, PostNormBlock, PreNormBlock
from tests.helpers import full_float32_matmuls, only_on, randomise_weights, tiny_transformer_xl, tiny_vit

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

BACKENDS = ("tensorflow", "jax", "torch")

# What a user on another backend runs: nothing but `import keras_tse` before loading. One process
# loads every kind (argv: the backend's name check, then model, input and output paths in threes).
LOAD_AND_PREDICT = textwrap.dedent(
    """
    import sys
    import numpy as np
    import keras_tse  # registers the layers
    import keras
    from tests.helpers import full_float32_matmuls  # both sides in float32, not TF32, on a GPU
    for model_path, x_path, y_path in zip(*[iter(sys.argv[1:])] * 3):
        model = keras.saving.load_model(model_path)
        with full_float32_matmuls():
            np.save(y_path, keras.ops.convert_to_numpy(model(np.load(x_path))))
    print(keras.backend.backend())
    """
)


def _every_layer_model():
    inputs = keras.Input((6, 8))
    x = PostNormBlock(2, 16, deescalate="output", name="post_output")(inputs)
    x = PreNormBlock(2, 16, activation="gelu", name="pre")(x)
    x = PostNormBlock(4, 16, head_dim=3, deescalate="pre_ffn", causal=True, trainable_tau=True, tau=0.7)(x)
    x = PostNormBlock(2, 16, alpha=0.5)(x)
    x = DeEscalation(tau=0.3, causal=True)(x)
    outputs = keras.layers.Dense(3)(x)
    model = keras.Model(inputs, outputs)
    randomise_weights(model)
    return model


def _trained_vit():
    """A small ViT after a few training steps (class-token slicing and PatchEmbedding included)."""
    model = tiny_vit(norm="deescalate", trainable_tau=True, tau=0.8)
    rng = np.random.default_rng(2)
    x, y = rng.standard_normal((32, 8, 8, 1)).astype("float32"), rng.integers(0, 10, 32)
    model.compile(keras.optimizers.AdamW(1e-2), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    model.fit(x, y, epochs=2, batch_size=8, verbose=0)
    return model


def _trained_transformer_xl():
    """A small Transformer-XL after a few steps: its memory (saved with it) is part of what must match."""
    model = tiny_transformer_xl(mem_len=4, batch_size=3, trainable_tau=True, tau=0.9)
    ids = np.random.default_rng(3).integers(0, 40, (12, 7)).astype("int32")
    model.compile(keras.optimizers.Adam(1e-2), keras_tse.losses.LogProbabilityCrossentropy())
    model.fit(ids[:, :-1], ids[:, 1:], batch_size=3, epochs=1, verbose=0)
    return model


def _deescalated_kerashub_vit():
    """`keras_tse.deescalate` of KerasHub's ViT backbone (tau 0.7, its blocks run out of `ViTEncoder`'s loop): a
    KerasHub `Backbone` subclass that rebuilds the original from its configuration when loaded."""
    import keras_hub

    vit = keras_hub.models.ViTBackbone(
        image_shape=(8, 8, 3), patch_size=4, num_layers=2, num_heads=2, hidden_dim=8, mlp_dim=16
    )
    randomise_weights(vit)
    return keras_tse.deescalate(vit, tau=0.7)


def _floats(shape):
    return lambda: np.random.default_rng(1).standard_normal(shape).astype("float32")


MODELS = {
    "every_layer": (_every_layer_model, _floats((2, 6, 8))),
    "trained_vit": (_trained_vit, _floats((3, 8, 8, 1))),
    "trained_transformer_xl": (_trained_transformer_xl, lambda: np.arange(18).reshape(3, 6).astype("int32") % 40),
    "deescalated_kerashub_vit": (_deescalated_kerashub_vit, _floats((2, 8, 8, 3))),
}


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    """Each kind built (and trained) once, saved, with its inputs and this backend's outputs."""
    folder = tmp_path_factory.mktemp("saved")
    models = {}
    for kind, (build, make_inputs) in MODELS.items():
        model, x = build(), make_inputs()
        model.save(folder / f"{kind}.keras")
        np.save(folder / f"{kind}_x.npy", x)
        with full_float32_matmuls():  # the other backend's process predicts in float32 too
            models[kind] = (model, x, keras.ops.convert_to_numpy(model(x)))
    return folder, models


@pytest.mark.parametrize("kind", sorted(MODELS))
def test_round_trip_on_this_backend(saved, kind):
    folder, models = saved
    model, x, expected = models[kind]
    loaded = keras.saving.load_model(folder / f"{kind}.keras")
    with full_float32_matmuls():  # as `expected` was predicted: TF32 on a GPU would miss 1e-6
        np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(x)), expected, atol=1e-6)
    assert [type(layer).__name__ for layer in loaded.layers] == [type(layer).__name__ for layer in model.layers]


# Each backend's files load on the next one (TensorFlow's on JAX, JAX's on PyTorch, PyTorch's on
# TensorFlow): over the three processes every backend writes and every backend reads.
NEXT = BACKENDS[(BACKENDS.index(keras.backend.backend()) + 1) % len(BACKENDS)]


@pytest.mark.parametrize("other", [NEXT])
def test_loads_and_predicts_the_same_on_another_backend(saved, tmp_path, other):
    folder, models = saved
    paths = {kind: (folder / f"{kind}.keras", folder / f"{kind}_x.npy", tmp_path / f"{kind}_y.npy") for kind in models}
    run = subprocess.run(
        [sys.executable, "-c", LOAD_AND_PREDICT, *(str(p) for kind in sorted(models) for p in paths[kind])],
        env={**os.environ, "KERAS_BACKEND": other},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=os.path.dirname(os.path.dirname(keras_tse.__file__)),
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip().splitlines()[-1] == other
    for kind, (_, _, expected) in models.items():
        np.testing.assert_allclose(np.load(paths[kind][2]), expected, atol=1e-5, err_msg=kind)


QUANTIZED = {  # every family, at its smallest, and its first block's name
    "vit": (
        lambda: tiny_vit(depth=2, patch_size=4, hidden_dim=16, ffn_dim=32),
        lambda rng: rng.normal(size=(4, 8, 8, 1)).astype("float32"),
        "block_00",
    ),
    "gpt": (
        lambda: keras_tse.zoo.gpt(depth=2, vocab_size=40, segment_len=6, hidden_dim=16, num_heads=2, ffn_dim=32),
        lambda rng: rng.integers(0, 40, (4, 6)).astype("int32"),
        "block_00",
    ),
    "transformer_xl": (
        lambda: tiny_transformer_xl(),
        lambda rng: rng.integers(0, 40, (2, 6)).astype("int32"),
        "block_00",
    ),
    "deescalated_kerashub_vit": (
        _deescalated_kerashub_vit,
        lambda rng: rng.normal(size=(2, 8, 8, 3)).astype("float32"),
        "transformer_block_1_deescalated",
    ),
}


# int8 on every backend; int4 (two kernel entries a byte) and float8 (float32 kernels, e4m3 casts with scales in the
# matmuls) on one backend each, a zoo family at a time, so each backend runs some of them
ZOO_FAMILIES = ("gpt", "transformer_xl", "vit")
DENSE = (keras.layers.Dense, keras.layers.EinsumDense)
MODES = [("int8", family) for family in sorted(QUANTIZED)] + [
    pytest.param(mode, family, marks=only_on(None, backend).marks)
    for (mode, family), backend in zip(
        [(mode, family) for mode in ("int4", "float8") for family in ZOO_FAMILIES],
        ["jax", "torch", "tensorflow"] * 2,
    )
]


@pytest.mark.parametrize("mode, family", MODES)
def test_a_quantized_model_saves_and_loads_with_its_quantized_kernels(mode, family, tmp_path):
    """`model.quantize(mode)` on a zoo model, saved as `.keras`: it loads (the blocks' configs record their
    quantized sublayers; Transformer-XL's, the model's; a de-escalated KerasHub backbone's, KerasHub's map of layer
    paths to their policies) with every Dense of a block in `mode` (int8's and int4's kernels stored in int8) and the
    same outputs as before saving; as a preset folder too."""
    build, inputs, first_block = QUANTIZED[family]
    model, x = build(), inputs(np.random.default_rng(0))
    model.quantize(mode)
    expected = model.predict(x, verbose=0)
    model.save(tmp_path / f"{mode}.keras")
    loaded = keras.saving.load_model(tmp_path / f"{mode}.keras")
    block = loaded.get_layer(first_block)
    dense = [layer for layer in lora.sublayers(block) if isinstance(layer, DENSE)]
    assert len(dense) >= 4 and {layer.quantization_mode for layer in dense} == {mode}  # attention's and the FFN's
    if mode != "float8":
        assert {w.dtype for w in block.weights if w.name == "kernel"} == {"int8"}
    np.testing.assert_allclose(loaded.predict(x, verbose=0), expected, atol=1e-6)
    keras_tse.zoo.save_preset(model, tmp_path / "preset")  # a preset folder too (KerasHub's layout)
    np.testing.assert_allclose(
        keras_tse.zoo.from_preset(str(tmp_path / "preset")).predict(x, verbose=0), expected, atol=1e-6
    )
