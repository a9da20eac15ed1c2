"""How deep each layout trains, each at its own rate: the depth ladder's model and data at 160 blocks, a
learning-rate grid per layout on the rate-choosing seed (bracketed: the grid grows past an end that wins),
then verdict seeds at each layout's best rate. Resumable cell by cell.

    keras-tse study depth_rates --dry-run
    nice -n 19 keras-tse study depth_rates --jobs 2
    keras-tse study depth_rates --card

Choices where nothing is published:
- 2 epochs a cell (158 steps, the step schedule following the epoch count): the ladder's 4-epoch curves
  at 160 blocks part the layouts that train from those that fail within the first two epochs, and half
  the cell's cost lets the grid and the verdict seeds fit a 2-core CPU;
- the criterion for "trains", fixed before the cells ran: the final training loss below 1.5 (chance is
  ln 10 = 2.303) and the second epoch's training loss below the first's. Only training losses enter it and
  the rate's choice; the test set is scored but chooses nothing.
"""

import math
import os
import sys

from recipes.lab import ROOT, depth80_study, depth_ladder_study, engine, vit_study_card

RESULTS = os.path.join(ROOT, "zoo", "depth80_fashion_mnist", "depth_rates.csv")
DEPTH = 160
DATA = depth80_study.DATA
MODEL = (*depth_ladder_study.MODEL, "--depth", str(DEPTH))
EPOCHS = 2
TRAINS_BELOW = 1.5  # the criterion's final training loss
# de-escalation first: whether it trains at 160 blocks at some rate is the ladder's open question
LAYOUTS = ("deescalate", "post", "pre", "layerscale", "deescalate_layerscale", "deepnorm")
ARMS = {layout: ("--norm", layout) for layout in LAYOUTS}
PLAN = engine.Plan(arms=tuple(ARMS), grid=(1e-4, 3e-4, 1e-3), seeds=(0, 1, 2, 3, 4, 5), select_by="train_loss")
QUESTIONS = engine.questions("""
    deescalate              post         does de-escalation train where post-norm does not?
    deescalate              pre          de-escalation against pre-norm
    deescalate              layerscale   de-escalation against LayerScale
    deescalate_layerscale   layerscale   does de-escalation add to LayerScale?
""")


def trains(row):
    """The criterion: final training loss below TRAINS_BELOW and falling over the last epoch (a cell stopped on a
    non-finite loss, its `train_loss` infinite, does not train)."""
    curve = [float(value) for value in row["loss_curve"].split(";") if value]
    finished = float(row["train_loss"]) < float("inf") and len(curve) >= 2
    return finished and curve[-1] < TRAINS_BELOW and curve[-1] < curve[-2]


def markdown_table(rows):
    return rate_table(rows, RESULTS, LAYOUTS)


def rate_table(rows, results, layouts):
    """Seed 0 at every rate tried, per layout of `layouts`: final training loss, and whether the cell trains by
    the criterion; the test accuracy beside it, which chooses nothing; `results` the file they were read from."""
    rates = sorted({float(row["learning_rate"]) for row in rows})
    if not rates:
        return f"No cell has run yet (`{os.path.relpath(results, ROOT)}`)."
    lines = [f"| layout | {' | '.join(f'lr {r:g}' for r in rates)} |", "|---|" + "---:|" * len(rates)]
    for layout in layouts:
        seed0 = {float(r["learning_rate"]): r for r in rows if r["arm"] == layout and int(r["seed"]) == 0}
        cells = [_cell(seed0.get(rate)) for rate in rates]
        lines.append(f"| {layout} | {' | '.join(cells)} |")
    return "\n".join([*lines, "", *_rates_that_train(rows, layouts)]) + (
        f"\n\nSeed 0, final training loss (test accuracy), **trains** where the criterion holds; {len(rows)} cells "
        f"measured (`{os.path.relpath(results, ROOT)}`)."
    )


def rates_that_train(rows, layout):
    """(the seed-0 rates at which `layout` trains, those at which it does not), each sorted."""
    seed0 = [row for row in rows if row["arm"] == layout and int(row["seed"]) == 0]
    yes = sorted(float(row["learning_rate"]) for row in seed0 if trains(row))
    no = sorted(float(row["learning_rate"]) for row in seed0 if not trains(row))
    return yes, no


def _rates_that_train(rows, layouts):
    lines = []
    for layout in layouts:
        yes, no = rates_that_train(rows, layout)
        if yes or no:
            said = f"trains at {', '.join(f'{r:g}' for r in yes)}" if yes else "trains at no rate tried"
            lines.append(f"- {layout}: {said}" + (f"; not at {', '.join(f'{r:g}' for r in no)}" if no else ""))
    return lines


def _cell(row):
    if row is None:
        return "not run"
    loss, accuracy = float(row["train_loss"]), float(row["test_accuracy"])
    if not math.isfinite(loss):  # stopped on a non-finite loss before its first epoch ended
        return "diverged"
    return f"{'**trains** ' if trains(row) else ''}{loss:.3f} ({accuracy:.1%})"


FIGURE = os.path.join(os.path.dirname(RESULTS), "depth_rates.png")


def titles(depth, seeds):
    """(the figure's title, the study's) of this study's cells at `depth` blocks; `seeds` says which seeds run."""
    figure = f"ViT, depth {depth}, width 32, Fashion-MNIST 10k, remat, {EPOCHS} epochs" + (seeds and f", {seeds}")
    return figure, f"How deep each layout trains at its own rate: {depth} blocks, a rate grid a layout, " + (
        seeds or "verdict seeds"
    )


FIGURE_TITLE, TITLE = titles(DEPTH, "")
CELLS_AT_ONCE = "two cells at once"
CARD = os.path.join(ROOT, "zoo", "depth80_fashion_mnist.md")
STUDY = vit_study_card.study_of(sys.modules[__name__])
