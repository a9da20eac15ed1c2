"""The data registry: a data set registered from one spec trains in the ViT recipe and the sweep, and
`keras-tse datasets` lists it."""

import csv
import json

import keras
import numpy as np
import pytest

from keras_tse import data
from keras_tse.experiments import cli
from tests.helpers import run_recipe_here


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
    assert summary["best_test_accuracy"] > 0.6  # chance is 1/3: it learned the stripes
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
