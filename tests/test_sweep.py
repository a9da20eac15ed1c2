"""`keras-tse sweep`: the grid, the per-cell measures, and a resume that skips finished cells."""

import os
import signal
import subprocess
import sys
import time

import keras
import numpy as np
import pytest

from recipes.lab import sweep

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py

BACKEND = keras.backend.backend()
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_grid_varies_tau_for_deescalation_only_and_runs_seed_by_seed(tmp_path):
    config = sweep.SweepConfig(
        depths=(6, 12),
        norms=("post", "deescalate"),
        taus=(0.5, 1.0),
        initializers=("torch",),
        learning_rates=(1e-3, 3e-4),
        seeds=(0, 1, 2),
    )
    study = sweep.study_of(config, str(tmp_path))
    cells = study.pending(study.arms())
    # post: 2 depths x 2 lrs x 3 seeds = 12; deescalate: x 2 taus = 24
    assert len(cells) == 36 and len(set(cells)) == 36
    assert [seed for _, _, seed in cells] == [0] * 12 + [1] * 12 + [2] * 12  # a partial sweep holds whole grids
    arms = list(sweep.arm_cells(config))
    assert {c["tau"] for c in arms if c["norm"] == "post"} == {""}
    assert {c["tau"] for c in arms if c["norm"] == "deescalate"} == {0.5, 1.0}
    both = sweep.SweepConfig(depths=(6,), norms=("post",), initializers=("torch", "glorot"))
    names = [sweep.arm_name(c) for c in sweep.arm_cells(both)]
    assert names == ["depth6_post_torch_steps300_batch64_hidden32", "depth6_post_glorot_steps300_batch64_hidden32"]


def test_a_committed_row_names_the_arm_its_cell_had():
    """The committed study's rows (no `arm` column) are read as the arms the engine schedules: its grid
    has nothing left to run."""
    rows = sweep.read_rows(os.path.join(ROOT, "zoo", "depth_study", "sweep.csv"))
    config = sweep.SweepConfig(depths=(12,), norms=("post", "deescalate"), taus=(1.0,), seeds=(0, 1, 2))
    study = sweep.study_of(config, os.path.join(ROOT, "zoo", "depth_study"))
    assert {sweep.arm_name(row) for row in rows} >= set(study.arms())
    assert study.pending(study.arms()) == []


def test_committed_study_grid_meets_the_issue():
    config = sweep.SweepConfig()  # the depth study: depths x {post, pre, deescalate tau 1 and one more} x inits x lrs
    assert set(config.depths) >= {12, 24, 48} and set(config.norms) >= {"post", "pre", "deescalate"}
    assert 1.0 in config.taus and len(config.taus) >= 2
    assert set(config.initializers) >= {"torch", "glorot"}
    assert set(config.learning_rates) >= {1e-3, 3e-4, 1e-4} and len(config.seeds) >= 3


def test_batch_losses_are_recovered_from_running_means():
    recorder = sweep._BatchLosses()
    losses = [2.0, 1.0, 4.0, 0.5]
    for i in range(len(losses)):
        recorder.on_train_batch_end(i, {"loss": np.mean(losses[: i + 1])})
    np.testing.assert_allclose(recorder.losses, losses, atol=1e-12)


def test_steps_to_threshold_and_best_window():
    losses = np.array([3.0] * 10 + [0.0] * 10)  # 10-step means: 3.0, 2.7, ..., 0.3 (step 18), ..., 0
    assert sweep._steps_to(losses, 0.5) == 19  # first window mean <= 0.5 is 0.3, over steps 9..18 (1-based 19)
    assert sweep._steps_to(losses, -1.0) == ""
    assert sweep._best_window(losses) == 0.0


def test_markdown_table_reports_mean_std_and_range_over_seeds():
    cell = dict(norm="post", depth="6", learning_rate="0.001", tau="", initializer="torch")
    rows = [dict(cell, final_loss=str(v), val_accuracy="0.5", diverged="0") for v in (1.0, 2.0, 3.0)]
    rows.append(dict(cell, final_loss="nan", val_accuracy="nan", diverged="1"))
    table = sweep.markdown_table(rows)
    assert "| post | torch | 6 | 0.001 | 2.000 ± 0.816 (1.000-3.000) | 0.500 ± 0.000 | 4 | 1 |" in table


def _row(norm, tau, init, loss, depth=24, learning_rate=0.001):
    """A sweep.csv row as read back (every value a string), one seed of one cell."""
    fields = dict(depth=depth, learning_rate=learning_rate, final_loss=loss, val_accuracy=0.5, diverged=0)
    return dict(norm=norm, tau=tau, initializer=init, **{k: str(v) for k, v in fields.items()})


def test_best_lr_table_and_verdicts():
    def row(norm, tau, init, lr, loss):
        return _row(norm, tau, init, loss, depth=24, learning_rate=lr)

    rows = [
        row("post", "", "torch", 1e-3, 2.3),
        row("post", "", "torch", 1e-4, 1.5),
        row("deescalate", "1.0", "torch", 1e-3, 0.2),
        row("deescalate", "1.0", "torch", 1e-4, 0.4),
        row("post", "", "glorot", 1e-3, 2.3),
        row("deescalate", "1.0", "glorot", 1e-3, 2.2),
    ]
    best = sweep.best_over_learning_rates(rows)
    assert best[("post", "", "torch", 24)] == (1.5, 1e-4, 1) and best[("deescalate", "1.0", "torch", 24)][:2] == (
        0.2,
        1e-3,
    )
    table = sweep.best_lr_table(rows)
    assert "| torch | 24 | 1.500 (0.0001, n=1) | not run | 0.200 (0.001, n=1) | not run |" in table
    lines = sweep.verdicts(rows).splitlines()
    assert lines[0].startswith(
        "- depth 24, torch init: de-escalation's mean reaches the threshold where post-norm's does not (tau 1)"
    )
    assert lines[1].startswith(
        "- depth 24, glorot init: neither post-norm's nor de-escalation's mean reaches the threshold"
    )
    assert "Post 1.500 at lr 0.0001 (n=1); tau 1 0.200 at lr 0.001 (n=1)." in lines[0]


def test_arms_are_named_and_ordered_post_then_larger_tau_first_then_torch_before_glorot():
    def row(norm, tau, depth, loss, init="glorot"):
        return _row(norm, tau, init, loss, depth=depth)

    rows = [
        row("deescalate", "0.25", 6, 0.3),
        row("deescalate", "1.0", 12, 0.2),
        row("post", "", 12, 0.4),
        row("deescalate", "1.0", 6, 0.1),
        row("deepnorm", "", 6, 0.5),
        row("post", "", 12, 0.3, "torch"),
    ]
    assert sweep.arms_of(rows) == [
        ("post", "", "torch"),
        ("post", "", "glorot"),
        ("deescalate", "1.0", "glorot"),
        ("deescalate", "0.25", "glorot"),
        ("deepnorm", "", "glorot"),
    ]
    lines = sweep.markdown_table(rows).splitlines()[2:]
    names = [" ".join(cell.strip() for cell in line.strip("|").split("|")[:3]) for line in lines]
    assert names == [
        "post torch 12",
        "post glorot 12",
        "deescalate (tau 1) glorot 6",
        "deescalate (tau 1) glorot 12",
        "deescalate (tau 0.25) glorot 6",
        "deepnorm glorot 6",
    ]


def test_bad_grid_names_the_value():
    with pytest.raises(ValueError, match=r"Received: norms=\('post', 'layernorm'\)"):
        sweep.SweepConfig(norms=("post", "layernorm"))
    with pytest.raises(ValueError, match=r"Received: taus=\(1.5,\)"):
        sweep.SweepConfig(taus=(1.5,))


@pytest.mark.every_backend
@pytest.mark.parametrize("norm", ["deescalate", "rezero"])
def test_one_cell_measures_every_column_on_this_backend(norm, tmp_path):
    config = sweep.SweepConfig.quick(steps=4, depths=(2,), norms=(norm,))
    (cell,) = sweep.cells(config)
    assert (cell["tau"], cell["seed"], cell["batch_size"]) == (1.0 if norm == "deescalate" else "", 0, 32)
    row = sweep.run_cell(cell, config, sweep._images("digits"), str(tmp_path / "cell"))
    assert row["diverged"] == 0 and np.isfinite(row["final_loss"]) and row["best_loss"] <= row["final_loss"] + 1.0
    tsim_init = [float(v) for v in row["tsim_init"].split(";")]
    grads = [float(v) for v in row["grad_init"].split(";")]
    assert len(tsim_init) == len(grads) == 2 and all(0.0 <= t <= 1.0 for t in tsim_init)
    if norm == "rezero":  # a = 0: the blocks are the identity, so no gradient reaches their FFN/attention
        assert tsim_init[0] == pytest.approx(tsim_init[1])  # ... and the tokens pass through unchanged
    else:
        assert all(g > 0 for g in grads)


@pytest.mark.large
def test_killed_sweep_resumes_without_recomputing_finished_cells(tmp_path):
    out = tmp_path / "sweep"
    command = [sys.executable, "-m", "keras_tse.cli.main", "sweep", "--quick", "--out", str(out)]
    env = {**os.environ, "KERAS_BACKEND": BACKEND, "TF_CPP_MIN_LOG_LEVEL": "3"}
    process = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    csv_path = out / "sweep.csv"
    deadline = time.time() + 300
    while time.time() < deadline and len(sweep.read_rows(str(csv_path))) < 2 and process.poll() is None:
        time.sleep(0.2)
    process.send_signal(signal.SIGKILL)
    process.wait()
    before = sweep.read_rows(str(csv_path))
    config = sweep.SweepConfig.quick()
    total = len(list(sweep.arm_cells(config))) * len(config.learning_rates) * len(config.seeds)
    assert 2 <= len(before) < total, f"kill it mid-way: {len(before)} of {total} cells were done"

    rerun = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    assert rerun.returncode == 0, rerun.stderr[-3000:]
    assert f"{total} cells, skipping {len(before)} finished, {total - len(before)} to run" in rerun.stdout
    after = sweep.read_rows(str(csv_path))
    keys = {tuple(row[k] for k in sweep.KEY) for row in after}
    assert len(after) == total and len(keys) == total
    assert after[: len(before)] == before  # the finished rows, wall times included, were not recomputed
    for row in after:
        assert len(row["tsim_init"].split(";")) == int(row["depth"]) == len(row["grad_init"].split(";"))
        if not int(row["diverged"]):
            assert np.isfinite(float(row["final_loss"])) and 0.0 <= float(row["val_accuracy"]) <= 1.0
    assert (out / "plots" / "final_loss_vs_depth.png").exists() and (out / "plots" / "heatmap.png").exists()
