"""`jit_compile=True` on PyTorch: `torch.compile` of each block (`keras_tse.training.block_compile`).

The compiled model trains as the eager one (same losses and weights), compiles a number of programs
that does not grow with depth and stops compiling after its first epoch, keeps dropout's two modes,
and saves the same `.keras` file. On JAX and TensorFlow `compile_blocks` leaves the model as it is."""

import json
import zipfile

import keras
import numpy as np
import pytest

import keras_tse
from keras_tse import training
from keras_tse.training import block_compile
from tests import helpers

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

TORCH_ONLY = pytest.mark.skipif(keras.backend.backend() != "torch", reason="torch.compile is PyTorch's")


def _images(n=64):
    rng = np.random.default_rng(0)
    return rng.normal(size=(n, 8, 8, 1)).astype("float32"), rng.integers(0, 10, n)


def _graphs():
    from torch._dynamo.utils import counters

    return counters["stats"]["unique_graphs"]


def _train(jit_compile, depth=3, epochs=2):
    keras.utils.set_random_seed(0)
    model = helpers.tiny_vit(depth=depth, norm="post")
    training.IMAGE_CLASSIFICATION.compile(model, keras.optimizers.Adam(1e-3), jit_compile=jit_compile)
    x, y = _images()
    losses, graphs = [], []
    for _ in range(epochs):
        losses += model.fit(x, y, batch_size=16, epochs=1, shuffle=False, verbose=0).history["loss"]
        graphs.append(_graphs() if keras.backend.backend() == "torch" else 0)
    return model, losses, graphs


@TORCH_ONLY
def test_compiled_blocks_train_as_eager_and_compile_once_whatever_the_depth():
    import torch

    torch._dynamo.reset()
    eager, eager_losses, _ = _train("auto")
    assert not block_compile.is_compiled(eager.get_layer("block_00"))
    before = _graphs()
    compiled, losses, graphs = _train(True)
    assert block_compile.is_compiled(compiled.get_layer("block_02"))
    assert compiled.jit_compile is False  # Keras's trainer stays eager
    np.testing.assert_allclose(losses, eager_losses, atol=1e-5)
    for a, b in zip(compiled.weights, eager.weights):
        np.testing.assert_allclose(keras.ops.convert_to_numpy(a), keras.ops.convert_to_numpy(b), atol=1e-5)
    per_model = graphs[0] - before
    assert per_model == 1, per_model  # one program (the training forward) for the three blocks
    assert graphs[1] == graphs[0]  # nothing compiled after the first epoch
    x, y = _images()
    evaluated = compiled.evaluate(x, y, verbose=0, return_dict=True)["loss"]
    assert evaluated == pytest.approx(eager.evaluate(x, y, verbose=0, return_dict=True)["loss"], abs=1e-5)
    assert _graphs() == graphs[1] + 1  # inference: one program more
    graphs[1] += 1
    # a deeper model of the same block compiles nothing new: the programs are per block class and mode
    _, _, deeper = _train(True, depth=6, epochs=1)
    assert deeper[0] == graphs[1]


@TORCH_ONLY
def test_dropout_drops_while_a_compiled_block_trains():
    keras.utils.set_random_seed(0)
    model = helpers.tiny_vit(depth=1, dropout=0.5)
    x, _ = _images(8)
    inference = keras.ops.convert_to_numpy(model(x, training=False))  # eager
    keras_tse.compile_blocks(model)
    first, second = (keras.ops.convert_to_numpy(model(x, training=True)) for _ in range(2))
    assert np.abs(first - second).max() > 1e-3  # a new dropout mask each call
    assert np.abs(first - inference).max() > 1e-3


def test_the_gpt_decoder_compiles_per_block_and_transformer_xl_stays_eager():
    gpt = keras_tse.zoo.gpt(depth=2, vocab_size=40, segment_len=6, hidden_dim=16, num_heads=2, ffn_dim=32)
    assert [block.name for block in block_compile.model_blocks(gpt)] == ["block_00", "block_01"]
    txl = keras_tse.compile_blocks(helpers.tiny_transformer_xl())  # its blocks write their memory in the call
    assert block_compile.model_blocks(txl) == []


def _config_of(path):
    with zipfile.ZipFile(path) as archive:
        return json.loads(archive.read("config.json"))


def test_a_compiled_model_saves_the_same_file_and_loads_as_a_plain_one(tmp_path):
    """On every backend: the .keras file of a model whose blocks were compiled is the plain model's
    (on JAX and TensorFlow `compile_blocks` leaves the blocks as they are)."""
    keras.utils.set_random_seed(0)
    model = helpers.tiny_vit(depth=2)
    x, _ = _images(4)
    model.save(tmp_path / "plain.keras")
    expected = keras.ops.convert_to_numpy(model(x))
    keras_tse.compile_blocks(model)  # (its programs are compiled at the first call: none here)
    compiled = keras.backend.backend() == "torch"
    assert block_compile.is_compiled(model.get_layer("block_01")) == compiled
    model.save(tmp_path / "compiled.keras")
    assert _config_of(tmp_path / "compiled.keras") == _config_of(tmp_path / "plain.keras")
    loaded = keras.saving.load_model(tmp_path / "compiled.keras")
    assert not block_compile.is_compiled(loaded.get_layer("block_01"))
    np.testing.assert_allclose(keras.ops.convert_to_numpy(loaded(x)), expected, atol=1e-5)


def test_a_run_records_how_its_step_compiles_on_this_backend():
    backend = keras.backend.backend()
    expected = {
        "torch": ("torch.compile of each block, the step eager", "eager"),
        "jax": ("XLA, the whole step", "XLA, the whole step"),
        "tensorflow": ("XLA, the whole step", "tf.function, XLA where Keras picks it (a GPU)"),
    }[backend]
    assert (block_compile.compiled_as(True), block_compile.compiled_as("auto")) == expected
    whole = ("torch.compile of the whole step (Keras's)", "XLA, the whole step")
    assert block_compile.compiled_as("whole_model") in whole


def test_jit_compile_values():
    expected_true = (False, True) if keras.backend.backend() == "torch" else (True, False)
    assert block_compile.keras_jit_compile(True) == expected_true
    assert block_compile.keras_jit_compile("whole_model") == (True, False)
    assert block_compile.keras_jit_compile("auto") == ("auto", False)
    with pytest.raises(ValueError, match="`jit_compile` must be one of .*Received: jit_compile='blocks'"):
        block_compile.keras_jit_compile("blocks")
