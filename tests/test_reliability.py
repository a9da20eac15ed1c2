"""Bad input and faults: each gets a clear error naming the value, or is recovered."""

import json
import os
import re
import subprocess
import sys
import warnings

import keras
import numpy as np
import pytest

from keras_tse import data, zoo
from keras_tse.callbacks import TokenSimilarityMetric
from keras_tse.layers import DeEscalation, PostNormBlock
from keras_tse.training import TrainConfig, fit_variant, read_history
from recipes.lab import sweep
from tests.helpers import recipe_module, run_recipe_here, tiny_vit

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# --- 2: zero is an error, not "the default" -----------------------------------------------------------


@pytest.mark.parametrize(
    "recipe, argv, flag",
    [
        ("cifar10_vit", ["--epochs", "0"], "--epochs"),
        ("cifar10_vit", ["--train-size", "-5"], "--train-size"),
        ("cifar10_vit", ["--learning-rate", "0"], "--learning-rate"),
        ("wikitext103_txl", ["--steps", "0"], "--steps"),
        ("wikitext103_txl", ["--depth", "0"], "--depth"),
    ],
)
def test_recipe_flags_refuse_zero_and_negatives_naming_the_flag(recipe, argv, flag, capsys):
    with pytest.raises(SystemExit) as exit_info:
        recipe_module(recipe).parse_args(argv)
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and f"error: {flag}: received {argv[1]!r}; expected" in err


@pytest.mark.parametrize(
    "argv, expected",
    [
        (
            ["probe", "missing.keras", "--batch-size", "-3"],
            "--batch-size: received '-3'; expected a positive integer",
        ),
        (["sweep", "--depths", "12,0"], "--depths: received '0'; expected a positive integer up to 1000"),
        (["demo", "--seeds", "0,x"], "--seeds: received 'x'; expected an integer >= 0"),
        (["escalation", "--tau", "2"], "--tau: received '2'; expected a number in [0, 1]"),
    ],
)
def test_cli_flag_errors_are_one_line_and_exit_2(argv, expected, capsys):
    from keras_tse.cli import main as cli

    with pytest.raises(SystemExit) as exit_info:
        cli.main(argv)
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.strip().splitlines() == [f"keras-tse {argv[0]}: error: {expected}"]


def test_cli_probe_of_a_damaged_file_is_one_line_naming_it(tmp_path):
    model = tiny_vit(depth=1, patch_size=4, hidden_dim=8, ffn_dim=16)
    good = tmp_path / "good.keras"
    model.save(good)
    damaged = tmp_path / "damaged.keras"
    damaged.write_bytes(good.read_bytes()[: good.stat().st_size // 2])
    result = subprocess.run(
        [sys.executable, "-m", "keras_tse.cli.main", "probe", str(damaged)],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "TF_CPP_MIN_LOG_LEVEL": "3"},
    )
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.startswith("keras-tse")]
    assert len(lines) == 1 and str(damaged) in lines[0] and "Traceback" not in result.stderr


# --- 3: a sweep row cut short is recomputed; a foreign CSV is named ---------------------------------------


def test_truncated_sweep_row_is_reported_and_recomputed(tmp_path, capsys):
    config = sweep.SweepConfig.quick(depths=(2,), norms=("post",))
    out = str(tmp_path)
    first = sweep.run_sweep(config, out, log=lambda line: None)
    path = os.path.join(out, "sweep.csv")
    with open(path) as f:
        text = f.read()
    with open(path, "w") as f:
        f.write(text[:-25])  # a kill in the middle of the row
    lines = []
    capsys.readouterr()
    again = sweep.run_sweep(config, out, log=lines.append)
    assert capsys.readouterr().out.startswith(f"{path}: line(s) [2] cut short by a kill; their cells run again")
    assert lines[0].startswith("1 cells, skipping 0 finished, 1 to run")
    assert len(again) == 1 and again[0]["final_loss"] == first[0]["final_loss"]  # the same cell, recomputed
    sweep.group_stats(again)


def test_a_csv_that_is_not_a_sweep_is_named(tmp_path):
    path = tmp_path / "sweep.csv"
    path.write_text("name,score\nx,1\n")
    with pytest.raises(ValueError, match=rf"{path} is not this study's result file.*lacks \['depth'"):
        sweep.run_sweep(sweep.SweepConfig.quick(), str(tmp_path))


def test_a_row_of_other_columns_is_refused_not_appended_under_the_files_header(tmp_path):
    from keras_tse.run_files import append_row, read_logged_rows

    path = tmp_path / "results.csv"
    append_row(str(path), {"arm": "post", "loss": 1.5})
    before = path.read_text()
    with pytest.raises(ValueError, match=r"received a row of columns \['arm', 'loss', 'tau'\]; expected the file's"):
        append_row(str(path), {"arm": "pre", "loss": 0.5, "tau": 1})
    with pytest.raises(ValueError, match="expected the file's columns"):
        append_row(str(path), {"loss": 0.5, "arm": "pre"})  # the same names in another order
    assert path.read_text() == before
    append_row(str(path), {"arm": "pre", "loss": 0.5})
    assert [row for _, row in read_logged_rows(str(path))[1]] == [
        {"arm": "post", "loss": "1.5"},
        {"arm": "pre", "loss": "0.5"},
    ]


def test_a_last_row_cut_mid_number_is_cut_even_with_every_field_there(tmp_path):
    """A kill inside the last row's write can leave every field there but the row unfinished ("0.5" cut to
    "0."): without its newline the row is cut, and its cell runs again; a whole last row is read."""
    from keras_tse.run_files import read_logged_rows

    path = tmp_path / "results.csv"
    path.write_text("arm,loss\npost,1.5\npre,0.")
    fields, whole, cut = read_logged_rows(str(path))
    assert fields == ["arm", "loss"] and [row for _, row in whole] == [{"arm": "post", "loss": "1.5"}] and cut == [3]
    path.write_text("arm,loss\npost,1.5\npre,0.5\n")
    assert len(read_logged_rows(str(path))[1]) == 2 and read_logged_rows(str(path))[2] == []


# --- 4: token ids are checked before they reach Transformer-XL --------------------------------------------

TINY_XL = dict(depth=1, vocab_size=50, hidden_dim=16, num_heads=2, head_dim=8, ffn_dim=16, cutoffs=(), batch_size=2,
               segment_len=4, mem_len=4)  # fmt: skip


@pytest.mark.every_backend
@pytest.mark.parametrize(
    "x_change, y_change, message",
    [
        (None, (0, 1, -3), r"`y` holds token id -3 at position \(0, 1\); ids must be in \[0, vocab_size=50\)"),
        (None, (1, 3, 50), r"`y` holds token id 50 at position \(1, 3\)"),
        ((1, 0, 77), None, r"`x` holds token id 77 at position \(1, 0\)"),
        ("float", None, r"`x` must hold integer token ids. Received: dtype float32, 1.5 at position \(0, 0\)"),
        ("long", None, r"`x` must be \[batch, segment_len=4\] token ids.*Received: x.shape=\(2, 5\)"),
    ],
)
def test_transformer_xl_refuses_bad_token_ids_naming_value_and_position(x_change, y_change, message):
    model = zoo.transformer_xl(**TINY_XL)
    model.compile("adam", loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    x = np.zeros((2, 4), "int32")
    y = np.ones((2, 4), "int32")
    if x_change == "float":
        x = x.astype("float32")
        x[0, 0] = 1.5
    elif x_change == "long":
        x = np.zeros((2, 5), "int32")
    elif x_change is not None:
        x[x_change[:2]] = x_change[2]
    if y_change is not None:
        y[y_change[:2]] = y_change[2]
    with pytest.raises(ValueError, match=message):
        model.fit(x, y, batch_size=2, epochs=1, verbose=0) if y_change or x_change != "long" else model.predict(x)
    model.fit(np.zeros((2, 4), "int32"), y if y_change is None else np.ones((2, 4), "int32"), batch_size=2, verbose=0)


# --- 5: a NaN stops the run, says where, and keeps the last good checkpoint ------------------------------


class _NanPixelFromSecondEpoch(keras.utils.PyDataset):
    """Two batches per epoch; from the second epoch on, the first image of each batch has a NaN pixel."""

    def __init__(self, x, y):
        super().__init__()
        self.x, self.y, self.poisoned = x, y, False

    def __len__(self):
        return 2

    def __getitem__(self, index):
        x = self.x[index * 8 : (index + 1) * 8].copy()
        if self.poisoned:
            x[0, 0, 0, 0] = np.nan
        return x, self.y[index * 8 : (index + 1) * 8]


@pytest.mark.every_backend
def test_a_nan_input_stops_the_run_and_keeps_the_last_finite_checkpoint(tmp_path, capsys):
    rng = np.random.default_rng(0)
    x, y = rng.standard_normal((16, 8, 8, 1)).astype("float32"), rng.integers(0, 10, 16)
    model = tiny_vit(depth=1, patch_size=4, hidden_dim=8, ffn_dim=16)
    train = _NanPixelFromSecondEpoch(x, y)
    model.fit = _poison_after_first_epoch(model.fit, train)
    run = tmp_path / "run"
    summary = fit_variant(model, train, (x, y), str(run), TrainConfig(epochs=4, batch_size=8), x[:4], 2)
    assert summary["stopped"] == json.loads((run / "stopped.json").read_text())
    assert summary["stopped"]["epoch"] == 1 and summary["stopped"]["batch"] == 0
    assert "Stopped: the training loss is nan at epoch 1, batch 0" in capsys.readouterr().out
    last = keras.saving.load_model(run / "checkpoints" / "last.keras")
    assert all(np.all(np.isfinite(keras.ops.convert_to_numpy(w))) for w in last.weights)


@pytest.mark.one_backend  # the command's edge; the stop itself is checked on every backend above
def test_a_command_whose_loss_becomes_non_finite_exits_3_and_reports_no_finished_numbers(tmp_path, capsys):
    """A rate so large the loss overflows: the run stops, the command says where in one line and exits 3
    (not 0, not a bad input's 2), the summary holds no accuracy or loss of a finished run; the same command
    again finds the folder as it was left and says so again."""
    from keras_tse.cli import main as cli

    argv = ["train", "--dataset", "digits", "--depth", "1", "--hidden-dim", "16", "--num-heads", "2", "--epochs", "2"]
    argv += ["--learning-rate", "1e30", "--norm", "post", "--verbose", "0", "--out", str(tmp_path / "run")]
    for _ in range(2):
        assert cli.main(argv) == 3
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("keras-tse train vit: error: post stopped: the training loss is")
        assert err[0].endswith("(after 0 finished epoch(s); no checkpoint)"), err[0]  # stopped in the first epoch
    assert not (tmp_path / "run" / "post" / "checkpoints" / "last.keras").exists()
    summary = json.loads((tmp_path / "run" / "post" / "summary.json").read_text())
    assert summary["stopped"]["reason"] == "non-finite training loss" and summary["epochs"] == 0
    assert not {"train_loss", "test_loss", "test_accuracy", "best_test_accuracy"} & set(summary)


def _poison_after_first_epoch(fit, dataset):
    def poisoned_fit(*args, callbacks=(), **kwargs):
        flip = keras.callbacks.LambdaCallback(on_epoch_end=lambda epoch, logs: setattr(dataset, "poisoned", True))
        return fit(*args, callbacks=[*callbacks, flip], **kwargs)

    return poisoned_fit


# --- 6: NumPy scalars are numbers -----------------------------------------------------------------------


def test_numpy_scalars_are_accepted_and_configs_stay_json():
    layer = DeEscalation(tau=np.float32(0.5))
    block = PostNormBlock(np.int64(4), np.int64(8), dropout=np.float64(0.1))
    assert layer.tau == 0.5 and block.num_heads == 4 and block.ffn_dim == 8
    json.dumps(layer.get_config()), json.dumps(block.get_config())
    assert type(block.get_config()["num_heads"]) is int
    assert TrainConfig(epochs=np.int64(2)).epochs == 2
    with pytest.raises(ValueError, match="num_heads.*Received: num_heads=True"):
        PostNormBlock(True, 8)


# --- 7: the smaller ones ---------------------------------------------------------------------------------


def test_zero_heads_and_zero_batch_name_the_argument():
    with pytest.raises(ValueError, match="`num_heads` must be a positive integer. Received: num_heads=0"):
        zoo.vit(depth=1, num_heads=0)
    with pytest.raises(ValueError, match="`batch_size` must be a positive integer. Received: batch_size=0"):
        data.lm_segments(np.arange(100), 0, 5)


def test_similarity_probe_of_the_wrong_shape_fails_before_training():
    model = tiny_vit(depth=1, patch_size=4, hidden_dim=8, ffn_dim=16)
    model.compile("adam", keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    metric = TokenSimilarityMetric(np.zeros((4, 32, 32, 3), "float32"))
    with pytest.raises(ValueError, match=r"probe does not fit the model.*\[batch, \*\(8, 8, 1\)\].*\(4, 32, 32, 3\)"):
        model.fit(np.zeros((8, 8, 8, 1), "float32"), np.zeros(8), epochs=1, verbose=0, callbacks=[metric])


def test_a_damaged_wikitext_id_cache_is_named_and_rebuilt(tmp_path):
    from keras_tse.data import wikitext

    folder = tmp_path / "wikitext-103"
    folder.mkdir()
    for split in wikitext.SPLITS:
        (folder / f"wiki.{split}.tokens").write_text(" = Title = \n the cat sat \n")
    ids, vocab = data.load_wikitext103(str(tmp_path), download=False)
    ids = {split: np.array(split_ids) for split, split_ids in ids.items()}  # read before the file is damaged
    damaged = folder / wikitext.CACHE.format(split="valid")
    damaged.write_bytes(b"not a token file")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        again, _ = data.load_wikitext103(str(tmp_path), download=False)
    assert any(str(damaged) in str(w.message) and "rebuilding" in str(w.message) for w in caught)
    assert all(np.array_equal(again[s], ids[s]) for s in wikitext.SPLITS)
    assert np.load(damaged).shape == ids["valid"].shape  # rewritten whole


def test_a_cifar_archive_with_the_wrong_checksum_stops_the_recipe_in_one_line(tmp_path, capsys):
    (tmp_path / "cifar-10-python.tar.gz").write_bytes(b"not the archive")
    argv = ["--data-dir", str(tmp_path), "--no-download", "--out", str(tmp_path / "runs")]
    code, _, err = run_recipe_here("cifar10_vit", argv, capsys)
    assert code == 2 and len(err.splitlines()) == 1
    assert re.search(r"^cifar10_vit: error: .*cifar-10-python.tar.gz is corrupt.*MD5.*expected c58f3010", err)


def test_resume_trims_the_rows_of_a_repeated_epoch_and_a_cut_line(tmp_path):
    """Transformer-XL's steps.csv after a mid-epoch kill: the epoch is run again, its old rows must go."""
    from keras_tse.callbacks.run_backup import trim_epochs

    path = tmp_path / "steps.csv"
    path.write_text("step,loss,epoch\n10,5.0,0\n20,4.0,0\n30,3.5,1\n40,3.")  # killed in epoch 1, mid-line
    with pytest.warns(UserWarning, match="last line is incomplete"):
        trim_epochs(str(path), keep_below=1)  # the backup holds epoch 0: epoch 1 runs again
    assert path.read_text().splitlines() == ["step,loss,epoch", "10,5.0,0", "20,4.0,0"]
    untouched = tmp_path / "other.csv"
    untouched.write_text("step,loss\n10,5.0\n")
    trim_epochs(str(untouched), keep_below=0)
    assert untouched.read_text() == "step,loss\n10,5.0\n"


def test_backups_another_model_left_are_set_aside_so_the_runs_own_are_kept(tmp_path):
    """Backups of epochs 2 and 3 that this model cannot read (another model's weights, a file cut short):
    each is reported in one line and set aside, the run starts over, and the backup of its first epoch
    survives (counted with the unreadable ones, it was the third newest and deleted as written)."""
    from keras_tse.callbacks import RunBackup

    def model(width):
        keras.utils.set_random_seed(0)
        net = keras.Sequential([keras.Input((3,)), keras.layers.Dense(width)])
        net.compile("sgd", "mse")
        return net

    folder = tmp_path / "backup"
    folder.mkdir()
    model(5).save_weights(str(folder / "epoch_00002.weights.h5"))
    (folder / "epoch_00003.weights.h5").write_bytes(b"\x89HDF\r\n cut short")
    lines, x = [], np.ones((4, 3), "float32")
    backup = RunBackup(str(folder), str(tmp_path), log=lines.append)
    trained = model(2)
    trained.fit(x, np.zeros((4, 2)), epochs=1, verbose=0, callbacks=[backup, backup.saver()])
    assert len(lines) == 3 and all("\n" not in line and len(line) < 700 for line in lines)
    assert "epoch_00002.weights.h5 cannot be read" in lines[1] and "set aside" in lines[1]
    assert sorted(os.listdir(folder)) == [
        "epoch_00001.weights.h5", "epoch_00002.weights.h5.unreadable", "epoch_00003.weights.h5.unreadable"
    ]  # fmt: skip
    again, fresh = RunBackup(str(folder), str(tmp_path), log=lines.append), model(2)
    again.set_model(fresh)
    again.on_train_begin()
    assert again.restored_epoch == 1 and lines[-1].startswith("RunBackup: resuming after epoch 1")
    np.testing.assert_array_equal(fresh.get_weights()[0], trained.get_weights()[0])


def test_a_run_that_starts_over_keeps_its_own_best_model_not_the_abandoned_attempts(tmp_path):
    """An unfinished run whose backup cannot be read starts over: the rows of the attempt it abandons are
    cut before "best" is judged, so its own first epoch is written as `best.keras` (judged against the
    abandoned rows' validation loss, 0.0 here, no epoch of the new run would ever be)."""
    from keras_tse.data import image_dataset

    x = np.random.default_rng(0).standard_normal((16, 8, 8, 1)).astype("float32")
    data = image_dataset(x, (np.arange(16) % 10).astype("int32"), 8)
    run = tmp_path / "run"

    def train():
        model = tiny_vit(depth=1, patch_size=4, hidden_dim=8, ffn_dim=8, name="tiny")
        return fit_variant(model, data, data, str(run), TrainConfig(epochs=2, batch_size=8), x[:4], 2, verbose=0)

    train()
    (run / "summary.json").unlink()  # as if killed in its last epoch, after its first epoch's backup
    (run / "backup").mkdir()
    (run / "backup" / "epoch_00001.weights.h5").write_bytes(b"cut short")
    history = (run / "history.csv").read_text().splitlines()
    column = history[0].split(",").index("val_loss")
    rows = [",".join("0.0" if i == column else v for i, v in enumerate(r.split(","))) for r in history[1:]]
    (run / "history.csv").write_text("\n".join([history[0], *rows]) + "\n")
    (run / "checkpoints" / "best.keras").unlink()
    summary = train()
    assert summary["epochs"] == 2 and (run / "checkpoints" / "best.keras").exists()
    assert min(read_history(str(run / "history.csv"))["val_loss"]) > 0.0  # the abandoned rows are gone


def test_a_resumed_runs_best_so_far_is_the_lowest_finite_validation_loss_of_the_rows_it_resumes_after(tmp_path):
    from keras_tse.callbacks import RunCheckpoints

    history = tmp_path / "history.csv"
    history.write_text("epoch,loss,val_loss\n0,2.0,nan\n1,1.5,0.7\n2,1.4,0.9\n")
    checkpoints = RunCheckpoints(best_path=str(tmp_path / "best.keras"), history_path=str(history))
    checkpoints.on_train_begin()
    assert checkpoints.best == 0.7  # a NaN first would leave min() at NaN: no epoch could ever be "best"
    history.write_text("epoch,loss,val_loss\n")
    checkpoints.on_train_begin()
    assert checkpoints.best == float("inf")


def test_a_run_killed_in_its_first_epoch_keeps_no_train_begin_row_to_repeat(tmp_path):
    """Nothing restored: the run starts over and measures its start again, so the old row goes; with an
    epoch restored, the start of the run is kept (it is the card's "start")."""
    from keras_tse.callbacks.run_backup import trim_epochs

    header = "epoch,step,when,tsim_0\n"
    path = tmp_path / "similarity.csv"
    path.write_text(header + ",0,train_begin,0.5\n")
    trim_epochs(str(path), keep_below=0)
    assert path.read_text() == header
    path.write_text(header + ",0,train_begin,0.5\n0,10,epoch_end,0.6\n1,20,epoch_end,0.7\n")
    trim_epochs(str(path), keep_below=1)
    assert path.read_text() == header + ",0,train_begin,0.5\n0,10,epoch_end,0.6\n"


@pytest.mark.one_backend
def test_out_naming_a_file_stops_in_one_line_before_any_work(tmp_path, capsys):
    vit = recipe_module("cifar10_vit")
    path = tmp_path / "notes.txt"
    path.write_text("mine")
    with pytest.raises(SystemExit) as stop:
        vit.parse_args(["--smoke", "--out", str(path)])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and err.count("\n") == 1
    assert f"error: --out: received {path}, a file; expected a folder (it holds one run folder per variant)" in err
    assert path.read_text() == "mine"


@pytest.mark.one_backend
def test_a_run_folder_without_its_config_is_refused_not_overwritten(tmp_path):
    from keras_tse.training.runner import RunFolderMismatch, check_run_folder

    run = tmp_path / "deescalate"
    (run / "checkpoints").mkdir(parents=True)
    (run / "history.csv").write_text("epoch,loss\n0,1.5\n")
    with pytest.raises(
        RunFolderMismatch,
        match=r"received a folder holding a run's files \(checkpoints, history.csv\) but no config.json",
    ):
        check_run_folder(str(run), {"model": "vit"})
    assert (run / "history.csv").read_text() == "epoch,loss\n0,1.5\n"
    assert check_run_folder(str(tmp_path / "empty"), {"model": "vit"}) == "new"


@pytest.mark.one_backend
def test_a_finished_run_asked_for_more_epochs_says_how_to_go_on(tmp_path):
    """More epochs of a finished run: one line saying why its folder cannot continue (the schedule was laid
    over the epochs it ran) and the two ways on; an unfinished run with other epochs is the plain mismatch."""
    from keras_tse.training.runner import RunFolderMismatch, check_run_folder

    run = tmp_path / "deescalate"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"model": "vit", "train": {"epochs": 3, "schedule": "cosine"}}))
    longer = {"model": "vit", "train": {"epochs": 5, "schedule": "cosine"}}
    with pytest.raises(RunFolderMismatch, match=r"expected 3, the setting of the run it holds"):
        check_run_folder(str(run), longer)
    (run / "summary.json").write_text("{}")
    with pytest.raises(RunFolderMismatch) as raised:
        check_run_folder(str(run), longer)
    said = str(raised.value)
    assert "a finished run of 3 epochs, and its cosine learning-rate schedule was laid over those 3" in said
    assert said.endswith(f"keras.saving.load_model({str(run / 'checkpoints' / 'last.keras')!r})")
    assert "\n" not in said
    assert check_run_folder(str(run), {"model": "vit", "train": {"epochs": 3, "schedule": "cosine"}}) == "finished"


def test_a_write_stopped_before_its_rename_leaves_the_old_file_whole(tmp_path, monkeypatch):
    """Every run file goes through a temporary sibling, then a rename: a write stopped before the rename
    (a kill, here an error in `os.replace`) leaves the previous file as it was and no temporary behind. A
    direct write would have truncated it."""
    from keras_tse import run_files

    path = tmp_path / "summary.json"
    run_files.write_json(str(path), {"epochs": 3})
    before = path.read_text()

    def killed(source, target):
        raise KeyboardInterrupt

    monkeypatch.setattr(run_files.os, "replace", killed)
    with pytest.raises(KeyboardInterrupt):
        run_files.write_json(str(path), {"epochs": 4, "and": "much more"})
    assert path.read_text() == before and os.listdir(tmp_path) == ["summary.json"]


def test_a_dict_probe_that_does_not_fit_a_kerashub_model_names_the_input():
    """A KerasHub model takes a dict: the metric checks each input the probe feeds by name."""
    keras_hub = pytest.importorskip("keras_hub")
    bert = keras_hub.models.BertBackbone(
        vocabulary_size=20, num_layers=1, num_heads=1, hidden_dim=4, intermediate_dim=8, max_sequence_length=8
    )
    probe = {"token_ids": np.ones((2, 8), "int32"), "segment_ids": np.zeros((2, 8), "int32"),
             "padding_mask": np.ones((2, 8, 1), "int32")}  # fmt: skip
    metric = TokenSimilarityMetric(probe)
    metric.set_model(bert)
    with pytest.raises(ValueError, match=r"inputs\['padding_mask'\] \[batch, \*\(None,\)\]. .*\(2, 8, 1\)"):
        metric._start()
