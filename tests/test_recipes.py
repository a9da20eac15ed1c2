"""The CIFAR-10 recipe end to end on local synthetic data, and its resume after a hard kill."""

import csv
import json
import os
import signal
import subprocess
import sys
import time

import keras
import pytest

import keras_tse
from keras_tse.data import (  # also registers the layers for loading
    cifar10,
    normalized,
    synthetic_cifar10,
)
from tests.helpers import planned, recipe_module, run_recipe_here, smoke_all_variants

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RECIPE = os.path.join(ROOT, "recipes", "cifar10_vit.py")


def _epochs(history_csv):
    with open(history_csv) as f:
        return [int(row["epoch"]) for row in csv.DictReader(f)]


@pytest.mark.large
@pytest.mark.one_backend  # the folder layout of three variants; each backend's training is the tests below
def test_smoke_all_variants_writes_the_run_folder(tmp_path, capsys):
    # one block: this is the run folder of every variant; the depth of the smoke model changes none of it
    for run in smoke_all_variants("cifar10_vit", tmp_path, "test acc", capsys):
        assert _epochs(run / "history.csv") == [0, 1, 2]
        assert not (run / "backup").exists()  # removed once training finished


def _curve_variants(out):
    with open(os.path.join(out, "plots", "loss_curves.csv")) as f:
        return sorted({row["variant"] for row in csv.DictReader(f)})


def test_checkpoint_reloads_and_fit_continues(tmp_path, capsys):
    argv = ["--smoke", "--norm", "deescalate", "--epochs", "1", "--depth", "1", "--out", str(tmp_path)]
    code, _, err = run_recipe_here("cifar10_vit", argv, capsys)
    assert code == 0, err[-3000:]
    model = keras.saving.load_model(str(tmp_path / "deescalate" / "checkpoints" / "last.keras"))
    (x, y), _ = synthetic_cifar10(num_train=64, num_test=1)
    x = normalized(x, cifar10.MEAN, cifar10.STD)
    before = model.evaluate(x, y, verbose=0)[0]
    model.fit(x, y, batch_size=32, epochs=2, verbose=0)  # optimizer state came back with the file
    assert model.evaluate(x, y, verbose=0)[0] < before


@pytest.mark.one_backend  # the plot's CSV and the run folder: each backend's training is the test above
def test_separate_calls_share_one_plot(tmp_path, capsys):
    """The usual cluster way, one job per variant: the second call's plot holds both variants."""
    argv = ["--smoke", "--norm", "deescalate", "--epochs", "1", "--depth", "1", "--out", str(tmp_path)]
    code, _, err = run_recipe_here("cifar10_vit", argv, capsys)
    assert code == 0, err[-3000:]
    assert _curve_variants(tmp_path) == ["deescalate"]
    argv = ["--smoke", "--norm", "post", "--epochs", "1", "--depth", "1", "--out", str(tmp_path)]
    code, out, err = run_recipe_here("cifar10_vit", argv, capsys)
    assert code == 0, err[-3000:]
    assert _curve_variants(tmp_path) == ["deescalate", "post"]
    assert "the curves of post, deescalate" in out


def _other_backend():
    return "torch" if keras.backend.backend() != "torch" else "jax"


@pytest.mark.one_backend  # a checkpoint of each backend loading on the others is test_saving's, on every backend
def test_killed_run_resumes_from_its_last_saved_epoch_on_another_backend(tmp_path, capsys):
    """Killed under one backend, resumed under the current one (the backend does not change
    the model or the data, and every checkpoint loads on any backend); then a finished folder is
    skipped, and one of other settings stops before any data with one line naming the setting."""
    # one block: the kill, the resume and the checks do not depend on depth, and each epoch still writes
    # two checkpoints and a backup, so the poll below sees epoch 2 long before epoch 5
    args = [RECIPE, "--smoke", "--norm", "deescalate", "--epochs", "5", "--depth", "1", "--out", str(tmp_path)]
    history = tmp_path / "deescalate" / "history.csv"
    process = subprocess.Popen(
        [sys.executable, *args],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "KERAS_BACKEND": _other_backend(), "TF_CPP_MIN_LOG_LEVEL": "2"},
    )
    deadline = time.time() + 240
    while time.time() < deadline and process.poll() is None:
        if history.exists() and len(_epochs(history)) >= 2:
            break
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    done_before_kill = _epochs(history)
    assert 2 <= len(done_before_kill) < 5, done_before_kill  # killed mid-way, not before or after

    code, out, err = run_recipe_here("cifar10_vit", args[1:], capsys)  # resumed here, under this test's backend
    assert code == 0, err[-3000:]
    assert f"now {{'backend': '{keras.backend.backend()}'" in out  # and how its step compiles there
    first_epoch_rerun = int(out.split("Epoch ")[1].split("/")[0])
    # "Epoch 3/5": it did not start over; a kill after an epoch's rows but before its backup repeats that epoch
    assert first_epoch_rerun in (len(done_before_kill), len(done_before_kill) + 1)
    assert _epochs(history) == [0, 1, 2, 3, 4]  # each epoch's row once: the repeated epoch's old row was trimmed
    with open(tmp_path / "deescalate" / "similarity.csv") as f:
        rows = list(csv.DictReader(f))
    assert [r["epoch"] for r in rows if r["when"] == "epoch_end"] == ["0", "1", "2", "3", "4"]
    assert [r["when"] for r in rows].count("train_begin") == 2
    with open(tmp_path / "deescalate" / "config.json") as f:
        config = json.load(f)
    assert config["backend"] == _other_backend()
    (resumed,) = config["resumed_with"]  # the backend, and how the step compiles on it where that differs
    assert resumed["backend"] == keras.backend.backend() and set(resumed) <= {"backend", "compiled"}

    code, out, _ = run_recipe_here("cifar10_vit", args[1:], capsys)
    assert code == 0 and "finished, skipping" in out
    code, out, err = run_recipe_here("cifar10_vit", [*args[1:], "--learning-rate", "0.5"], capsys)
    assert code == 2
    assert "Traceback" not in err
    message = err.strip().splitlines()[-1]
    expected = "received train.learning_rate 0.5; expected 0.001, the setting of the run it holds"
    assert message.startswith("cifar10_vit: error: ") and expected in message, message
    assert "===" not in out  # stopped before any data was loaded or model built


@pytest.mark.one_backend
@pytest.mark.parametrize(
    "recipe, archive", [("cifar10_vit", "cifar-10-python.tar.gz"), ("wikitext103_txl", "wikitext-103-v1.zip")]
)
def test_no_data_stops_with_the_file_to_fetch(recipe, archive, tmp_path, capsys):
    argv = ["--data-dir", str(tmp_path), "--no-download", "--norm", "post", "--out", str(tmp_path / "r")]
    code, _, err = run_recipe_here(recipe, argv, capsys)
    assert code != 0
    assert archive in err and str(tmp_path) in err


@pytest.mark.one_backend
@pytest.mark.parametrize(
    "recipe, folder", [("cifar10_vit", "runs/cifar10_vit"), ("wikitext103_txl", "runs/wikitext103_transformer_xl")]
)
def test_a_run_s_default_folder_names_its_data_set_and_family_and_a_smoke_run_has_its_own(recipe, folder):
    module = recipe_module(recipe)
    assert module.parse_args([]).out == folder
    assert module.parse_args(["--smoke"]).out == folder + "_smoke"  # never the real run's folder
    assert module.parse_args(["--smoke", "--out", "mine"]).out == "mine"
    if recipe == "cifar10_vit":  # another data set, another family: another folder (a fine-tuning run's too)
        assert module.parse_args(["--dataset", "digits", "--model", "vit_plugin"]).out == "runs/digits_vit_plugin"
        tuned = module.parse_args(["--dataset", "mnist", "--from-preset", "vit6_fashion_mnist"])
        assert tuned.out == "runs/mnist_vit6_fashion_mnist"  # not the folder of a run from scratch
    else:
        assert module.parse_args(["--dataset", "ptb", "--model", "gpt"]).out == "runs/ptb_gpt"


@pytest.mark.one_backend
def test_verbose_defaults_to_a_line_per_epoch_off_a_terminal():
    module = recipe_module("cifar10_vit")
    assert module.parse_args([]).verbose == 2  # pytest's stdout is not a terminal
    assert module.parse_args(["--verbose", "0"]).verbose == 0


def test_norm_takes_a_list_of_variants_with_the_baselines_at_their_presets(capsys):
    recipe = recipe_module("cifar10_vit")
    assert planned("cifar10_vit", []).settings.norm == ("post", "pre", "deescalate")  # the paper's three
    plan = planned("cifar10_vit", ["--norm", "layerscale,all,deepnorm", "--dataset", "fashion_mnist"])
    assert plan.settings.norm == ("layerscale", "post", "pre", "deescalate", "deepnorm")
    for norm in ("deepnorm", "layerscale"):
        variant = plan.variant(norm)
        preset, overrides, config = variant.preset, variant.overrides, variant.config
        assert preset == f"vit80_cifar10_{norm}" and config.learning_rate == 1e-4
        built = {**keras_tse.zoo.full_config(preset), **overrides}
        assert (built["norm"], built["depth"], built["hidden_dim"], built["initializer"]) == (norm, 80, 192, "torch")
        assert (built["image_size"], built["channels"]) == (28, 1)
    # a layout without a preset of its own: the de-escalated preset with that layout, at lr 1e-4
    variant = planned("cifar10_vit", ["--norm", "rezero"]).variant("rezero")
    preset, overrides, config = variant.preset, variant.overrides, variant.config
    assert (preset, overrides["norm"], config.learning_rate) == ("vit80_cifar10_deescalate", "rezero", 1e-4)
    with pytest.raises(SystemExit) as exit_info:
        recipe.parse_args(["--norm", "post,rmsnorm"])
    err = capsys.readouterr().err.strip()
    assert exit_info.value.code == 2 and len(err.splitlines()) == 1 and "received 'rmsnorm'" in err


def test_scan_flag_builds_the_preset_as_one_loop():
    from keras_tse.layers import ScannedBlocks

    variant = planned("cifar10_vit", ["--smoke", "--scan", "--norm", "deescalate"]).variant("deescalate")
    preset, overrides, settings = variant.preset, variant.overrides, variant.settings
    assert overrides["scan"] is True and settings["overrides"]["scan"] is True  # a run folder of its own
    model = keras_tse.zoo.from_preset(preset, **overrides)
    assert isinstance(model.get_layer("blocks"), ScannedBlocks) and model.get_layer("blocks").depth == 4


# run folders the commands wrote before one trainer took both tasks (keras_tse/cli/train_vit.py and train_lm.py
# of c4686b1, on JAX), trained to the end: their settings, manifest and curves, checkpoints left out
BEFORE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "runs_before_one_trainer")
BEFORE_COMMANDS = {
    "vit": ["train", "vit", "--dataset", "digits", "--depth", "2", "--hidden-dim", "16", "--num-heads", "2",
            "--epochs", "1", "--norm", "deescalate,rezero"],
    "lm": ["train", "lm", "--model", "gpt", "--dataset", "ptb", "--smoke", "--depth", "2", "--steps", "4",
           "--norm", "deescalate"],
}  # fmt: skip


@pytest.mark.one_backend
@pytest.mark.parametrize("task", BEFORE_COMMANDS)
def test_run_folders_written_before_the_one_trainer_are_still_theirs(task, tmp_path, capsys):
    """The command that wrote a folder, given again, finds it finished (every setting compared, none
    differing: the family's presets, the kit's fields and the layout without a preset of its own as
    before), and leaves it as it was; one setting changed is refused, naming it."""
    import shutil

    from keras_tse.cli import main as cli

    out = tmp_path / task
    shutil.copytree(os.path.join(BEFORE, task), out)
    variants = sorted(name for name in os.listdir(out) if os.path.isdir(out / name))
    configs = {name: (out / name / "config.json").read_text() for name in variants}
    code = cli.main([*BEFORE_COMMANDS[task], "--out", str(out), "--verbose", "0"])
    printed = capsys.readouterr()
    assert code == 0, printed.err[-2000:]
    for name in variants:
        assert f"{out / name}: finished, skipping" in printed.out
        assert (out / name / "config.json").read_text() == configs[name]
    assert cli.main([*BEFORE_COMMANDS[task], "--out", str(out), "--seed", "1"]) == 2
    refused = capsys.readouterr().err.strip().splitlines()
    assert len(refused) == 1 and "seed 1" in refused[0]


@pytest.mark.one_backend
def test_the_best_checkpoint_never_sees_the_test_split(tmp_path, capsys):
    """Each epoch is scored on a validation split held out of the training images (10%, each class,
    seeded), which chooses the best checkpoint; the test split is scored once, at the end. Its labels
    replaced by noise leave every epoch's numbers and the chosen checkpoint as they were."""
    import numpy as np

    from keras_tse.cli import main as cli

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 3, 260)
    images = (rng.random((260, 8, 8)) * 80 + labels[:, None, None] * 60).astype("uint8")  # classes apart
    noise = rng.integers(0, 3, 60)
    runs = {}
    for name, y_test in (("true", labels[200:]), ("noise", noise)):
        path = tmp_path / f"{name}.npz"
        np.savez(path, x_train=images[:200], y_train=labels[:200], x_test=images[200:], y_test=y_test)
        out = tmp_path / name
        argv = ["train", "--dataset", "npz", "--data-dir", str(path), "--depth", "1", "--hidden-dim", "16"]
        argv += ["--num-heads", "2", "--patch-size", "4", "--epochs", "3", "--batch-size", "30", "--norm", "pre"]
        assert cli.main([*argv, "--verbose", "0", "--out", str(out)]) == 0, capsys.readouterr().err[-2000:]
        runs[name] = out / "pre"
    true, noisy = (json.loads((runs[name] / "summary.json").read_text()) for name in ("true", "noise"))
    config = json.loads((runs["true"] / "config.json").read_text())
    held = sum(round(0.1 * count) for count in np.unique(labels[:200], return_counts=True)[1])  # each class's 10%
    assert (config["train"]["validation_fraction"], config["train_size"], config["valid_size"]) == (
        0.1,
        200 - held,
        held,
    )
    for key in ("train_loss", "valid_loss", "valid_accuracy", "best_valid_accuracy"):
        assert true[key] == noisy[key], key
    assert true["test_accuracy"] != noisy["test_accuracy"] and "best_test_accuracy" not in true
    assert (runs["true"] / "history.csv").read_text() == (runs["noise"] / "history.csv").read_text()
    best = [keras.saving.load_model(runs[name] / "checkpoints" / "best.keras") for name in ("true", "noise")]
    for a, b in zip(*(model.weights for model in best)):
        assert (keras.ops.convert_to_numpy(a) == keras.ops.convert_to_numpy(b)).all(), a.path
