"""The data registry: a data set registered from one spec trains in the ViT recipe and the sweep, and
`keras-tse datasets` lists it."""

import csv
import json

import keras
import numpy as np
import pytest

from keras_tse import data
from keras_tse.cli import main as cli
from tests.helpers import run_recipe_here, text_folder

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py


def _stripes(seed=0):
    """12x12 grey images of three classes, horizontal, vertical or diagonal stripes, with noise."""
    rng = np.random.default_rng(seed)
    rows, cols = np.mgrid[:12, :12]
    patterns = [rows % 4 < 2, cols % 4 < 2, (rows + cols) % 4 < 2]
    labels = rng.integers(0, 3, 600)
    images = np.stack([patterns[label] for label in labels]) * 160.0 + rng.normal(48, 24, (600, 12, 12))
    images = np.clip(images, 0, 255).astype("uint8")[..., None]
    return (images[:450], labels[:450]), (images[450:], labels[450:])


STRIPES = data.register_dataset(
    data.DatasetSpec("stripes", "images", "synthetic stripes", _stripes, 12, 1, 3, (0.4,), (0.3,))
)


def test_a_registered_set_is_listed_and_loads_by_name(capsys):
    assert "stripes" in data.list_datasets("images", own=False)
    assert "stripes" not in data.list_datasets("text")
    (x, y), (x_test, y_test) = data.get_dataset("stripes").load_data(seed=0, download=False)  # unused keywords dropped
    assert x.shape == (450, 12, 12, 1) and set(np.unique(y)) == {0, 1, 2}
    assert cli.main(["datasets", "--task", "images"]) == 0
    listed = capsys.readouterr().out
    assert "stripes" in listed and "12x12x1 images, 3 classes" in listed and "ptb" not in listed
    with pytest.raises(ValueError, match="A data set named 'stripes' is registered already"):
        data.register_dataset(data.DatasetSpec("stripes", "text", "other", _stripes))
    with pytest.raises(ValueError, match="Received: dataset='nope'"):
        data.get_dataset("nope")


@pytest.mark.large
def test_the_vit_recipe_trains_on_a_registered_set(tmp_path, capsys):
    argv = ["--dataset", "stripes", "--smoke", "--norm", "deescalate", "--depth", "1", "--epochs", "3"]
    code, out, err = run_recipe_here("cifar10_vit", [*argv, "--out", str(tmp_path)], capsys)
    assert code == 0, err[-3000:]
    with open(tmp_path / "deescalate" / "config.json") as f:
        overrides = json.load(f)["overrides"]
    assert {k: overrides[k] for k in ("image_size", "channels", "num_classes")} == dict(
        image_size=12, channels=1, num_classes=3
    )
    with open(tmp_path / "deescalate" / "summary.json") as f:
        summary = json.load(f)
    assert summary["best_valid_accuracy"] > 0.6  # chance is 1/3: it learned the stripes
    model = keras.saving.load_model(tmp_path / "deescalate" / "checkpoints" / "last.keras")
    assert tuple(model.output.shape) == (None, 3)


def test_the_sweep_trains_on_a_registered_set(tmp_path, capsys):
    out = tmp_path / "sweep"
    argv = ["sweep", "--quick", "--dataset", "stripes", "--depths", "1", "--norms", "post", "--out", str(out)]
    assert cli.main(argv) == 0, capsys.readouterr().err[-3000:]
    with open(out / "sweep.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 1 and rows[0]["diverged"] == "0" and np.isfinite(float(rows[0]["final_loss"]))
    with open(out / "keras_tse.json") as f:
        assert json.load(f)["settings"] == {"dataset": "stripes"}
    cell = next((out / "cells").iterdir())
    model = keras.saving.load_model(cell / "checkpoints" / "last.keras")
    assert tuple(model.input.shape) == (None, 12, 12, 1) and tuple(model.output.shape) == (None, 3)


def _plugin_package(root, name="stripes_plugin", value="SPEC"):
    """A package installed the way pip installs one (its module beside a `.dist-info` whose
    entry_points.txt names a `keras_tse.datasets` entry), on a folder of its own to put on the path."""
    (root / f"{name}.py").write_text(
        "import numpy as np\nfrom keras_tse import data\n\n\n"
        "def _load(seed=0):\n"
        "    rng = np.random.default_rng(seed)\n"
        "    rows, cols = np.mgrid[:8, :8]\n"
        "    patterns = [rows % 4 < 2, cols % 4 < 2]\n"
        "    labels = rng.integers(0, 2, 300)\n"
        "    images = (np.stack([patterns[k] for k in labels]) * 200.0 + rng.normal(20, 10, (300, 8, 8)))\n"
        "    images = np.clip(images, 0, 255).astype('uint8')[..., None]\n"
        "    return (images[:240], labels[:240]), (images[240:], labels[240:])\n\n\n"
        "SPEC = data.DatasetSpec('plugin_stripes', 'images', 'stripes from a plug-in', _load, 8, 1, 2)\n"
    )
    (root / f"{name}_models.py").write_text(  # two families, each taking its own keywords only
        "from keras_tse import zoo\nfrom keras_tse.zoo.registry import register_family\n\n\n"
        "@register_family('vit_plugin', lambda config: f\"{config['image_size']}px images\")\n"
        "def vit_plugin(image_size=8, channels=1, num_classes=2, norm='deescalate', depth=1, name=None):\n"
        "    return zoo.vit(depth, norm, image_size=image_size, patch_size=2, channels=channels,\n"
        "                   num_classes=num_classes, hidden_dim=16, ffn_dim=64, num_heads=2, name=name)\n\n\n"
        "@register_family('gpt_plugin', lambda config: 'token ids', task='text')\n"
        "def gpt_plugin(vocab_size, norm='deescalate', segment_len=16, name=None):\n"
        "    return zoo.gpt(1, norm, vocab_size=vocab_size, hidden_dim=16, num_heads=2, ffn_dim=32, cutoffs=(),\n"
        "                   segment_len=segment_len, name=name)\n"
    )
    (root / f"{name}_sandwich.py").write_text(  # a layout is one file (keras_tse.layouts.Layout)
        "from keras_tse import layouts\n\n\n"
        "class Sandwich(layouts.Layout):  # sandwich norm (Ding et al. 2021, CogView): x + LN(f(LN x))\n"
        "    name = 'sandwich'\n"
        "    body = 'pre'\n"
        "    branch_norm = True\n"
    )
    info = root / f"{name}-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text(
        f"[keras_tse.datasets]\nplugin_stripes = {name}:{value}\n\n"
        f"[keras_tse.families]\nvit_plugin = {name}_models:vit_plugin\ngpt_plugin = {name}_models:gpt_plugin\n\n"
        f"[keras_tse.layouts]\nsandwich = {name}_sandwich:Sandwich\n"
    )
    return root


@pytest.mark.large
@pytest.mark.starts_processes  # its commands run under JAX in their own processes, whatever backend hosts the test
def test_a_data_set_families_and_a_layout_from_another_packages_entry_points_train_from_the_command_line(
    tmp_path, monkeypatch
):
    """The plug-in's package is all there is (no code of the user's calls `register_dataset`,
    `register_family` or `register_layout`): a fresh `keras-tse datasets` lists its set; `keras-tse train
    vit_plugin --dataset plugin_stripes --norm sandwich` trains its image family, which takes its own
    keywords only, on it, in its layout (a sandwich norm, one file); a flag whose keyword the family lacks
    is one line; `keras-tse train gpt_plugin` trains its text family on a text folder."""
    import os
    import subprocess
    import sys

    from keras_tse.layouts.layout import LAYOUTS

    (tmp_path / "site").mkdir()
    site = _plugin_package(tmp_path / "site")
    env = {**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": str(site)}
    cli_command = [sys.executable, "-m", "keras_tse.cli.main"]
    listed = subprocess.run([*cli_command, "datasets"], env=env, capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "plugin_stripes" in listed.stdout and "8x8x1 images, 2 classes" in listed.stdout
    argv = ["train", "vit_plugin", "--dataset", "plugin_stripes", "--epochs", "2", "--batch-size", "32"]
    out = tmp_path / "run"
    refused = subprocess.run(
        [*cli_command, *argv, "--hidden-dim", "16", "--out", str(out)], env=env, capture_output=True, text=True
    )
    assert refused.returncode == 2 and refused.stderr.strip().splitlines()[-1] == (
        "keras-tse train vit_plugin: error: --hidden-dim: received with --model vit_plugin; expected a family "
        "whose builder takes it"
    )
    trained = subprocess.run(
        [*cli_command, *argv, "--norm", "sandwich", "--out", str(out)], env=env, capture_output=True, text=True,
        timeout=600,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-2000:]
    with open(out / "sandwich" / "config.json") as f:
        overrides = json.load(f)["overrides"]
    assert overrides == {"norm": "sandwich"}  # the data's geometry is the family's default: no ViT keyword passed
    monkeypatch.syspath_prepend(str(site))  # the layout loads from its entry point here too
    try:
        trained = keras.saving.load_model(out / "sandwich" / "checkpoints" / "last.keras")
    finally:
        LAYOUTS.unregister("sandwich")
    assert trained.name == "vit_plugin_plugin_stripes_sandwich"  # the plug-in's builder made it: its 4x FFN
    block = trained.get_layer("block_00")
    assert tuple(block.ffn_inner.kernel.shape) == (16, 64) and tuple(trained.output.shape) == (None, 2)
    assert block.norm == "sandwich" and tuple(block.ffn_branch_norm.gamma.shape) == (16,)  # the layout's own norms
    text = text_folder(tmp_path / "text", (400, 60, 60))
    lm = ["train", "gpt_plugin", "--dataset", "text", "--data-dir", str(text), "--steps", "4", "--batch-size", "4"]
    trained = subprocess.run(
        [*cli_command, *lm, "--norm", "deescalate", "--out", str(tmp_path / "lm")], env=env, capture_output=True,
        text=True, timeout=600,
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-2000:]
    with open(tmp_path / "lm" / "deescalate" / "config.json") as f:
        config = json.load(f)
    assert (config["model"], config["overrides"]["segment_len"], config["preset"]) == ("gpt_plugin", 64, None)
    with open(tmp_path / "lm" / "deescalate" / "summary.json") as f:
        assert json.load(f)["train_loss"] > 0


def test_an_unknown_model_family_is_one_line_naming_the_families(tmp_path, capsys):
    assert cli.main(["train", "vit", "--model", "vits", "--dataset", "digits", "--out", str(tmp_path)]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line == "keras-tse train vit: error: --model: received vits; expected an image model family: vit"


def test_a_broken_entry_point_is_left_out_with_a_warning_naming_it(tmp_path, monkeypatch):
    from keras_tse.data import registry

    monkeypatch.syspath_prepend(str(_plugin_package(tmp_path, name="broken_plugin", value="MISSING")))
    with pytest.warns(UserWarning, match="entry point 'plugin_stripes' = 'broken_plugin:MISSING' .* is left out"):
        names = registry.list_datasets()
    assert "plugin_stripes" not in names and "cifar10" in names
