"""The depth study's two scripts: the card's tables from a sweep CSV, and the gradient-at-init diagnostic."""

import json
import os

import numpy as np
import pytest

from keras_tse.run_files import append_row
from recipes.lab import sweep
from tests.helpers import lab_module, planned, run_lab_module

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _rows(stdout, first_column):
    return [
        [c.strip() for c in line.strip("|").split("|")]
        for line in stdout.splitlines()
        if line.startswith(f"| {first_column}")
    ]


def test_card_counts_the_committed_grid_and_averages_the_init_measures_per_tau(tmp_path):
    def row(norm, tau, seed, lr, tsim_last, grad_first):
        return dict(
            depth=12,
            norm=norm,
            tau=tau,
            initializer="torch",
            learning_rate=lr,
            seed=seed,
            steps=300,
            batch_size=64,
            hidden_dim=32,
            final_loss=0.5,
            best_loss=0.4,
            val_accuracy=0.9,
            diverged=0,
            steps_to_threshold="",
            tsim_init=f"0.1;{tsim_last}",
            tsim_end="0.1;0.2",
            grad_init=f"{grad_first};1.0",
            wall_s=1.0,
        )

    rows = [
        row("deescalate", 1.0, 0, 1e-3, 0.0, 10.0),
        row("deescalate", 1.0, 1, 1e-3, 0.0, 30.0),
        row("deescalate", 0.5, 0, 1e-3, 0.4, 6.0),
        row("deescalate", 0.5, 0, 3e-4, 0.4, 99.0),
        row("post", "", 0, 1e-3, 0.9, 2.0),
    ]
    for r in rows:
        append_row(str(tmp_path / "sweep.csv"), r)
    stdout = run_lab_module("depth_study_card", str(tmp_path))
    total = len(list(sweep.cells(sweep.SweepConfig())))
    assert stdout.startswith(f"- the first grid: 5 of {total} cells\n- DeepNorm, ReZero, LayerScale: 0 of 81 cells")
    init = {(r[0], r[2]): r[3:] for r in _rows(stdout, "post") + _rows(stdout, "deescalate") if len(r) == 7}
    # the init table takes one row per seed, its largest lr's (the measures do not depend on the lr), and
    # averages over seeds; the line below it gives how far one seed's runs at other rates lie apart
    assert init[("deescalate (tau 1)", "12")] == ["0.001", "0", "20", "1"]
    assert init[("deescalate (tau 0.5)", "12")] == ["0.001", "0.4", "6", "1"]
    assert init[("post", "12")] == ["0.001", "0.9", "2", "1"]
    assert "differs by up to 1550.0% (deescalate (tau 0.5), torch, depth 12, seed 0)" in stdout
    assert (tmp_path / "plots" / "heatmap.png").exists()


def _cell_row(norm, depth, lr, seed, final_loss):
    cell = dict(depth=depth, norm=norm, tau="", initializer="torch", learning_rate=lr, seed=seed)
    return {**cell, "steps": 300, "batch_size": 64, "hidden_dim": 32, "final_loss": final_loss}


def test_merge_takes_only_whole_seed_groups_of_the_study_grid(tmp_path):

    card = lab_module("depth_study_card")
    grids = {
        "tiny": sweep.SweepConfig(
            depths=(12,), norms=("deepnorm",), initializers=("torch",), learning_rates=(1e-3, 3e-3)
        )
    }
    target, source = str(tmp_path / "sweep.csv"), str(tmp_path / "other.csv")
    append_row(target, _cell_row("deepnorm", 12, 1e-3, 0, 0.5))
    for seed in (0, 1, 2):  # 1e-3: seeds 1 and 2 complete the group the target began; 3e-3: two of three
        append_row(source, _cell_row("deepnorm", 12, 1e-3, seed, 0.4))
        if seed < 2:
            append_row(source, _cell_row("deepnorm", 12, 3e-3, seed, 0.3))
    append_row(source, _cell_row("deepnorm", 24, 1e-3, 0, 0.2))  # outside the grid
    assert card.merge([source], target, grids) == 2
    rows = sweep.read_rows(target)
    assert sorted((r["learning_rate"], r["seed"], r["final_loss"]) for r in rows) == [
        ("0.001", "0", "0.5"),  # the target's own row is kept, not replaced
        ("0.001", "1", "0.4"),
        ("0.001", "2", "0.4"),
    ]
    assert card.merge([source], target, grids) == 0  # nothing twice
    append_row(source, _cell_row("deepnorm", 12, 3e-3, 2, 0.3))
    assert card.merge([source], target, grids) == 3  # the 3e-3 group is whole now
    other = str(tmp_path / "columns.csv")
    append_row(other, {**_cell_row("deepnorm", 12, 3e-3, 0, 0.3), "extra": 1})
    with pytest.raises(ValueError, match="other columns"):
        card.merge([other], target, grids)
    missing = str(tmp_path / "typo.csv")
    with pytest.raises(FileNotFoundError, match=f"No sweep CSV at '{missing}'"):
        card.merge([source, missing], target, grids)
    assert len(sweep.read_rows(target)) == 6  # nothing appended from `source` either


def test_edge_rates_name_the_arms_whose_best_rate_is_the_lowest_or_highest_run():

    card = lab_module("depth_study_card")
    losses = {("post", 1e-4): 0.9, ("post", 1e-3): 1.5, ("pre", 1e-4): 0.8, ("pre", 1e-3): 0.4}
    losses.update({("pre", 3e-4): 0.5, ("deepnorm", 1e-4): 0.9, ("deepnorm", 3e-4): 0.2, ("deepnorm", 1e-3): 0.6})
    rows = [_cell_row(norm, 12, lr, seed, loss) for (norm, lr), loss in losses.items() for seed in (0, 1)]
    rows = [{**r, "diverged": 0} for r in rows]
    edges = card.edge_rates(rows)
    assert edges == {("post", "", "torch", 12): (1e-4, "lowest"), ("pre", "", "torch", 12): (1e-3, "highest")}
    summary = card.edges_summary(rows).splitlines()
    assert summary[1:] == [
        "- post, torch init, depth 12: 0.0001, the lowest rate run",
        "- pre, torch init, depth 12: 0.001, the highest rate run",
    ]
    inside = [r for r in rows if r["norm"] == "deepnorm"]
    assert card.edges_summary(inside) == "Every arm's best learning rate lies strictly inside the rates it was run at."


@pytest.mark.large
def test_gradient_diagnostic_rows_are_consistent():
    stdout = run_lab_module(
        "deescalation_gradients",
        "--depths",
        "3",
        "--widths",
        "16",
        "--taus",
        "1,0",
        "--places",
        "output,pre_ffn",
        "--seeds",
        "0",
        "--inits",
        "torch",
    )
    rows = _rows(stdout, "torch")
    assert [(r[3], r[4]) for r in rows] == [("1", "output"), ("1", "pre_ffn"), ("0", "-")]  # tau 0 has no place
    for _, _, _, _, _, first, last, growth, tsim in rows:
        assert float(growth) == pytest.approx((float(first) / float(last)) ** 0.5, rel=3e-3)  # printed to 3 digits
        assert 0.0 <= float(tsim) <= 1.0
    # complete de-escalation after every block centres the tokens: t_sim (Definition 1) is 0 after the last
    assert float(rows[0][8]) < 1e-6 and float(rows[2][8]) > 0.1


def test_benchmark_results_collects_seeds_and_prints_mean_and_range(tmp_path):
    """The lab's benchmark_results on two hand-made seed folders: the table is their mean [min, max]."""
    import json

    results_module = lab_module("benchmark_results")
    for seed, (loss, accuracy, tsim_end) in enumerate(((0.5, 0.8, 0.25), (0.7, 0.6, 0.75))):
        run = tmp_path / f"seed_{seed}" / "deescalate"
        run.mkdir(parents=True)
        (run / "summary.json").write_text(
            json.dumps(
                {"train_loss": loss, "test_loss": loss + 0.1, "test_accuracy": accuracy, "seconds_this_session": 10.0}
            )
        )
        (run / "config.json").write_text(json.dumps({"seed": seed, "dataset": "fashion_mnist"}))
        (run / "similarity.csv").write_text(
            "epoch,step,when,tsim_0,tsim_1\n,0,train_begin,0.1,0.5\n"
            f"0,8,epoch_end,0.2,0.9\n1,16,epoch_end,0.3,{tsim_end}\n"
        )
    results = results_module.collect(str(tmp_path))
    assert results["kind"] == "classification" and results["settings"] == {"dataset": "fashion_mnist"}
    assert [r["tsim_end"] for r in results["runs"]["deescalate"]] == [[0.3, 0.25], [0.3, 0.75]]
    table = results_module.markdown_table(results).splitlines()
    assert table[2] == (
        "| deescalate | 2 | 0.6000 [0.5000, 0.7000] | 0.7000 [0.6000, 0.8000] | 70.00% [60.00, 80.00] "
        "| 0.500 -> 0.500 | 10 |"
    )


def test_benchmark_verdicts_name_each_outcome_of_the_rule():
    """beat / fell short of / equivalent to / inconclusive against, by the verdict rule on five paired seeds;
    accuracy counts higher as better, loss and perplexity lower; below five seeds, inconclusive."""
    results_module = lab_module("benchmark_results")
    base_loss, base_accuracy = [1.00, 1.02, 1.01, 1.03, 0.99], [0.700, 0.702, 0.698, 0.701, 0.699]

    def runs(loss_shift, accuracy_shift):
        return [
            {"seed": seed, "train_loss": base_loss[seed] + dl, "test_accuracy": base_accuracy[seed] + da}
            for seed, (dl, da) in enumerate(zip(loss_shift, accuracy_shift))
        ]

    results = {
        "kind": "classification",
        "runs": {
            "post": runs([0.41, 0.40, 0.39, 0.42, 0.40], [-0.10, -0.11, -0.09, -0.10, -0.10]),
            "pre": runs([0.001, -0.002, 0.002, 0.0, -0.001], [0.001, -0.001, 0.0, 0.001, -0.001]),
            "deescalate": runs([0.0] * 5, [0.0] * 5),
        },
    }
    assert results_module.compare(results, "deescalate", "post") == {"train_loss": "beat", "test_accuracy": "beat"}
    assert results_module.compare(results, "post", "deescalate") == {
        "train_loss": "fell short of",
        "test_accuracy": "fell short of",
    }
    assert results_module.compare(results, "deescalate", "pre") == {
        "train_loss": "equivalent to",
        "test_accuracy": "equivalent to",
    }
    results["runs"]["layerscale"] = runs([0.3, -0.3, 0.2, -0.25, 0.1], [0.05, -0.05, 0.04, -0.06, 0.02])
    results["runs"]["deepnorm"] = runs([-0.20, -0.21, -0.19, -0.20, -0.22], [0.05, 0.05, 0.06, 0.05, 0.04])
    assert results_module.verdicts(results).splitlines() == [
        "- deescalate beat post on train loss; beat post on test accuracy (5 seeds each).",
        "- deescalate equivalent to pre on train loss; equivalent to pre on test accuracy (5 seeds each).",
        "- deescalate fell short of deepnorm on train loss; fell short of deepnorm on test accuracy (5 seeds each).",
        "- deescalate inconclusive against layerscale on train loss; inconclusive against layerscale on test "
        "accuracy (5 seeds each).",
    ]
    for variant in results["runs"].values():
        del variant[4]  # four seeds: the same gaps, no verdict
    assert results_module.compare(results, "deescalate", "post") == {
        "train_loss": "inconclusive against",
        "test_accuracy": "inconclusive against",
    }


def test_benchmark_leak_table_puts_the_causal_and_leaky_arms_side_by_side():

    results_module = lab_module("benchmark_results")
    record = {"train_perplexity": 200.0, "valid_perplexity": 300.0, "test_perplexity": 280.0}
    leaky = {"train_perplexity": 100.0, "valid_perplexity": 400.0, "test_perplexity": 390.0}
    table = results_module.leak_table(
        {"runs": {"deescalate": [record, record], "deescalate_leaky_global": [leaky, leaky]}}
    ).splitlines()
    assert table[2] == "| deescalate | 200.00 | 300.00 | 280.00 | 1.500 |"
    assert table[3] == "| deescalate_leaky_global | 100.00 | 400.00 | 390.00 | 4.000 |"


def test_the_scanned_vit_is_the_unrolled_one_on_the_same_weights():
    """The measuring device of recipes/lab/scan_compile_time.py: the blocks' weights stacked and run by
    `keras.ops.scan` give the zoo ViT's logits and, step by step, its training losses."""

    scan = lab_module("scan_compile_time")
    unrolled = scan.measure("unrolled", depth=3, hidden_dim=16, batch_size=4, steps=2)
    scanned = scan.measure("scanned", depth=3, hidden_dim=16, batch_size=4, steps=2)
    assert scanned["max_logit_difference"] < 1e-5
    np.testing.assert_allclose(scanned["losses"], unrolled["losses"], rtol=1e-5)
    assert scanned["losses"][-1] < scanned["losses"][0]  # the gradients reach the stacked weights


def _cell_rows(cells):
    return [{"arm": "a", "learning_rate": f"{lr:g}", "seed": str(seed), "loss": str(loss)} for lr, seed, loss in cells]


def test_a_cell_study_brackets_the_best_rate_before_it_runs_the_seeds():
    cell_study = lab_module("engine")
    plan = cell_study.Plan(arms=("a",), grid=(1e-4, 3e-4, 1e-3), select_by="loss", max_extensions=1)
    assert cell_study.next_cells([], "a", plan) == [(1e-4, 0), (3e-4, 0), (1e-3, 0)]
    inside = _cell_rows([(1e-4, 0, 2.0), (3e-4, 0, 1.0), (1e-3, 0, 1.5)])
    assert cell_study.next_cells(inside, "a", plan) == [(3e-4, 1), (3e-4, 2)]
    assert cell_study.next_cells(inside + _cell_rows([(3e-4, 2, 1.1)]), "a", plan) == [(3e-4, 1)]
    edge = _cell_rows([(1e-4, 0, 2.0), (3e-4, 0, 1.5), (1e-3, 0, float("nan"))])  # a diverged run is never best
    assert cell_study.next_cells(edge, "a", plan) == [(3e-4, 1), (3e-4, 2)]
    low = _cell_rows([(1e-4, 0, 1.0), (3e-4, 0, 1.5), (1e-3, 0, 2.0)])
    assert cell_study.next_cells(low, "a", plan) == [(3.33e-05, 0)]  # the grid grows past the best end
    assert cell_study.next_cells(low + _cell_rows([(3.33e-5, 0, 0.9)]), "a", plan) == []  # no more extensions
    once = cell_study.Plan(arms=("a",), grid=(5e-4,), select_by="loss", bracket=False)
    assert cell_study.next_cells([], "a", once) == [(5e-4, 0), (5e-4, 1), (5e-4, 2)]  # nothing to wait for
    assert cell_study.next_cells(_cell_rows([(5e-4, 0, 1.0)]), "a", once) == [(5e-4, 1), (5e-4, 2)]


def test_an_arm_whose_rate_another_study_chose_is_read_there_on_the_seeds_it_ran():
    """A plan's `rates` name the arm's rate: its cells are its seeds there, and the card reads it there with no
    seed-0 row of its own (a lower loss at another rate chooses nothing)."""
    engine, card = lab_module("engine"), lab_module("vit_study_card")
    plan = engine.Plan(arms=("a",), grid=(), seeds=(1, 2), bracket=False, rates={"a": 3e-4})
    assert engine.next_cells([], "a", plan) == [(3e-4, 1), (3e-4, 2)]
    rows = _cell_rows([(3e-4, 1, 1.0), (1e-3, 0, 0.5)])
    assert engine.best_rate(rows, "a", plan) == 3e-4
    rate, members = engine.at_best(rows, "a", plan)
    assert rate == 3e-4 and [m["seed"] for m in members] == ["1"]
    assert card._grid_state(rows, "a", rate, plan) == "fixed at 0.0003 (another study chose it)"


def test_the_depth_fixes_references_rerun_depth_rates_cells_at_the_rates_it_chose():
    """`depth_rates`'s six layouts beside the fixes: its data, model, epochs and flags, at the rate its seed 0
    chose, so that the verdicts compare rows of one code version."""
    engine = lab_module("engine")
    fixes, rates = lab_module("depth_fixes_study"), lab_module("depth_rates_study")
    rows = rates.STUDY.read_rows()
    chosen = {arm: engine.best_rate(rows, arm, rates.STUDY.plan_of(arm)) for arm in fixes.REFERENCE_RATES}
    expected = {"deescalate": 3e-4, "layerscale": 3e-3, "post": 1e-4, "pre": 3e-4, "deepnorm": 1e-3}
    assert fixes.REFERENCE_RATES == chosen == {**expected, "deescalate_layerscale": 3e-3}
    for arm in fixes.REFERENCE_RATES:
        assert sorted((*fixes.MODEL, *fixes.ARMS[arm])) == sorted((*rates.MODEL, *rates.ARMS[arm]))
    assert (fixes.DATA, fixes.EPOCHS) == (rates.DATA, rates.EPOCHS)
    assert fixes.STUDY.plan_of("layerscale").seeds == (1, 2, 3, 4, 5)


def test_the_320_block_fixes_are_the_160_block_plan_one_rung_down_at_depth_rates320s_rates():
    """`depth_fixes320`: `depth_fixes`'s arms, flags, questions, data and epochs at `depth_rates320`'s depth and grid,
    its references at the rates `depth_rates320`'s seed 0 chose."""
    engine = lab_module("engine")
    fixes, deeper, rates320 = (
        lab_module(f"{name}_study") for name in ("depth_fixes", "depth_fixes320", "depth_rates320")
    )
    rows = rates320.STUDY.read_rows()
    chosen = {arm: engine.best_rate(rows, arm, rates320.STUDY.plan_of(arm)) for arm in deeper.REFERENCE_RATES}
    assert deeper.REFERENCE_RATES == chosen and set(chosen) == set(fixes.REFERENCE_RATES)
    same = ("DATA", "EPOCHS", "ARMS", "QUESTIONS")
    assert [getattr(deeper, name) for name in same] == [getattr(fixes, name) for name in same]
    assert rates320.DEPTH == 320 and deeper.MODEL == (*fixes.MODEL, "--depth", "320")  # argparse keeps the last
    assert deeper.STUDY.plan_of("admin").grid == rates320.PLAN.grid
    assert deeper.STUDY.plan_of("post").seeds == (1, 2, 3, 4, 5)


def _tiny_study(tmp_path, run_cell, arms=("a", "b"), seeds=(0, 1)):
    engine = lab_module("engine")
    plan = engine.Plan(arms=arms, grid=(1e-3,), seeds=seeds, select_by="loss", bracket=False)
    results = tmp_path / "study" / "results.csv"
    results.parent.mkdir(exist_ok=True)
    fields = ("arm", "learning_rate", "seed", "loss", "seconds")
    card = tmp_path / "card.md"
    return engine.Study("tiny", "a tiny study", {"all": (plan, "")}, run_cell, str(results), fields, str(card))


def test_a_study_runs_every_arms_next_cell_before_any_arms_second(tmp_path):
    """Breadth first within a seed, counting what each arm has run: with one arm's first rate done (or its
    second running), the other arm's cells come first, so a study stopped early has rows of every arm alike."""
    engine = lab_module("engine")
    plan = engine.Plan(arms=("a", "b"), grid=(1e-3, 3e-3, 1e-2), seeds=(0, 1), select_by="loss")
    study = _tiny_study(tmp_path, None)
    study = engine.Study(study.name, study.title, {"all": (plan, "")}, None, study.results, study.fields, study.card)
    with open(study.results, "w") as f:
        f.write("arm,learning_rate,seed,loss,seconds\na,0.001,0,1.5,3\n")
    assert study.pending(study.arms()) == [("b", 1e-3, 0), ("a", 3e-3, 0), ("b", 3e-3, 0), ("a", 1e-2, 0),
                                           ("b", 1e-2, 0)]  # fmt: skip
    assert study.pending(study.arms(), running={("a", 3e-3, 0)})[:3] == [("b", 1e-3, 0), ("b", 3e-3, 0),
                                                                         ("a", 1e-2, 0)]  # fmt: skip
    with open(study.results, "a") as f:
        f.write("a,0.003,0,1.4,3\n")
    assert study.pending(study.arms())[:2] == [("b", 1e-3, 0), ("b", 3e-3, 0)]  # a has run two, b none


def test_a_cell_study_appends_each_finished_cell_and_runs_again_a_cell_a_kill_cut_short(tmp_path):
    engine = lab_module("engine")
    ran = []

    def run_cell(runs, arm, lr, seed):
        ran.append((arm, seed))
        return {"arm": arm, "learning_rate": f"{lr:g}", "seed": seed, "loss": 1.0 + seed, "seconds": 1, "extra": 0}

    study = _tiny_study(tmp_path, run_cell)
    with open(study.results, "w") as f:
        f.write("arm,learning_rate,seed,loss,seconds\na,0.001,0,1.5,3\nb,0.001,0,2")  # b's row cut by a kill
    assert engine.run(study, study.arms(), str(tmp_path / "runs"), log=lambda line: None) == 3
    assert ran == [("b", 0), ("a", 1), ("b", 1)]  # every arm's seed 0 before any arm's seed 1
    rows = engine.read_rows(study.results)
    assert sorted((r["arm"], r["seed"]) for r in rows) == [("a", "0"), ("a", "1"), ("b", "0"), ("b", "1")]
    assert study.pending(study.arms()) == []


def test_a_spent_budget_stops_the_running_cells_keeps_the_finished_rows_and_hands_them_off(tmp_path):
    """A cell still running when the budget is spent is stopped (its process killed, no row), the rows
    that finished stay, and `out` holds the result file and the cells' logs (one archive) as they were at each finish;
    the next call starts the stopped cell again."""
    import sys
    import tarfile

    engine = lab_module("engine")
    runs = tmp_path / "runs"

    def run_cell(runs, arm, lr, seed):
        sleep = 60 if arm == "slow" else 0
        log = os.path.join(runs, f"{arm}_s{seed}.log")
        seconds = engine.run_process([sys.executable, "-c", f"import time; time.sleep({sleep})"], log, arm)
        return {"arm": arm, "learning_rate": f"{lr:g}", "seed": seed, "loss": 1.0, "seconds": seconds}

    study = _tiny_study(tmp_path, run_cell, arms=("slow", "fast"), seeds=(0,))
    written = engine.run(study, study.arms(), str(runs), jobs=2, budget_s=8, out=str(tmp_path / "out"), log=print)
    assert written == 1  # the 60 s cell was stopped, not waited for: it wrote no row
    assert [r["arm"] for r in engine.read_rows(study.results)] == ["fast"]
    assert sorted(os.listdir(tmp_path / "out")) == ["cell_logs.tar.gz", "results.csv"]
    with tarfile.open(tmp_path / "out" / "cell_logs.tar.gz") as tar:
        assert sorted(tar.getnames()) == ["fast_s0.log", "slow_s0.log"]
    assert (tmp_path / "out" / "results.csv").read_text() == open(study.results).read()
    assert study.pending(study.arms()) == [("slow", 1e-3, 0)]
    assert (runs / "slow_s0.log.seconds").exists()  # its time so far, for when it resumes
    alone = tmp_path / "alone"  # no cell finishes: the stopped one's log comes back all the same
    engine.run(study, ("slow",), str(runs), jobs=1, budget_s=2, out=str(alone), log=print)
    with tarfile.open(alone / "cell_logs.tar.gz") as tar:
        assert "slow_s0.log" in tar.getnames()


def test_a_cells_seconds_add_up_over_the_calls_that_ran_it(tmp_path, monkeypatch):
    """A cell stopped and resumed reports the time of both calls, not of the last alone (a stand-in clock
    that moves 2.5 s across the first call and 4 s across the second: no real time is read)."""
    import sys
    import types

    engine = lab_module("engine")
    readings = iter([10.0, 12.5, 100.0, 104.0])
    monkeypatch.setattr(engine, "time", types.SimpleNamespace(perf_counter=lambda: next(readings)))
    log = str(tmp_path / "cell.log")
    done = [sys.executable, "-c", "pass"]
    assert engine.run_process(done, log, "cell") == 2.5
    assert engine.run_process(done, log, "cell") == 6.5
    assert (tmp_path / "cell.log.seconds").read_text() == "6.5\n"


def test_a_running_cells_time_so_far_is_on_disk_before_it_ends(tmp_path, monkeypatch):
    """A study killed outright (no `finally` runs) keeps its running cell's time up to its last tally: the
    cell, a process, reads `.seconds` while it still runs and finds the earlier call's 4.0 s plus this one's
    so far (a stand-in clock that moves 1 s a reading: no real time is read)."""
    import itertools
    import sys
    import types

    engine = lab_module("engine")
    readings = itertools.count(10.0, 1.0)
    monkeypatch.setattr(engine, "time", types.SimpleNamespace(perf_counter=lambda: next(readings)))
    monkeypatch.setattr(engine, "TALLY_S", 0.2)
    log, seen = tmp_path / "cell.log", tmp_path / "seen"
    (tmp_path / "cell.log.seconds").write_text("4.0\n")
    code = (  # the cell: wait (at most 2,000 polls) until the file changes, then record what it holds
        "import pathlib, time\n"
        f"tally = pathlib.Path({str(tmp_path / 'cell.log.seconds')!r})\n"
        "for _ in range(2000):\n"
        "    if tally.read_text() != '4.0\\n':\n"
        "        break\n"
        "    time.sleep(0.01)\n"
        f"pathlib.Path({str(seen)!r}).write_text(tally.read_text())\n"
    )
    engine.run_process([sys.executable, "-c", code], str(log), "cell")
    tallied = float(seen.read_text())  # 4.0 before, + 1 s a reading since this call's start: 5.0 at the first
    assert tallied >= 5.0 and tallied.is_integer()  # tally (later ones if the cell looked late)


_STUDY_THAT_SLEEPS = """
import os, sys
from keras_tse import interrupts
from recipes.lab import engine

folder, jobs = sys.argv[1], int(sys.argv[2])
plan = engine.Plan(arms=("a", "b"), grid=(1e-3,), seeds=(0,), select_by="loss", bracket=False)


def run_cell(runs, arm, lr, seed):  # a cell: a process that writes its pid, then sleeps
    pid_file = os.path.join(folder, arm + ".pid")
    code = f"import os, time; open({pid_file!r}, 'w').write(str(os.getpid())); time.sleep(120)"
    engine.run_process([sys.executable, "-c", code], os.path.join(runs, arm + ".log"), arm)
    return {"arm": arm, "learning_rate": "0.001", "seed": seed, "loss": 1.0}


fields = ("arm", "learning_rate", "seed", "loss")
study = engine.Study("sleeps", "", {"all": (plan, "")}, run_cell, os.path.join(folder, "rows.csv"), fields, "")
interrupts.catch()  # as every keras-tse command does
try:
    engine.run(study, study.arms(), folder, jobs=jobs)
except KeyboardInterrupt:
    sys.exit(130)
"""


@pytest.mark.starts_processes
@pytest.mark.parametrize("jobs", [1, 2])
def test_sigterm_to_a_study_stops_its_running_cells(tmp_path, jobs):
    """A study ended by SIGTERM (a scheduler's or `kill`'s) ends its cells' processes too, one cell at a
    time or several: none trains on, orphaned (each resumes from its last saved epoch next time)."""
    import signal
    import subprocess
    import sys
    import time

    script = tmp_path / "study.py"
    script.write_text(_STUDY_THAT_SLEEPS)
    pid_files = [tmp_path / f"{arm}.pid" for arm in ("a", "b")[:jobs]]
    checkout = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # where `recipes.lab` imports
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [checkout, os.environ.get("PYTHONPATH")]))}
    study = subprocess.Popen([sys.executable, str(script), str(tmp_path), str(jobs)], cwd=tmp_path, env=env)
    deadline = time.monotonic() + 60
    while not all(f.exists() and f.read_text() for f in pid_files):
        assert study.poll() is None and time.monotonic() < deadline, "the study ended before its cells started"
        time.sleep(0.1)
    cells = [int(f.read_text()) for f in pid_files]
    study.send_signal(signal.SIGTERM)
    assert study.wait(timeout=30) == 130
    for pid in cells:  # SIGTERM'd by the study, waited for, gone
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_under_a_budget_no_cell_starts_that_the_time_left_cannot_finish(tmp_path):
    """A study whose cells cannot be carried to the next call (`cell_estimate_s`) starts none once the
    budget left is shorter: nothing is cut short, the cell is still pending."""
    import dataclasses

    engine = lab_module("engine")
    ran = []

    def run_cell(runs, arm, lr, seed):
        ran.append(arm)
        return {"arm": arm, "learning_rate": f"{lr:g}", "seed": seed, "loss": 1.0, "seconds": 0.0}

    study = _tiny_study(tmp_path, run_cell, arms=("a",), seeds=(0,))
    long = dataclasses.replace(study, cell_estimate_s=60.0)
    assert engine.run(long, long.arms(), str(tmp_path / "runs"), budget_s=30, log=lambda line: None) == 0
    assert ran == [] and long.pending(long.arms()) == [("a", 1e-3, 0)]
    assert engine.run(long, long.arms(), str(tmp_path / "runs"), budget_s=90, log=lambda line: None) == 1


# (depth, width, FFN width) each study's card states
STUDY_MODELS = {"tau_sweep_study": (48, 32, 64), "depth80_study": (80, 32, 64), "fig6_paper_study": (80, 192, 384)}


@pytest.mark.parametrize("study", list(STUDY_MODELS))
def test_each_study_arm_asks_the_recipe_for_the_model_its_card_describes(study, monkeypatch):
    """Every arm's flags, read by the ViT recipe's own parser: the depth, width and tau the card states."""
    from keras_tse.training import image_runs

    module = lab_module(study)
    for arm, flags in module.ARMS.items():
        plan = planned("cifar10_vit", [*module.DATA, *module.MODEL, *flags])
        norm = plan.settings.norm[0]
        overrides = {**image_runs.base_model(plan.settings, norm), **plan.variant(norm).overrides}
        expected = (*STUDY_MODELS[study], True)
        assert (overrides["depth"], overrides["hidden_dim"], overrides["ffn_dim"], overrides["scan"]) == expected
        if study == "tau_sweep_study":
            learned = arm == "tau_learned"
            assert overrides["tau"] == (1.0 if learned else float(arm.removeprefix("tau_")))
            assert overrides.get("trainable_tau", False) is learned
        else:
            assert overrides.get("trainable_tau", False) is (arm == "deescalate_learned_tau")


def test_the_tau_sweep_table_reads_each_tau_at_its_best_rate(monkeypatch):
    study = lab_module("tau_sweep_study")
    fixed = dict(test_accuracy="0.9", similarity_end="0.1", learned_tau_mean="")
    rows = [
        {**fixed, "arm": "tau_1", "learning_rate": lr, "seed": s, "train_loss": loss}
        for lr, s, loss in (("0.0003", 0, "0.9"), ("0.001", 0, "0.2"), ("0.003", 0, "nan"), ("0.001", 1, "0.4"))
    ]
    rows.append({**fixed, "arm": "tau_learned", "learning_rate": "0.001", "seed": 0, "train_loss": "0.3",
                 "learned_tau_mean": "0.8125"})  # fmt: skip
    table = study.markdown_table(rows)
    assert "| 1 | 0.001 | 0.0003/0.001/0.003 | 2 | 0.300 (0.200-0.400) | 0.9000 (0.9000-0.9000) |" in table
    assert "| learned | 0.001 | 0.001 | 1 | 0.300 | 0.9000 | 0.1000 | 0.812 |" in table
    assert "| 0.5 | not run | | 0 |" in table and "5 cells measured" in table
    columns = lab_module("engine").learned_tau_columns
    assert columns({"learned_tau": [1.0, 0.5, 0.75]}) == dict(
        learned_tau_mean="0.7500", learned_tau_min="0.5000", learned_tau_max="1.0000"
    )
    assert set(columns({"train_loss": 1.0}).values()) == {""}  # a fixed tau: empty columns


def test_the_ptb_warmup_table_picks_rates_by_validation_and_answers_only_with_seeds(monkeypatch):
    study = lab_module("ptb_warmup_study")

    def row(arm, lr, seed, valid, test):
        warmup = 50 if arm.endswith("warmup") else 0
        measured = {
            "valid_loss": valid,
            "valid_perplexity": valid * 100,
            "test_perplexity": test,
            "similarity_end": 0.5,
        }
        return {"arm": arm, "depth": 16, "warmup_steps": warmup, "learning_rate": lr, "seed": seed, **measured}

    rows = [
        row("pre", lr, 0, v, t) for lr, v, t in (("0.00025", 5.0, 150.0), ("0.0005", 4.0, 190.0), ("0.001", 4.5, 100.0))
    ]
    rows += [row("pre", "0.0005", s, 4.1, 180.0 + s) for s in (1, 2)]
    rows += [row("pre_warmup", "0.0005", s, 4.0, 170.0 + s) for s in (0, 1, 2)]
    table = study.STUDY.table(rows)
    # the best rate is the lowest validation loss (0.0005), not the lowest test perplexity (0.001)
    assert "| pre | 16 | 0 | 0.0005 | 0.00025/0.0005/0.001 | 3 | 406.7 (400.0-410.0) | 184.3 (181.0-190.0) |" in table
    # seed 0 chose the rate; seeds 1 and 2 are too few for a verdict however far apart they are
    assert "| does warmup help pre-norm? | pre_warmup | pre | inconclusive (2 verdict seeds) |" in table
    assert "| causal de-escalation against pre-norm | causal | pre | not measured |" in table
    arms = (("pre", 180.0), ("pre_warmup", 170.0))
    rows += [row(arm, "0.0005", s, 4.1, base + s) for s in (3, 4, 5) for arm, base in arms]
    table = study.STUDY.table(rows)  # five verdict seeds, 170-175 against 181-185 (5.9% to 6.1% lower)
    assert "| does warmup help pre-norm? | pre_warmup | pre | A beats B |" in table
    rows = [r for r in rows if not (r["arm"] == "pre_warmup" and r["seed"] > 0)]
    rows += [row("pre_warmup", "0.0005", s, 4.0, 180.0 + s + 0.1 * (-1) ** s) for s in (1, 2, 3, 4, 5)]
    table = study.STUDY.table(rows)  # within 0.1 of pre's seeds: inside 5% of perplexity
    assert "| does warmup help pre-norm? | pre_warmup | pre | A is equivalent to B |" in table


@pytest.mark.parametrize(
    "study, argv, arms",
    [
        ("depth80", ["--arms", "pre,post"], ("pre", "post")),
        ("tau_sweep", [], ("tau_0", "tau_0.25", "tau_0.5", "tau_0.75", "tau_1", "tau_learned")),
        ("ptb_warmup", ["--part", "deep"], ("post_32", "post_32_warmup", "pre_32", "causal_32")),
    ],
)
def test_keras_tse_study_runs_the_arms_asked_of_its_plan_and_refuses_an_unknown_one_in_one_line(
    study, argv, arms, tmp_path, monkeypatch, capsys
):
    from keras_tse.cli import main as cli

    engine = lab_module("engine")
    calls = []
    monkeypatch.setattr(engine, "run", lambda study, arms, runs, **kw: calls.append((study, arms, runs)) or 0)
    assert cli.main(["study", study, "--runs", str(tmp_path / "runs"), *argv]) == 0
    ((found, asked, runs),) = calls
    assert found.name == study and asked == arms and runs == str(tmp_path / "runs")
    part = [argv[1]] if argv[:1] == ["--part"] else None
    assert cli.main(["study", study, *(argv if part else []), "--arms", "bogus"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"keras-tse study: error: --arms: received bogus; expected some of {', '.join(found.arms(part))}"]


def test_keras_tse_study_lists_every_study_and_dry_runs_one(capsys):
    """Every study is listed; nothing in the list is hand-kept here but the names the cards cite."""
    from keras_tse.cli import main as cli
    from keras_tse.cli.commands.study import studies

    assert cli.main(["study"]) == 0
    listed = capsys.readouterr().out
    assert all(f"{name} " in listed for name in STUDIES) and sorted(studies()) == sorted(STUDIES)
    depth80 = studies()["depth80"]
    assert cli.main(["study", "depth80", "--dry-run"]) == 0
    out = capsys.readouterr().out.splitlines()
    pending = depth80.pending(depth80.arms())
    assert out[:-1] == [f"{arm} lr {lr:g} seed {seed}" for arm, lr, seed in pending]
    assert out[-1].startswith(f"{len(pending)} cell(s) can start now; {len(depth80.read_rows())} rows in ")


STUDIES = ("depth80", "depth_ladder", "fig6_paper", "fig7_paper", "fine_tune", "ptb_warmup", "recipe_defaults")
STUDIES += ("speed_paper",)
STUDIES += (
    "tau_sweep",
    "depth_rates",
    "depth_rates320",
    "depth_remedies",
    "depth_fixes",
    "depth_fixes320",
    "bert_ptb",
    "vit6_selection",
)  # every study `keras-tse study` has (the listing test checks it lists them all)


@pytest.mark.parametrize("name", STUDIES)
def test_keras_tse_study_card_regenerates_each_card_unchanged(name, tmp_path, monkeypatch, capsys):
    """`--card` on a copy of the committed card: its generated tables equal the committed ones."""
    import dataclasses
    import shutil

    from keras_tse.cli import main as cli
    from keras_tse.cli.commands import study as command

    found = command.studies()
    copy = tmp_path / os.path.basename(found[name].card)
    shutil.copyfile(found[name].card, copy)
    moved = {**found, name: dataclasses.replace(found[name], card=str(copy), figure=None)}
    monkeypatch.setattr(command, "studies", lambda: moved)
    assert cli.main(["study", name, "--card"]) == 0
    assert "generated tables unchanged" in capsys.readouterr().out
    assert copy.read_text() == open(found[name].card).read()


@pytest.mark.parametrize("name, lines", [("fig6_paper", 0), ("depth_ladder", 12)])
def test_card_draws_one_line_each_arm_told_apart_and_no_figure_without_rows(name, lines, tmp_path, monkeypatch, capsys):
    """`--card`'s figure: each arm's curve in its own colour and line style (the ladder's 12 arms outrun the
    10 colours of the cycle), and no file at all for a study with no rows yet."""
    import dataclasses
    import shutil

    from keras_tse.cli import main as cli
    from keras_tse.cli.commands import study as command
    from recipes.lab import vit_study_card

    found = command.studies()
    copy = tmp_path / os.path.basename(found[name].card)
    shutil.copyfile(found[name].card, copy)
    monkeypatch.setattr(command, "studies", lambda: {**found, name: dataclasses.replace(found[name], card=str(copy))})
    monkeypatch.setattr(vit_study_card, "figure_path", lambda plan: str(tmp_path / "figure.png"))
    figures, save_figure = [], vit_study_card.save_figure
    monkeypatch.setattr(
        vit_study_card, "save_figure", lambda fig, *a, **k: (figures.append(fig), save_figure(fig, *a, **k))
    )
    assert cli.main(["study", name, "--card"]) == 0
    out = capsys.readouterr().out
    if not lines:
        assert "no rows yet: no figure" in out and not (tmp_path / "figure.png").exists() and not figures
        return
    assert "figure.png: redrawn" in out and (tmp_path / "figure.png").stat().st_size > 0
    styles = [(line.get_color(), line.get_linestyle()) for line in figures[0].axes[0].get_lines()]
    assert len(set(styles)) == len(styles) == lines, styles


def test_the_recipe_defaults_study_changes_only_the_defaults_of_the_depth80_study_at_its_rates(tmp_path):
    """The before/after study trains the depth-80 study's model, data and epochs with the two defaults
    left to the recipe, each arm at the rate the depth-80 study chose on seed 0."""
    import dataclasses

    study, depth80 = lab_module("recipe_defaults_study"), lab_module("depth80_study")
    engine = lab_module("engine")
    rows = depth80.STUDY.read_rows()
    rates = {norm: engine.best_rate(rows, norm, depth80.STUDY.plan_of(norm)) for norm in study.VARIANTS}
    assert study.DEPTH80_RATES == rates and study.RATES["pre_decay_only"] == rates["pre"]
    assert (study.MODEL, study.EPOCHS) == (depth80.MODEL, depth80.EPOCHS)
    assert [*study.DATA, *study.BEFORE] == list(depth80.DATA)  # only the old defaults' flags are left out
    assert [len(study.before_rows(norm)) for norm in study.VARIANTS] == [2, 2, 2]
    fresh = dataclasses.replace(study.STUDY, results=str(tmp_path / "fresh.csv"))
    assert sorted(fresh.pending(fresh.arms())) == sorted(
        (arm, study.RATES[arm], s) for arm in study.ARMS for s in (0, 1)
    )


def test_the_depth_ladder_cards_prose_quotes_its_rows():
    """The numbers the card's ladder section cites in its prose are the committed rows' (per-epoch test
    accuracy, the training-loss curve, the 320-block cells' seconds)."""
    ladder = lab_module("depth_ladder_study")
    rows = {row["arm"]: row for row in ladder.STUDY.read_rows()}
    with open(ladder.CARD) as f:
        card = f.read()
    card = " ".join(card[card.index("## How deep each layout trains") :].split())

    def accuracy(arm, epoch):
        return f"{100 * float(rows[arm]['test_accuracy_curve'].split(';')[epoch]):.1f}%"

    losses = ", ".join(f"{float(v):.2f}" for v in rows["deescalate_160"]["loss_curve"].split(";"))
    assert (
        f"rose to {accuracy('deescalate_160', 1)} after two epochs, then fell to {accuracy('deescalate_160', 3)}"
        in card
    )
    assert f"(training loss {losses})" in card
    assert f"{accuracy('deescalate_320', 0)} after one epoch, {accuracy('deescalate_320', 3)} at the end" in card
    assert f"({accuracy('deepnorm_160', 0)} test accuracy after one epoch)" in card
    assert f"{accuracy('pre_160', 3)} at 160, {accuracy('pre_320', 3)} at 320" in card
    assert f"({accuracy('layerscale_160', 3)} and {accuracy('deescalate_layerscale_160', 3)})" in card
    assert f"at 320 ({accuracy('layerscale_320', 3)} and {accuracy('deescalate_layerscale_320', 3)})" in card
    seconds = [float(row["seconds"]) for arm, row in rows.items() if arm.endswith("_320") and row["seconds"]]
    assert f"A 320-block cell took {min(seconds):,.0f}-{max(seconds):,.0f} s" in card


def test_the_depth_ladder_runs_each_layout_deeper_at_its_depth80_rate(tmp_path, monkeypatch):
    """Each rung is the depth-80 study's run with another depth (its flag last, so it wins) and remat, at
    the rate the depth-80 study chose for the layout; the CPU part is 160 and 320 blocks, seed 0."""
    import dataclasses

    ladder, depth80 = lab_module("depth_ladder_study"), lab_module("depth80_study")
    engine = lab_module("engine")
    rows = depth80.STUDY.read_rows()
    assert ladder.RATES == {arm: engine.best_rate(rows, arm, depth80.STUDY.plan_of(arm)) for arm in ladder.LAYOUTS}
    study = dataclasses.replace(ladder.STUDY, results=str(tmp_path / "ladder.csv"))
    cpu = study.pending(study.arms(["cpu"]))
    assert len(cpu) == 12 and {seed for _, _, seed in cpu} == {0}
    assert ("post_320", 3e-4, 0) in cpu and ("layerscale_160", 3e-3, 0) in cpu
    asked = []
    monkeypatch.setattr(engine, "run_recipe", lambda task, argv, out, what: asked.append(argv) or 1.0)
    with pytest.raises(FileNotFoundError):  # the fake run writes no summary: only its command is checked
        study.run_cell(str(tmp_path), "deescalate_320", 1e-3, 0)
    (argv,) = asked
    depth = len(argv) - 1 - argv[::-1].index("--depth")
    assert argv[depth + 1] == "320" and "--remat" in argv and argv[argv.index("--learning-rate") + 1] == "0.001"


def test_the_depth80_card_says_how_far_from_flat_each_curve_ends(monkeypatch):
    card, study = lab_module("vit_study_card"), lab_module("depth80_study")
    assert card.last_epoch_fall({"loss_curve": "2.0;1.0;0.8"}) == pytest.approx(20.0)
    rows = [
        {"arm": "pre", "learning_rate": str(lr), "seed": "0", "train_loss": str(loss), "test_accuracy": "0.7",
         "loss_curve": f"1.0;{loss}", "similarity_init": "0.9", "similarity_end": "0.8", "learned_tau_mean": ""}
        for lr, loss in ((1e-4, 0.8), (3e-4, 0.6), (1e-3, 0.7))
    ]  # fmt: skip
    rows.append({**rows[1], "seed": "1", "loss_curve": "1.0;0.8;0.6"})
    line = next(line for line in card.results_table(rows, study).splitlines() if line.startswith("| pre |"))
    assert "| 0.0003 | inside 0.0001/0.0003/0.001 | 2 | 0.600 (0.600-0.600) | 32.5 (25.0-40.0) |" in line


def _fake_run(variant, summary, files):
    """A run's variant folder as the training command leaves it: its summary.json and `files` {name: text}."""
    os.makedirs(variant)
    for name, text in {"summary.json": json.dumps(summary), **files}.items():
        with open(os.path.join(variant, name), "w") as f:
            f.write(text)


@pytest.mark.parametrize(
    "study, arm, recorded, expected",
    [("ptb_warmup_study", "pre", {}, 0), ("ptb_warmup_study", "pre_warmup", {"warmup_steps": 50}, 50),
     ("fig7_paper_study", "pre", {}, 0)],
)  # fmt: skip
def test_a_language_model_cell_row_reads_the_warmup_its_run_recorded_and_none_where_it_recorded_the_default(
    study, arm, recorded, expected, tmp_path, monkeypatch
):
    study = lab_module(study)
    asked = []

    def run_recipe(recipe, argv, out, what):  # the files the recipe writes (config.json: the kit only where set)
        asked.append(argv)
        train = {"steps": 500, "learning_rate": 5e-4, **recorded}
        summary = {"train_loss": 5.0, "valid_loss": 5.1, "valid_perplexity": 164.0, "test_perplexity": 160.0,
                   "last_block_similarity_start": 0.9, "last_block_similarity_end": 0.8}  # fmt: skip
        config = json.dumps({"train": train, "overrides": {"depth": 16}})
        _fake_run(
            os.path.join(out, "pre"), summary, {"config.json": config, "steps.csv": "step,loss\n250,5.5\n500,5.0\n"}
        )
        return 12.0

    monkeypatch.setattr(study.engine, "run_recipe", run_recipe)
    row = study.STUDY.run_cell(str(tmp_path), arm, 5e-4, 0)
    assert (row["warmup_steps"], row["depth"], row["steps"], row["test_perplexity"]) == (expected, 16, 500, 160.0)
    assert set(study.STUDY.fields) - set(row) == {"machine"}  # the engine adds the machine
    assert ("--size" in asked[0]) == (study.STUDY.name == "fig7_paper")  # Fig. 7's widths, at the paper's size


@pytest.mark.starts_processes  # the bench runs in its own JAX process, whatever backend hosts the test
def test_a_bench_study_cell_runs_the_bench_and_its_row_alone_fills_the_speed_table(tmp_path, monkeypatch, capsys):
    """`keras-tse study speed_paper --arms jax` at a tiny bench size: the bench runs in a process of its own
    backend, its results become one row (as JSON) of the result file, handed off with the logs, and the
    card's table is drawn from that row."""
    import dataclasses

    from keras_tse.cli import main as cli
    from keras_tse.cli.commands import study as command

    module = lab_module("speed_paper_study")
    monkeypatch.setattr(module, "BENCH", ("--quick", "--cases", "vit_post", "--steps", "1", "--rounds", "1",
                                          "--warmup", "0", "--vit-depth", "1"))  # fmt: skip
    moved = dataclasses.replace(module.STUDY, results=str(tmp_path / "speed_paper.csv"))
    monkeypatch.setattr(command, "studies", lambda: {"speed_paper": moved})
    out = tmp_path / "out"
    assert cli.main(["study", "speed_paper", "--arms", "jax", "--runs", str(tmp_path / "runs"), "--out", str(out)]) == 0
    (row,) = moved.read_rows()
    (result,) = json.loads(row["results"])
    assert (row["arm"], row["backend"], result["backend"], result["case"]) == ("jax", "jax", "jax", "vit_post")
    assert sorted(p.name for p in out.iterdir()) == ["cell_logs.tar.gz", "speed_paper.csv"]
    table = module.markdown_table([row])
    assert f"| jax | vit_post | {result['device']} | float32 | 32 | {result['step_ms']:.1f} |" in table


def test_a_cell_rows_machine_names_the_gpu_where_nvidia_smi_finds_one(tmp_path, monkeypatch):
    """A row's machine says which GPU trained the cell: the first name `nvidia-smi` lists, after the CPU;
    without `nvidia-smi`, the CPU alone."""
    from keras_tse import machine

    monkeypatch.setenv("PATH", str(tmp_path))
    assert "," not in machine.machine_name()
    fake = tmp_path / "nvidia-smi"
    fake.write_text('#!/bin/sh\nprintf "NVIDIA H200\\nNVIDIA H200\\n"\n')
    fake.chmod(0o755)
    assert machine.machine_name().endswith(", NVIDIA H200")


@pytest.mark.parametrize("study", ["depth80_study", "tau_sweep_study", "fig6_paper_study", "fine_tune_study"])
def test_a_vit_cell_row_holds_every_column_of_its_study_from_the_run_it_made(study, tmp_path, monkeypatch):
    module = lab_module(study)
    arm = next(iter(module.ARMS))

    def run_recipe(task, argv, out, what):  # the files `keras-tse train vit` writes
        summary = {"epochs": 2, "train_loss": 0.5, "test_loss": 0.6, "test_accuracy": 0.8, "best_test_accuracy": 0.81,
                   "last_block_similarity_start": 0.9, "last_block_similarity_end": 0.2}  # fmt: skip
        history = "epoch,loss,val_accuracy\n0,0.9,0.7\n1,0.5,0.8\n"
        _fake_run(os.path.join(out, argv[argv.index("--norm") + 1]), summary, {"history.csv": history})
        return 3.0

    monkeypatch.setattr(module.engine, "run_recipe", run_recipe)
    row = module.STUDY.run_cell(str(tmp_path), arm, 1e-3, 1)
    assert set(module.STUDY.fields) - set(row) == {"machine"}  # the engine adds the machine
    assert (row["train_loss"], row["similarity_end"], row["loss_curve"], row["seed"]) == (0.5, 0.2, "0.9;0.5", 1)


def test_a_cell_stopped_on_a_non_finite_loss_is_a_diverged_row(tmp_path):
    """`keras-tse train` exits 3 for a run stopped on a non-finite loss (a row, not a failed cell), and its
    summary reads as diverged: every loss infinite (the worst to a rate grid and the verdict rule), the rest
    NaN; the depth study's criterion says it does not train."""
    import math

    from keras_tse.cli import flags
    from keras_tse.run_files import write_json

    engine, depth_rates = lab_module("engine"), lab_module("depth_rates_study")
    assert engine.STOPPED == flags.STOPPED_STATUS
    stop = {"reason": "non-finite training loss", "epoch": 1, "batch": 3, "loss": "nan"}
    write_json(str(tmp_path / "summary.json"), {"model": "m", "epochs": 1, "stopped": stop})
    summary = engine.read_summary(str(tmp_path))
    columns = engine.classifier_columns(summary)
    assert columns["train_loss"] == columns["test_loss"] == math.inf and math.isnan(columns["test_accuracy"])
    assert summary["valid_perplexity"] == math.inf and summary["epochs"] == 1
    row = {"train_loss": str(columns["train_loss"]), "loss_curve": "1.9"}
    assert not depth_rates.trains(row)


def test_the_shipped_vits_selection_reads_validation_only_and_keeps_the_shipped_recipe(tmp_path, monkeypatch):
    """vit6_selection: each candidate is the shipped command with its augmentation and rate and a 10% validation
    split (the last flag of each name wins); its row is the held-out split's record, the epoch of lowest
    validation loss and no test number; the chosen cell is the lowest best validation loss."""
    module, presets = lab_module("vit6_selection_study"), lab_module("ship_presets")
    calls = []

    def run_recipe(task, argv, out, what):
        calls.append(argv)
        history = "epoch,loss,val_loss,val_accuracy\n0,0.9,0.70,0.71\n1,0.5,0.40,0.86\n2,0.3,0.45,0.87\n"
        _fake_run(os.path.join(out, "deescalate"), {"test_accuracy": 0.99}, {"history.csv": history})
        return 7.0

    monkeypatch.setattr(module.engine, "run_recipe", run_recipe)
    row = module.STUDY.run_cell(str(tmp_path), "crop_flip", 3e-3, 0)
    assert set(module.STUDY.fields) - set(row) == {"machine"} and not any("test" in key for key in row)
    assert (row["best_valid_loss"], row["best_epoch"], row["valid_accuracy"], row["epochs"]) == (0.40, 2, 0.86, 3)
    assert (row["train_loss"], row["valid_loss_curve"], row["seconds"]) == (0.3, "0.7000;0.4000;0.4500", 7.0)

    def last(flag):
        return calls[0][len(calls[0]) - 1 - calls[0][::-1].index(flag) + 1]

    assert (last("--augment"), last("--learning-rate"), last("--validation-fraction")) == ("crop_flip", "0.003", "0.1")
    shipped = f"{presets.COMMANDS['vit6_fashion_mnist']} {presets.MODEL}".split()
    for flag in ("--epochs", "--batch-size", "--warmup-steps", "--schedule", "--depth", "--hidden-dim", "--init"):
        assert last(flag) == shipped[shipped.index(flag) + 1]
    rows = [{"best_valid_loss": "0.41"}, {"best_valid_loss": "0.39"}, {"best_valid_loss": "0.40"}]
    assert module.chosen(rows) is rows[1] and module.chosen([]) is None


def test_the_selections_ship_ships_its_best_validation_checkpoint(tmp_path, monkeypatch, capsys):
    """`python -m recipes.lab.vit6_selection_study --ship`: the candidate of lowest validation loss, its checkpoint
    of lowest validation loss, the command that trained it and how it was chosen in the metadata; no candidate
    yet is one line, a preset folder already there is refused."""
    import dataclasses

    module, presets = lab_module("vit6_selection_study"), lab_module("ship_presets")
    results = tmp_path / "selection.csv"
    monkeypatch.setattr(module, "STUDY", dataclasses.replace(module.STUDY, results=str(results)))
    monkeypatch.setattr(presets, "WEIGHTS", str(tmp_path / "weights"))
    shipped = []
    monkeypatch.setattr(presets, "ship", lambda *args, **kwargs: shipped.append((args, kwargs)) or {"ok": 1})
    runs = ["--ship", "--runs", str(tmp_path / "runs")]
    with pytest.raises(SystemExit, match="vit6_selection has 4 candidate"):
        module.main(runs)
    columns = {"seed": 0, "epochs": 12, "train_loss": 0.2, "valid_accuracy": 0.9, "valid_loss_curve": "", "seconds": 1}
    candidates = [("none", 1e-3, 0.31, 9), ("crop_flip", 3e-3, 0.27, 11), ("none", 3e-3, 0.33, 8)]
    candidates += [("crop_flip", 1e-3, 0.30, 12), ("none", 1e-3 / 3, 0.35, 12), ("crop_flip", 9e-3, 0.29, 10)]
    for i, (arm, rate, loss, epoch) in enumerate(candidates):
        if i == 2:  # the bracket not yet closed: no choice to ship
            with pytest.raises(SystemExit, match="vit6_selection has 2 candidate"):
                module.main(runs)
        row = {**columns, "arm": arm, "learning_rate": f"{rate:g}", "best_valid_loss": loss, "best_epoch": epoch}
        module.engine.append_row(str(results), {f: row.get(f, "") for f in module.FIELDS})
    assert module.STUDY.pending(module.STUDY.arms()) == []  # each arm's best rate inside its tried ones
    assert "bold: the chosen cell; 6 candidate(s) run" in module.markdown_table(module.STUDY.read_rows())
    chosen = tmp_path / "runs" / "crop_flip_lr0.003_s0" / "deescalate"
    with pytest.raises(SystemExit, match=f"{chosen} holds no best.keras checkpoint; .* train vit .*crop_flip"):
        module.main(runs)
    (chosen / "checkpoints").mkdir(parents=True)
    (chosen / "checkpoints" / "best.keras").write_text("")
    curve = [f"{e},0.2,{0.3 - 0.002 * e:.3f},0.9" for e in range(12)]  # lowest at epoch 12, not the row's 11
    (chosen / "history.csv").write_text("\n".join(["epoch,loss,val_loss,val_accuracy", *curve]))
    with pytest.raises(SystemExit, match="not the chosen run: .* 0.278000 at epoch 12; expected 0.270000 at epoch 11"):
        module.main(runs)
    curve[10], curve[11] = "10,0.2,0.270,0.9", "11,0.2,0.279,0.9"
    (chosen / "history.csv").write_text("\n".join(["epoch,loss,val_loss,val_accuracy", *curve]))
    module.main(runs)
    ((args, kwargs),) = shipped
    assert args[:2] == ("vit6_fashion_mnist", str(tmp_path / "runs" / "crop_flip_lr0.003_s0" / "deescalate"))
    assert "--augment crop_flip --learning-rate 0.003 --validation-fraction 0.1 --seed 0 --out" in args[2]
    assert kwargs["checkpoint"] == "best.keras"
    assert {k: kwargs["validation"][k] for k in ("fraction", "checkpoint_epoch", "valid_loss")} == {
        "fraction": 0.1, "checkpoint_epoch": 11, "valid_loss": 0.27,
    }  # fmt: skip
    (tmp_path / "weights" / "vit6_fashion_mnist").mkdir(parents=True)
    with pytest.raises(SystemExit):
        module.main(runs)
    assert "vit6_fashion_mnist exists; delete it to ship vit6_fashion_mnist anew" in capsys.readouterr().err
    with pytest.raises(SystemExit):  # the lab's other shipping command trains without a validation split
        presets.main(["vit6_fashion_mnist"])
    assert "is chosen on a validation split: ship it with python -m recipes.lab.vit6_selection_study --ship" in (
        capsys.readouterr().err
    )


def test_a_bert_cell_killed_after_a_chunk_resumes_on_the_batches_it_would_have_trained_on(tmp_path, monkeypatch):
    """`recipes/lab/bert_ptb_cell.py` at 2 layers, 2 chunks of 2 steps: a cell killed right after its first
    chunk's backup, then run again, resumes at the second chunk (told its epoch) and ends with the numbers of
    a cell never killed; the second chunk's batches are not the first's."""
    pytest.importorskip("keras_hub")
    from keras_tse.callbacks import run_backup
    from recipes.lab import bert_ptb_cell as cell

    rng = np.random.default_rng(0)
    ids = {split: rng.integers(0, 49, 400) for split in ("train", "valid", "test")}
    small = {"STEPS": 4, "CHUNK": 2, "BATCH": 4, "EVAL_WINDOWS": 8, "CURVE_EVERY": 1, "PROBE_WINDOWS": 4}
    for name, value in small.items():
        monkeypatch.setattr(cell, name, value)
    monkeypatch.setattr(cell, "corpus", lambda: (ids, 49))
    epochs = []
    real_set_epoch, real_save = cell.MaskedWindows.set_epoch, run_backup.RunBackup.save
    monkeypatch.setattr(cell.MaskedWindows, "set_epoch", lambda self, e: (epochs.append(e), real_set_epoch(self, e)))
    whole = cell.train_cell(str(tmp_path / "whole"), "post", 2, 1e-2, 0)
    assert epochs == [0, 1] and whole["steps"] == 4 and len(whole["loss_curve"].split(";")) == 4

    class Killed(Exception):
        pass

    def save_then_die(self, epoch, logs):
        real_save(self, epoch, logs)
        raise Killed

    monkeypatch.setattr(run_backup.RunBackup, "save", save_then_die)
    epochs.clear()
    with pytest.raises(Killed):
        cell.train_cell(str(tmp_path / "killed"), "post", 2, 1e-2, 0)
    monkeypatch.setattr(run_backup.RunBackup, "save", real_save)
    resumed = cell.train_cell(str(tmp_path / "killed"), "post", 2, 1e-2, 0)
    assert epochs == [0, 1]  # the killed call's first epoch, then the resumed call's second
    for key in ("train_loss", "valid_loss", "test_loss", "similarity_init", "similarity_end"):
        assert resumed[key] == pytest.approx(whole[key], rel=1e-5), key
    assert resumed["loss_curve"] == whole["loss_curve"]
    first, second = cell.MaskedWindows(ids["train"], 49, 0, 4, 2), cell.MaskedWindows(ids["train"], 49, 0, 4, 2)
    second.set_epoch(1)
    assert not np.array_equal(first[0][0]["token_ids"], second[0][0]["token_ids"])


def test_the_bert_table_says_so_far_until_an_arms_rate_grid_is_settled():
    """An arm whose seed-0 grid still has cells to run shows its best rate "so far"; once the grid brackets the
    best rate (lowest validation loss inside it), the rate stands alone."""
    study = lab_module("bert_ptb_study")

    def row(rate, valid_loss):
        return {"arm": "post_24", "layout": "post", "depth": "24", "learning_rate": f"{rate:g}", "seed": "0",
                "test_loss": "5.0", "test_accuracy": "0.2", "valid_loss": str(valid_loss),
                "similarity_init": "0.4", "similarity_end": "0.9", "steps": "8000", "backend": "jax",
                "machine": "cpu", "seconds": str(800 + 8000 * valid_loss)}  # fmt: skip

    def post_24(rows):
        return next(line for line in study.markdown_table(rows).splitlines() if line.startswith("| 24 | post |"))

    assert "| 0.001 so far | 0.001 |" in post_24([row(1e-3, 5.2)])
    settled = [row(1e-3, 5.2), row(3e-3, 5.1), row(1e-2, 5.3)]
    assert "| 0.003 | 0.001/0.003/0.01 | 1 (seed 0 only) |" in post_24(settled)
    # each kind of cell's time from its rows: 41,600-43,200 s over 8,000 steps, 5.20-5.40 s a step
    assert study.markdown_table(settled).endswith(
        "3 cells measured (`zoo/bert_ptb/results.csv`). A cell's time, from its row: 24 layers, jax, cpu: "
        "41,600-43,200 s a cell (5.30 (5.20-5.40) s a step; 3 of them)."
    )


def test_the_bert_seeds_table_pairs_each_seed_at_each_arms_rate_and_leaves_out_other_rates():
    """`seeds_table`: a row a seed, each arm's cell at its best rate only, the questions' differences A - B in
    test loss where both arms ran the seed, seed 0 marked as the one that chose the rates."""
    study = lab_module("bert_ptb_study")

    def row(arm, rate, seed, test_loss, valid_loss=5.0):
        return {"arm": arm, "depth": "24", "learning_rate": f"{rate:g}", "seed": str(seed),
                "test_loss": str(test_loss), "valid_loss": str(valid_loss),
                "similarity_init": "0.4", "similarity_end": "0.25"}  # fmt: skip

    rows = [row("post_24", 1e-3, 0, 5.1, 5.0), row("post_24", 3e-3, 0, 4.0, 5.5), row("post_24", 1e-3, 1, 4.2)]
    rows += [row("deescalate_24", 1e-3, 0, 4.9), row("deescalate_24", 1e-3, 1, 5.0), row("pre_24", 1e-3, 0, 5.3)]
    lines = study.seeds_table(rows, 24).splitlines()
    assert lines[0] == (
        "| seed | post_24 at 0.001 | deescalate_24 at 0.001 | pre_24 at 0.001 | deescalate_24 - post_24 | "
        "deescalate_24 - pre_24 | pre_24 - post_24 |"
    )
    # post-norm's 3e-3 cell (test loss 4.0) is above its best rate on validation: not in the table
    assert lines[2] == (
        "| 0 (chose the rates) | 5.100 (0.400 -> 0.250) | 4.900 (0.400 -> 0.250) | 5.300 (0.400 -> 0.250) | "
        "-0.20 | -0.40 | +0.20 |"
    )
    assert lines[3] == "| 1 | 4.200 (0.400 -> 0.250) | 5.000 (0.400 -> 0.250) |  | +0.80 |  |  |"
    assert len(lines) == 4
    assert study.seeds_tables(rows).endswith("\n\n48 layers: not run.")


def test_the_bert_verdicts_table_gives_each_verdict_its_difference_and_the_gap_its_seeds_could_see():
    """`verdicts_table` on five paired verdict seeds whose differences A - B are 0.1 ... 0.5 nat: the mean +0.30,
    the gap visible (t_{0.975,4} + t_{0.8,4}) * sd / sqrt(5) = (2.7764 + 0.9410) * 0.1581 / 2.2361 = 0.26, and
    the rule's verdict (p = 0.013, a family of one: the only question both of whose arms have seeds)."""
    study = lab_module("bert_ptb_study")

    def row(arm, seed, test_loss):
        return {"arm": arm, "depth": "24", "learning_rate": "0.001", "seed": str(seed), "test_loss": str(test_loss),
                "valid_loss": "5.0"}  # fmt: skip

    rows = [row("post_24", seed, 4.5 + 0.01 * seed) for seed in range(6)]
    rows += [row("deescalate_24", seed, 4.5 + 0.01 * seed + 0.1 * seed) for seed in range(6)]
    lines = study.verdicts_table(rows).splitlines()
    assert lines[2] == (
        "| at 24 layers: de-escalation against post-norm as published | deescalate_24 | post_24 | A loses to B "
        "| +0.30 | 0.26 |"
    )
    assert lines[3].endswith("| deescalate_24 | pre_24 | not measured | | |")
