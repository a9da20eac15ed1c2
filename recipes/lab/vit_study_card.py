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

from keras_tse.run_files import new_figure, save_figure
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
    """The engine's study of plan module `plan` (`engine.study_of`), its cells run, its figure and its card's
    blocks (`CARD_BLOCKS`, each named after the study) drawn here."""
    name = plan.__name__.rpartition(".")[2].removesuffix("_study")
    study = engine.study_of(
        plan,
        run_cell=functools.partial(run_cell, plan),
        fields=FIELDS,
        figure=lambda: plot(study.read_rows(), plan),
        families=lambda rows: families(rows, plan),
        tables={f"{name}_{block}": functools.partial(draw, study=plan) for block, draw in CARD_BLOCKS.items()},
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
    """arm -> (best rate, its rows), for every arm with a seed-0 row or a rate its plan fixes."""
    found = {arm: engine.at_best(rows, arm, study.STUDY.plan_of(arm)) for arm in study.ARMS}
    return {arm: cell for arm, cell in found.items() if cell[1]}


def _grid_state(rows, arm, rate, plan):
    grid = plan.grid
    if arm in plan.rates:
        return f"fixed at {rate:g} (another study chose it)"
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
            f"| {arm} | {rate:g} | {_grid_state(rows, arm, rate, study.STUDY.plan_of(arm))} | {len(members)} | "
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


VERDICT_COLUMNS = (("train_loss", True), ("test_accuracy", False))  # each question's two measures: lower is better?


def _family(rows, study, questions, columns):
    """(A, B, column, `Comparison`) of each of `questions` on each of `columns` ((column, lower is better))
    whose arms have their verdict seeds, each arm at the rate its selection seed chose."""
    from recipes.lab import verdicts

    cells = best_cells(rows, study)
    found = []
    for a, b, _ in questions:
        if a in cells and b in cells:
            for column, lower in columns:
                seeds = [engine.verdict_seeds(cells[arm][1], column) for arm in (a, b)]
                if min(map(len, seeds)) >= verdicts.MIN_SEEDS:
                    diverged = verdicts.class_frequency_value(column, CLASSES)
                    comparison = verdicts.measure_seeds(*seeds, lower, metric=column, diverged=diverged)
                    found.append((a, b, column, comparison))
    return found


def _central(study):
    """The study's central questions (`CENTRAL_QUESTIONS`, decided in a family of their own on
    `CENTRAL_METRIC`), and its other questions."""
    central = getattr(study, "CENTRAL_QUESTIONS", ())
    pairs = {(a, b) for a, b, _ in central}
    return central, [q for q in study.QUESTIONS if (q[0], q[1]) not in pairs]


def _central_family(rows, study):
    """The central questions' family: each on `CENTRAL_METRIC`, a loss (lower is better)."""
    return _family(rows, study, _central(study)[0], ((study.CENTRAL_METRIC, True),))


def families(rows, study):
    """The card's verdict families, each decided together (Holm): the central questions on the central
    metric, where the study has them, then the other questions on each of `VERDICT_COLUMNS`."""
    central, rest = _central(study)
    first = [_central_family(rows, study)] if central else []
    return [*first, _family(rows, study, rest, VERDICT_COLUMNS)]


def verdicts_table(rows, study):
    """Each of the card's questions but the central ones answered by the verdict rule on final training loss and
    test accuracy: each arm at the rate its selection seed chose, judged on the other seeds, the table one family."""
    from recipes.lab import verdicts

    central, rest = _central(study)
    measured = families(rows, study)[-1]
    comparisons = [c for *_, c in measured]
    asked = [(a, b, column) for a, b, column, _ in measured]
    said = dict(zip(asked, verdicts.stated(comparisons)))
    visible = dict(zip(asked, (c.smallest_visible_effect() for c in comparisons)))
    lines = [
        "| question | A | B | on final train loss | on test accuracy | smallest gap visible (loss, accuracy) |",
        "|---|---|---|---|---|---|",
    ]
    for a, b, question in rest:
        columns = [column for column, _ in VERDICT_COLUMNS]
        answer = [verdicts.table_cell(said.get((a, b, c), "not measured")) for c in columns]
        gaps = [f"{visible[(a, b, c)]:.3f}" for c in columns if (a, b, c) in visible]
        lines.append(f"| {question} | {a} | {b} | {answer[0]} | {answer[1]} | {', '.join(gaps) or 'not measured'} |")
    fewest = min((min(c.seeds) for c in comparisons), default=0)
    rank_note = (
        f" With {fewest} verdict seeds an arm no exact rank or sign-flip test can go below p = "
        f"{2 / 2**fewest:.4f}, above the family's threshold: each verdict here rests on the t-test's normality."
        if 0 < fewest <= 6
        else ""
    )
    return "\n".join(lines) + (
        "\n\nThe smallest gap visible: the difference each comparison's verdict seeds would find 80% of the "
        "time at 5% asked alone, given their spread (`Comparison.smallest_visible_effect`); as one of the "
        f"table's {len(comparisons) or len(VERDICT_COLUMNS) * len(rest)} comparisons (Holm) it takes more.{rank_note}"
        + (f" The central questions ({len(central)}) are decided in their own family." if central else "")
    )


# A ViT study card's generated blocks, each "<study>_<block>": block -> the function of (rows, plan) drawing it.
CARD_BLOCKS = {"results": results_table, "grid": grid_table, "verdicts": verdicts_table}


def _p(p):
    """A p-value to four places, or in scientific notation below 0.001."""
    return f"{p:.4f}" if p >= 1e-3 else f"{p:.1e}"


def central_table(rows, study):
    """The central questions, one family on `CENTRAL_METRIC`, decided twice: by the verdict rule (Student's t,
    Holm with the equivalence tests) and by the exact paired sign-flip test (Holm), which needs no normality;
    each with the seed-mean difference A - B (of the loss: below 0 favours A) and, as a description, the
    test accuracy's."""
    from recipes.lab import verdicts

    central, _ = _central(study)
    cells = best_cells(rows, study)
    measured = _central_family(rows, study)
    said = dict(zip([(a, b) for a, b, *_ in measured], verdicts.stated([c for *_, c in measured])))
    seeds = {
        (a, b): [engine.verdict_seeds(cells[arm][1], study.CENTRAL_METRIC) for arm in (a, b)]
        for a, b, _ in central
        if (a, b) in said
    }
    paired = {key: pair for key, pair in seeds.items() if sorted(pair[0]) == sorted(pair[1])}
    ordered = [[[d[k] for k in sorted(d)] for d in pair] for pair in paired.values()]
    flips = dict(zip(paired, verdicts.sign_flip_verdicts(ordered, metric=study.CENTRAL_METRIC)))
    comparisons = {(a, b): c for a, b, _, c in measured}
    lines = [
        "| question | A | B | verdict seeds | A - B, final train loss | t-test p | the rule | sign-flip p | "
        "sign-flip test | A - B, test accuracy (description) |",
        "|---|---|---|---:|---:|---:|---|---:|---|---:|",
    ]
    for a, b, question in central:
        c = comparisons.get((a, b))
        if c is None:
            lines.append(f"| {question} | {a} | {b} | | | | not measured | | | |")
            continue
        accuracy = [engine.verdict_seeds(cells[arm][1], "test_accuracy") for arm in (a, b)]
        gap = np.mean(list(accuracy[0].values())) - np.mean(list(accuracy[1].values()))
        flip = flips.get((a, b))
        shown = "| | unpaired |" if flip is None else f"| {_p(flip[1])} | {verdicts.table_cell(flip[2])} |"
        lines.append(
            f"| {question} | {a} | {b} | {min(c.seeds)} | {-c.estimate:+.3f} | {_p(c.p_difference)} | "
            f"{verdicts.table_cell(said[(a, b)])} {shown} {100 * gap:+.1f} points |"
        )
    return "\n".join(lines) + (
        f"\n\nOne family of {len(measured)} comparisons, each test at Holm's thresholds (the smallest p against "
        f"0.05 / {len(measured)}); a verdict also needs the gap past the minimum effect (0.03 nats). The "
        f"sign-flip test enumerates all 2^n sign flips of the n paired differences: its smallest p is 2 / 2^n."
    )


def plot(rows, study):
    """Per arm, the seed-mean training loss per epoch at its best rate, drawn into the study's FIGURE;
    None, and no file written, while no arm has a row."""
    cells = best_cells(rows, study)
    if not cells:
        return None
    fig, (ax,) = new_figure((7, 4.5))
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
    save_figure(fig, figure_path(study), dpi=110)
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
