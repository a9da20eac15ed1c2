"""The GPU plan's dry run on the CPU: `keras_tse.experiments.lab.gpu_plan run --tiny` then `adopt`, as a GPU machine's
session would use them. The plan's commands run in this process; the cells' runs in processes it starts,
under JAX (the bench cell: its own backend), whatever backend hosts the test."""

import csv
import json
import tarfile
import tempfile

import pytest

from keras_tse.run_files import write_csv
from tests.helpers import lab_module

pytestmark = [pytest.mark.one_backend, pytest.mark.starts_processes]  # the group rule: tests/conftest.py


@pytest.fixture
def plan(capsys):
    """`python -m keras_tse.experiments.lab.gpu_plan --zoo ZOO ARGV`, run here: what it printed."""
    module = lab_module("gpu_plan")

    def call(zoo, *argv):
        capsys.readouterr()
        assert module.main(["--zoo", str(zoo), *argv]) == 0
        return capsys.readouterr().out

    call.module = module
    return call


def _cell(work, figure, name):
    with open(work / figure / name / "cell.json") as f:
        return json.load(f)


def test_a_tiny_run_returns_small_files_and_adopting_them_fills_the_cards_tables(tmp_path, plan):
    zoo, out, work = tmp_path / "zoo", tmp_path / "out", tmp_path / "work"
    cells = ("--cells", "fig6_post_s0", "speed_jax_s0")
    printed = plan(zoo, "run", "--tiny", "--out", str(out), "--work", str(work), "--budget-s", "300", *cells)
    assert "left for later calls: nothing" in printed
    assert _cell(work, "fig6", "post_s0")["finished"] == 1 and _cell(work, "speed", "jax_s0")["finished"] == 1
    assert not list(work.rglob("checkpoints")) and not list(work.rglob("*.keras"))  # a call returns small files only
    assert json.loads((work / "machine.json").read_text())["jax"]
    # a GPU machine returns at most 8 files, none deeper than $OUT/a/b/: the cells come back as one archive
    assert [p.name for p in out.iterdir()] == ["cells.tar.gz"]
    assert (out / "cells.tar.gz").stat().st_size < 16 * 2**20

    plan(zoo, "adopt", str(out))
    with open(zoo / "cells.csv") as f:
        rows = {row["cell"]: row for row in csv.DictReader(f)}
    assert set(rows) == {"fig6_post_s0", "speed_jax_s0"}
    assert (rows["fig6_post_s0"]["dtype"], rows["fig6_post_s0"]["backend"]) == ("float32", "jax")
    assert rows["fig6_post_s0"]["device"] and "--norm post --seed 0" in rows["fig6_post_s0"]["command"]
    fig6 = json.loads((zoo / "fig6.json").read_text())
    assert [r["seed"] for r in fig6["runs"]["post"]] == [0]
    block = plan.module.card_block("gpu_fig6", str(zoo))
    assert "| post | 1 |" in block and "1 of the plan's 12 cells" in block
    assert "| jax | vit_post |" in plan.module.card_block("gpu_speed", str(zoo))
    assert plan.module.card_block("gpu_fig7", str(zoo)).startswith("Not measured on a GPU")

    # called again, the adopted cells are not run again; adopting the same folder twice adds nothing
    again = plan(zoo, "run", "--tiny", "--out", str(tmp_path / "again"), "--cells", "fig6_post_s0")
    assert "start " not in again and "left for later calls: nothing" in again
    plan(zoo, "adopt", str(out))
    assert len((zoo / "cells.csv").read_text().splitlines()) == 3


def test_a_cell_starts_only_within_the_budget_and_one_running_past_it_is_stopped_and_kept_unfinished(tmp_path, plan):
    zoo, out = tmp_path / "zoo", tmp_path / "out"
    printed = plan(zoo, "run", "--out", str(out), "--budget-s", "60")  # below every paper-size cell's estimate
    assert "start " not in printed and "left for later calls: fig6_post_s0, fig6_pre_s0" in printed
    work = tmp_path / "work"
    printed = plan(
        zoo, "run", "--tiny", "--out", str(out), "--work", str(work), "--budget-s", "2", "--cells", "fig7_post_s0"
    )
    record = _cell(work, "fig7", "post_s0")
    assert "unfinished fig7_post_s0" in printed and record["stopped_at_budget"] and record["finished"] == 0
    plan(zoo, "adopt", str(out))
    status = {line.split()[0]: line for line in plan(zoo, "status").splitlines()}
    assert "unfinished" in status["fig7_post_s0"] and "not run" in status["fig7_pre_s0"]
    assert not (zoo / "fig7").exists()  # nothing of it in the figure's runs
    assert plan.module.card_block("gpu_fig7", str(zoo)).startswith("Not measured on a GPU")


def test_a_cell_not_in_the_plan_is_refused_in_one_line_before_anything_runs(tmp_path, plan, capsys):
    with pytest.raises(SystemExit) as stop:
        plan.module.main(
            ["--zoo", str(tmp_path / "zoo"), "run", "--out", str(tmp_path / "out"), "--cells", "fig6_postt_s0"]
        )
    assert stop.value.code == 2
    assert "invalid choice: 'fig6_postt_s0' (choose from 'fig6_post_s0'" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


def _stopped_run(work, arm, seed, losses, accuracies, epoch_seconds):
    """A work folder's classifier cell as a call cut off in its last epoch leaves it: the epochs it
    finished in history.csv, similarity.csv and the Keras log, a checkpoint, and its cell.json."""
    cell = work / "fig6" / f"{arm}_s{seed}"
    run = cell / arm
    (run / "checkpoints").mkdir(parents=True)
    (run / "checkpoints" / "last.keras").write_bytes(b"\0" * 1000)
    (run / "config.json").write_text(json.dumps({"train": {"epochs": 4}, "dtype_policy": "float32"}))
    rows = ["epoch,accuracy,loss,val_accuracy,val_loss"]
    rows += [f"{e},{a - 0.05},{x},{a},{x - 0.1}" for e, (x, a) in enumerate(zip(losses, accuracies))]
    (run / "history.csv").write_text("\n".join(rows) + "\n")
    similarity = ["epoch,step,when,tsim_00,tsim_01", ",0,train_begin,0.5,0.9"]
    similarity += [f"{e},{469 * (e + 1)},epoch_end,0.4,{0.8 - e / 10}" for e in range(len(losses))]
    (run / "similarity.csv").write_text("\n".join(similarity) + "\n")
    log = [
        f"Epoch {e + 1}/4\n469/469 - {s}s - 300ms/step - loss: {x}"
        for e, (s, x) in enumerate(zip(epoch_seconds, losses))
    ]
    (work / "fig6" / f"{arm}_s{seed}.log").write_text("\n".join(log) + "\nEpoch 4/4\n")
    record = {"cell": f"fig6_{arm}_s{seed}", "figure": "fig6", "arm": arm, "seed": seed, "finished": 0,
              "exit_code": -15, "stopped_at_budget": True, "seconds": 500.0, "date": "2026-11-26T01:31:58+00:00",
              "command": f"recipes/cifar10_vit.py --epochs 4 --norm {arm} --seed {seed}"}  # fmt: skip
    (cell / "cell.json").write_text(json.dumps(record))


def test_runs_cut_short_come_back_at_their_last_finished_epoch_and_without_any_checkpoint(tmp_path, plan, monkeypatch):
    zoo, out, work = tmp_path / "zoo", tmp_path / "out", tmp_path / "work"
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path / "tmp"))
    (tmp_path / "tmp").mkdir()
    _stopped_run(work, "pre", 0, [], [], [])  # stopped in its first epoch: nothing to keep
    _stopped_run(work, "post", 0, [1.1, 0.8, 0.6], [0.60, 0.75, 0.80], [180, 150, 149])
    _stopped_run(work, "post", 1, [1.2, 0.9, 0.7], [0.58, 0.74, 0.79], [181, 149, 150])
    _stopped_run(work, "deescalate", 0, [0.8, 0.5, 0.4], [0.70, 0.82, 0.86], [182, 149, 148])
    _stopped_run(work, "deescalate", 1, [0.8, 0.5, 0.45], [0.71, 0.81, 0.87], [182, 150, 149])
    machine = {"device": "NVIDIA H200", "jax": "0.11.2", "keras": "3.15.1", "torch": "", "parallel": 6}
    (work / "machine.json").write_text(json.dumps(machine))
    plan.module.pack(str(work), str(out))  # a running cell's checkpoint never goes into the archive
    with tarfile.open(out / "cells.tar.gz") as archive:
        assert not [name for name in archive.getnames() if "checkpoints" in name]

    assert "adopted fig6_post_s0 (unfinished)" in plan(zoo, "adopt", str(out))
    assert not list((tmp_path / "tmp").iterdir())  # the archive's extracted copy is gone
    with open(zoo / "cells.csv") as f:
        rows = {row["cell"]: row for row in csv.DictReader(f)}
    assert (rows["fig6_post_s0"]["epochs"], rows["fig6_post_s0"]["parallel"]) == ("3", "6")
    summary = json.loads((zoo / "fig6_stopped" / "seed_1" / "deescalate" / "summary.json").read_text())
    assert (summary["epochs"], summary["epochs_planned"], summary["cut_short"]) == (3, 4, True)
    assert (summary["train_loss"], summary["test_accuracy"], summary["test_loss"]) == (0.45, 0.87, 0.45 - 0.1)
    assert summary["seconds_this_session"] == 182 + 150 + 149  # its finished epochs' time, not the cut one's
    assert summary["last_block_similarity_end"] == pytest.approx(0.6)
    block = plan.module.card_block("gpu_fig6", str(zoo))
    assert block.startswith("Stopped before the end of their schedule, 4 cells, run on NVIDIA H200")
    assert "6 runs sharing the GPU" in block and "(3 of 4 planned" in block
    assert "| deescalate | 2 | 0.4250 [0.4000, 0.4500] |" in block
    # two seeds: the verdict rule states nothing below five (zoo/README.md)
    expected = "- deescalate inconclusive against post on train loss; inconclusive against post on test accuracy"
    assert f"{expected} (2 seeds each)." in block
    assert not (zoo / "fig6").exists()  # nothing of them among the finished runs
    assert rows["fig6_pre_s0"]["epochs"] == "" and not (zoo / "fig6_stopped" / "seed_0" / "pre").exists()
    rows["fig6_post_s1"]["seconds"] = ""  # as a call's own limit leaves a cell: it never timed itself
    write_csv(str(zoo / "cells.csv"), list(rows["fig6_post_s1"]), list(rows.values()))
    printed = plan(zoo, "status")
    assert "fig6_post_s1                 unfinished, time not measured (3 epochs kept) on NVIDIA H200" in printed
    assert "fig6_pre_s0                  unfinished, 500.0 s on NVIDIA H200" in printed


def test_a_bench_returned_outside_the_plans_cells_is_listed_apart_and_leaves_the_speed_cells_to_run(tmp_path, plan):
    zoo = tmp_path / "zoo"
    (zoo / "returned").mkdir(parents=True)
    result = {"case": "vit_post", "backend": "jax", "device": "NVIDIA H200", "dtype": "mixed_bfloat16", "batch": 128,
              "step_ms": 67.896, "throughput": 1885.2, "unit": "images/s", "train_tflops": 18.82, "compile_s": 59.94,
              "peak_memory_gb": 4.714}  # fmt: skip
    (zoo / "returned" / "2026-11-26_gpu_bench_vit_post.json").write_text(json.dumps({"results": [result]}))
    block = plan.module.card_block("gpu_speed", str(zoo))
    assert block.startswith("None of the plan's 2 cells has run")
    assert (
        "| jax | vit_post | NVIDIA H200 | mixed_bfloat16 | 128 | 67.9 | 1,885 images/s | 18.8 | 59.9 | 4.71 |" in block
    )
    assert "speed_jax_s0                 not run" in plan(zoo, "status")
