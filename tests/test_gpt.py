"""The GPT-style decoder (`zoo.gpt`), and a seventh residual layout added from one module
(`tests/fixtures/gated_layout.py`) trained in every model family, by `create_model` and by the
recipes' `--norm`."""

import json
import os
import subprocess
import sys

import keras
import numpy as np
import pytest

from keras_tse import layouts, zoo
from keras_tse.losses import LogProbabilityCrossentropy
from tests.fixtures import gated_layout  # noqa: F401  registers norm="gated"
from tests.helpers import randomise_weights, run_recipe_here

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = dict(depth=2, vocab_size=40, segment_len=8, hidden_dim=16, num_heads=2, ffn_dim=32)


def _ids(seed=0, shape=(2, 8)):
    return np.random.default_rng(seed).integers(0, TINY["vocab_size"], shape).astype("int32")


@pytest.mark.parametrize("norm", [n for n in layouts.layout_names() if layouts.get_layout(n).causal])
def test_no_position_reads_a_later_token_in_any_layout(norm):
    keras.utils.set_random_seed(0)
    model = zoo.gpt(norm=norm, **TINY)
    randomise_weights(model)  # ReZero's and the gates' zeros or small starts would hide a leak
    ids = _ids()
    later = ids.copy()
    later[:, 5] = (later[:, 5] + 1) % TINY["vocab_size"]
    before, after = model.predict(ids, verbose=0), model.predict(later, verbose=0)
    np.testing.assert_allclose(before[:, :5], after[:, :5], atol=1e-5)
    assert np.abs(before[:, 5:] - after[:, 5:]).max() > 1e-4  # the change is seen where it may be


def test_the_leaky_layout_does_read_later_tokens():
    keras.utils.set_random_seed(0)
    model = zoo.gpt(norm="deescalate_leaky_global", **TINY)
    ids = _ids()
    later = ids.copy()
    later[:, 5] = (later[:, 5] + 1) % TINY["vocab_size"]
    moved = np.abs(model.predict(ids, verbose=0)[:, :5] - model.predict(later, verbose=0)[:, :5]).max()
    assert moved > 1e-4


def test_gpt_learns_a_repeating_text_and_outputs_log_probabilities():
    keras.utils.set_random_seed(0)
    model = zoo.gpt(norm="deescalate", **TINY)
    text = np.tile(np.arange(10, dtype="int32"), 40)  # a period-10 text: the next token is certain
    x = np.stack([text[i : i + 8] for i in range(0, 380, 3)])
    y = np.stack([text[i + 1 : i + 9] for i in range(0, 380, 3)])
    model.compile(keras.optimizers.Adam(1e-2), LogProbabilityCrossentropy())
    first = model.evaluate(x, y, verbose=0)
    model.fit(x, y, batch_size=16, epochs=8, verbose=0)
    assert model.evaluate(x, y, verbose=0) < 0.2 * first
    probabilities = np.exp(model.predict(x[:2], verbose=0)).sum(-1)
    np.testing.assert_allclose(probabilities, 1.0, rtol=1e-4)


@pytest.mark.one_backend  # it loads the file in the other two backends itself
def test_gpt_keras_file_loads_and_predicts_the_same_on_every_backend(tmp_path):
    keras.utils.set_random_seed(0)
    model = zoo.create_model("gpt8_small", depth=2, vocab_size=40, cutoffs=(), norm="deescalate")
    ids = _ids(shape=(2, 32))
    expected = model.predict(ids, verbose=0)
    model.save(tmp_path / "gpt.keras")
    np.save(tmp_path / "ids.npy", ids)
    code = (
        "import sys, numpy as np, keras, keras_tse\n"
        "model = keras.saving.load_model(sys.argv[1])\n"
        "np.save(sys.argv[3], model.predict(np.load(sys.argv[2]), verbose=0))\n"
    )
    loaded = keras.saving.load_model(tmp_path / "gpt.keras")
    np.testing.assert_allclose(loaded.predict(ids, verbose=0), expected, atol=1e-4)
    for backend in sorted({"tensorflow", "jax", "torch"} - {keras.backend.backend()}):  # this one just above
        out = tmp_path / f"{backend}.npy"
        env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "2"}
        args = [sys.executable, "-c", code, str(tmp_path / "gpt.keras"), str(tmp_path / "ids.npy"), str(out)]
        done = subprocess.run(args, capture_output=True, text=True, cwd=ROOT, env=env, timeout=300)
        assert done.returncode == 0, (backend, done.stderr[-2000:])
        np.testing.assert_allclose(np.load(out), expected, atol=1e-4, err_msg=backend)


FAMILIES = zoo.list_families()  # every registered family, each tried at its own `tiny` keywords


def _task(name):
    """(inputs, targets, loss) for one small training of family `name`, from what it takes (its task
    and tiny keywords)."""
    family, rng = zoo.get_family(name), np.random.default_rng(1)
    config = family.tiny
    if family.task == "images":
        shape = (32, config["image_size"], config["image_size"], config["channels"])
        x, y = rng.normal(size=shape).astype("float32"), rng.integers(0, config["num_classes"], 32)
        return x, y, keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    ids = rng.integers(0, config["vocab_size"], (32, config["segment_len"] + 1)).astype("int32")
    return ids[:, :-1], ids[:, 1:], LogProbabilityCrossentropy()


@pytest.mark.one_backend  # the registry is Python; every layout's numerics run on every backend above
@pytest.mark.parametrize("name", FAMILIES)
def test_a_seventh_layout_from_one_module_trains_in_every_family(name, tmp_path):
    keras.utils.set_random_seed(0)
    model = zoo.create_model(name, norm="gated", **zoo.get_family(name).tiny)
    blocks = [layer for layer in model.layers if getattr(layer, "norm", None) == "gated"]
    assert len(blocks) == 2 and blocks[0].gate_init == pytest.approx(0.5)  # 1 / sqrt(2 depth), its depth rule
    x, y, loss = _task(name)
    model.compile(keras.optimizers.Adam(1e-2), loss)
    model.fit(x, y, batch_size=4, epochs=1, shuffle=False, verbose=0)
    gates = np.array([[keras.ops.convert_to_numpy(g) for g in block.layout_state] for block in blocks])
    assert np.all(np.isfinite(gates)) and np.abs(gates - 0.5).min() > 1e-4  # every gate learned
    model.save(tmp_path / "gated.keras")
    loaded = keras.saving.load_model(tmp_path / "gated.keras")
    np.testing.assert_allclose(loaded.predict(x[:4], verbose=0), model.predict(x[:4], verbose=0), atol=1e-5)


@pytest.mark.one_backend
@pytest.mark.parametrize("name", FAMILIES)
def test_a_layouts_own_option_reaches_every_block_of_every_family_and_a_foreign_one_is_refused(name):
    model = zoo.create_model(name, norm="gated", layout_options={"gate_init": 0.25}, **zoo.get_family(name).tiny)
    blocks = [layer for layer in model.layers if getattr(layer, "norm", None) == "gated"]
    assert [block.gate_init for block in blocks] == [0.25, 0.25]  # the given value over the depth rule's 0.5
    with pytest.raises(
        ValueError, match=r"`layout_options` gate_init are not options of norm='post' \(its options: none\)"
    ):
        zoo.create_model(name, norm="post", layout_options={"gate_init": 0.25}, **zoo.get_family(name).tiny)
    with pytest.raises(ValueError, match="`gate_init` must be positive. Received: gate_init=-1"):
        zoo.create_model(name, norm="gated", layout_options={"gate_init": -1}, **zoo.get_family(name).tiny)


RECIPE_RUNS = {
    "vit": ("cifar10_vit", ["--smoke", "--depth", "1", "--epochs", "1"]),
    "transformer_xl": ("wikitext103_txl", ["--smoke", "--depth", "1", "--steps", "4"]),
    "gpt on Penn Treebank": (
        "wikitext103_txl",
        ["--model", "gpt", "--dataset", "ptb", "--smoke", "--depth", "1", "--steps", "4"],
    ),
}


@pytest.mark.large
@pytest.mark.one_backend  # the recipes' own tests train them on every backend
@pytest.mark.parametrize("run", RECIPE_RUNS)
def test_a_seventh_layout_trains_through_the_recipes_norm_flag(run, tmp_path, capsys):
    recipe, argv = RECIPE_RUNS[run]
    option = ["--layout-option", "gate_init=0.25"]  # the layout's own option, from the command line
    code, out, err = run_recipe_here(recipe, [*argv, "--norm", "gated", *option, "--out", str(tmp_path)], capsys)
    assert code == 0, err[-3000:]
    with open(tmp_path / "gated" / "summary.json") as f:
        summary = json.load(f)
    assert summary["epochs"] >= 1 and np.isfinite(summary["train_loss"])
    with open(tmp_path / "gated" / "config.json") as f:
        config = json.load(f)
    assert config["overrides"]["norm"] == "gated" and config["overrides"]["layout_options"] == {"gate_init": 0.25}
    model = keras.saving.load_model(tmp_path / "gated" / "checkpoints" / "last.keras")
    assert {layer.norm for layer in model.layers if hasattr(layer, "layout_state")} == {"gated"}
    assert {layer.gate_init for layer in model.layers if hasattr(layer, "layout_state")} == {0.25}


@pytest.mark.parametrize("name", FAMILIES)
def test_forward_intermediates_gives_every_block_of_every_family(name):
    keras.utils.set_random_seed(0)
    tiny = zoo.get_family(name).tiny
    overrides = {**tiny, "depth": 3, **({"mem_len": 0} if "mem_len" in tiny else {})}
    model = zoo.create_model(name, norm="post", **overrides)
    x, _, _ = _task(name)
    x = x[:4]
    output, blocks = zoo.forward_intermediates(model, x)
    assert len(blocks) == 3
    np.testing.assert_allclose(keras.ops.convert_to_numpy(output), model.predict(x, verbose=0), atol=1e-5)
    # the last block's output, recomputed by hand from the second's: the right tensors in the right order
    last = model.get_layer("block_02")(blocks[1])
    np.testing.assert_allclose(keras.ops.convert_to_numpy(blocks[2]), keras.ops.convert_to_numpy(last), atol=1e-5)
    _, (second,) = zoo.forward_intermediates(model, x, indices=[-2])
    np.testing.assert_allclose(keras.ops.convert_to_numpy(second), keras.ops.convert_to_numpy(blocks[1]), atol=1e-6)
    with pytest.raises(ValueError, match=r"Received: indices=\[5\]"):
        zoo.forward_intermediates(model, x, indices=[5])
