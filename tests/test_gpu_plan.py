"""The GPU plan's dry run on the CPU: `zoo/gpu_plan.py run --tiny` then `adopt`, as a lent machine's
session would use them. The plan's commands run in this process; the cells' runs in processes it starts,
under JAX (the bench cell: its own backend), whatever backend hosts the test."""

import csv
import json

import pytest

from tests.helpers import recipe_module

pytestmark = pytest.mark.starts_processes


@pytest.fixture
def plan(capsys):
    """`python zoo/gpu_plan.py --zoo ZOO ARGV`, run here: what it printed."""
    module = recipe_module("gpu_plan")

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
    # a lent machine returns at most 8 files, none deeper than $OUT/a/b/: the cells come back as one archive
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
