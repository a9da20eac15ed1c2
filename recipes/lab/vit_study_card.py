"""The ViT classifier studies (the depth-80 study on a CPU, Fig. 6 at the paper's size on a GPU, the
fine-tune study): each is a plan module of data alone (its DATA, MODEL and ARMS flags, EPOCHS, PLAN,
RESULTS, QUESTIONS, FIGURE_TITLE, CELLS_AT_ONCE, TITLE, CARD and FIGURE where the figure is not RESULTS's
name ending in .png), made a study of the engine
here (`study_of`), its cells run by `run_cell`, its card's tables and figure drawn from its result file alone.

    keras-tse study depth80 --card    # the tables (generated blocks of the card) and the loss-curve figure

Each arm is read at its best learning rate (`engine.best_rate` under the plan: the seed-0 rate of lowest
final training loss); its seeds there are averaged; a verdict follows the verdict rule of zoo/README.md
on the verdict seeds (seed 0 chose the rate).
"""

import csv
import functools
import os

import numpy as np

from recipes.lab import engine
from recipes.lab.engine import spread

# The columns of a ViT classifier study's row: the run's measures and its curves.
FIELDS = (
    "arm", "learning_rate", "seed", "epochs", "train_loss", "test_loss", "test_accuracy", "best_test_accuracy",
    "similarity_init", "similarity_end", "loss_curve", "test_accuracy_curve", "seconds", "backend",
    "machine", *engine.LEARNED_TAU,
)  # fmt: skip


CLASSES = 10  # every ViT study here classifies a balanced 10-class set (Fashion-MNIST, MNIST, CIFAR-10)


def study_of(plan):
    """The engine's study of plan module `plan` (`engine.study_of`), its cells run and its figure drawn here."""
    study = engine.study_of(
        plan, run_cell=functools.partial(run_cell, plan), fields=FIELDS, figure=lambda: plot(study.read_rows(), plan)
    )
    return study


def run_cell(plan, runs, arm, learning_rate, seed):
    """One `keras-tse train vit` run (it resumes a killed one) with the plan's flags for `arm` (the layout
    named `--norm NAME`); its row."""
    flags = (*plan.DATA, *plan.MODEL, *plan.ARMS[arm])
    out = os.path.join(runs, f"{arm}_lr{learning_rate:g}_s{seed}")
    argv = [*flags, "--learning-rate", f"{learning_rate:g}", "--seed", str(seed), "--epochs", str(plan.EPOCHS)]
    seconds = engine.run_recipe("vit", argv, out, f"{arm} lr {learning_rate:g} seed {seed}")
    variant = os.path.join(out, flags[flags.index("--norm") + 1])
    summary = engine.read_summary(variant)
    with open(os.path.join(variant, "history.csv"), newline="") as handle:
        history = list(csv.DictReader(handle))
    return {
        "arm": arm,
        "learning_rate": f"{learning_rate:g}",
        "seed": seed,
        **engine.classifier_columns(summary),
        "best_test_accuracy": summary["best_test_accuracy"],
        "loss_curve": ";".join(f"{float(h['loss']):.5g}" for h in history),
        "test_accuracy_curve": ";".join(f"{float(h['val_accuracy']):.4f}" for h in history),
        "seconds": seconds,
        "backend": "jax",
    }


def _floats(rows, column):
    return [float(row[column]) for row in rows]


def best_cells(rows, study):
    """arm -> (best rate, its rows), for every arm with a seed-0 row."""
    found = {arm: engine.at_best(rows, arm, study.STUDY.plan_of(arm)) for arm in study.ARMS}
    return {arm: cell for arm, cell in found.items() if cell[0] is not None}


def _grid_state(rows, arm, rate, grid):
    if len(grid) == 1:  # a plan of one rate chooses none: no edge to be at
        return f"fixed at {grid[0]:g}"
    tried = sorted({float(r["learning_rate"]) for r in rows if r["arm"] == arm and int(r["seed"]) == 0})
    if len(tried) < len(grid):
        return f"grid {len(tried)} of {len(grid)}"
    inside = tried[0] < rate < tried[-1]
    return (
        "inside " + "/".join(f"{t:g}" for t in tried)
        if inside
        else "at the edge of " + "/".join(f"{t:g}" for t in tried)
    )


def last_epoch_fall(row):
    """How far from flat a run's training-loss curve ends: its fall over the last epoch, in percent of
    the epoch before's loss (the schedule's x0.2 steps at 70% and 90% fall in the last two epochs)."""
    curve = [float(v) for v in row["loss_curve"].split(";")]
    return 100 * (curve[-2] - curve[-1]) / curve[-2]


def results_table(rows, study):
    """One line per arm at its best rate: losses, accuracy and similarity, seed means (min-max) over all its
    seeds there, the rate-choosing seed 0 included (the verdicts use the others alone), as the header says."""
    cells = best_cells(rows, study)
    lines = [
        "| arm | best lr | rates | seeds (seed 0 included) | final train loss | last epoch's fall (%) | test accuracy "
        "| similarity at init | similarity at end | learned tau (block mean) |",
        "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for arm in study.ARMS:
        if arm not in cells:
            lines.append(f"| {arm} | not run | | 0 | | | | | | |")
            continue
        rate, members = cells[arm]
        learned = spread(_floats(members, "learned_tau_mean"), 4) if members[0]["learned_tau_mean"] else ""
        lines.append(
            f"| {arm} | {rate:g} | {_grid_state(rows, arm, rate, study.STUDY.plan_of(arm).grid)} | {len(members)} | "
            f"{spread(_floats(members, 'train_loss'))} | {spread([last_epoch_fall(r) for r in members], 1)} | "
            f"{spread(_floats(members, 'test_accuracy'), 4)} | "
            f"{spread(_floats(members, 'similarity_init'), 4)} | {spread(_floats(members, 'similarity_end'), 4)} "
            f"| {learned} |"
        )
    return "\n".join(lines)


def grid_table(rows, study):
    """Every finished cell: arm, rate, seed, final train loss and test accuracy, seconds and machine; then
    the range of a cell's seconds on each machine."""
    lines = [
        "| arm | lr | seed | final train loss | test accuracy | seconds | machine |",
        "|---|---:|---:|---:|---:|---:|---|",
    ]
    for row in sorted(
        rows, key=lambda r: (list(study.ARMS).index(r["arm"]), float(r["learning_rate"]), int(r["seed"]))
    ):
        lines.append(
            f"| {row['arm']} | {float(row['learning_rate']):g} | {row['seed']} | {float(row['train_loss']):.4f} | "
            f"{float(row['test_accuracy']):.4f} | {float(row['seconds']):.0f} | {row['machine']} |"
        )
    costs = "; ".join(f"{machine}: {span}" for machine, span in cell_costs(rows))
    if not rows:
        return "No cell has finished yet."
    return "\n".join(lines) + f"\n\nSeconds a cell, {study.CELLS_AT_ONCE}, by machine: {costs}."


def verdicts_table(rows, study):
    """Each of the card's questions answered by the verdict rule on final training loss and test accuracy:
    each arm at the rate its selection seed chose, judged on the other seeds, the table one family."""
    from recipes.lab import verdicts

    cells = best_cells(rows, study)
    asked, comparisons = [], []
    for a, b, question in study.QUESTIONS:
        if a in cells and b in cells:
            for column, lower in (("train_loss", True), ("test_accuracy", False)):
                seeds = [engine.verdict_seeds(cells[arm][1], column) for arm in (a, b)]
                if min(map(len, seeds)) >= verdicts.MIN_SEEDS:
                    asked.append((question, column))
                    diverged = verdicts.class_frequency_value(column, CLASSES)
                    comparisons.append(verdicts.measure_seeds(*seeds, lower, metric=column, diverged=diverged))
    said = dict(zip(asked, verdicts.stated(comparisons)))
    visible = dict(zip(asked, (c.smallest_visible_effect() for c in comparisons)))
    lines = [
        "| question | A | B | on final train loss | on test accuracy | smallest gap visible (loss, accuracy) |",
        "|---|---|---|---|---|---|",
    ]
    for a, b, question in study.QUESTIONS:
        columns = ("train_loss", "test_accuracy")
        answer = [verdicts.table_cell(said.get((question, c), "not measured")) for c in columns]
        gaps = [f"{visible[(question, c)]:.3f}" if (question, c) in visible else "" for c in columns]
        lines.append(f"| {question} | {a} | {b} | {answer[0]} | {answer[1]} | {', '.join(gaps)} |")
    return "\n".join(lines) + (
        "\n\nThe smallest gap visible: the difference each comparison's verdict seeds would find 80% of the "
        "time at 5% asked alone, given their spread (`Comparison.smallest_visible_effect`); as one of the "
        f"table's {2 * len(study.QUESTIONS)} comparisons (Holm) it takes more."
    )


def plot(rows, study):
    """Per arm, the seed-mean training loss per epoch at its best rate, drawn into the study's FIGURE;
    None, and no file written, while no arm has a row."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    cells = best_cells(rows, study)
    if not cells:
        return None
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for i, (arm, (rate, members)) in enumerate(cells.items()):
        curves = np.array([[float(v) for v in r["loss_curve"].split(";")] for r in members])
        ax.plot(
            np.arange(1, curves.shape[1] + 1),
            curves.mean(axis=0),
            marker="o",
            linestyle="-" if i < 10 else "--",  # past the ten colours of the cycle, a colour comes back dashed
            label=f"{arm} ({rate:g}, n={len(members)})",
        )
    ax.set(xlabel="epoch", ylabel="training loss (seed mean)")
    ax.set_title(study.FIGURE_TITLE, fontsize=9)  # the longest title fits the figure's width at 9 pt
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(figure_path(study), dpi=110)
    plt.close(fig)
    return figure_path(study)


def cell_costs(rows):
    """(machine, "fewest-most s (n cells)") for the machines that ran `rows`, in name order; a row whose
    seconds are blank (a cell whose whole time was not measured) is counted apart."""
    by_machine = {}
    for row in rows:
        by_machine.setdefault(row["machine"], []).append(float(row["seconds"]) if row["seconds"] else None)
    costs = []
    for machine, seconds in sorted(by_machine.items()):
        timed = [s for s in seconds if s is not None]
        untimed = len(seconds) - len(timed)
        if not timed:
            costs.append((machine, f"{untimed} not timed whole"))
            continue
        more = f"; {untimed} more not timed whole" if untimed else ""
        costs.append((machine, f"{min(timed):,.0f}-{max(timed):,.0f} s ({len(timed)} cells{more})"))
    return costs


def figure_path(study):
    """Where the study's figure goes: its FIGURE, else beside its result file under the same name."""
    return getattr(study, "FIGURE", None) or os.path.splitext(study.RESULTS)[0] + ".png"
