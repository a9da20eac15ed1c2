"""How deep each layout trains at its own rate, one rung down: the `depth_rates` study's layouts, cell,
grid and criterion at 320 blocks, seed 0 alone (the rate grid a layout; the verdict seeds stay at 160
blocks, where a 2-core CPU affords them). Resumable cell by cell.

    keras-tse study depth_rates320 --dry-run
    nice -n 19 keras-tse study depth_rates320 --jobs 2
    keras-tse study depth_rates320 --card

Choices where nothing is published: those of `depth_rates` (2 epochs a cell, the criterion fixed before
the cells ran); no verdict is stated here, since one seed a cell cannot carry one.
"""

import os
import sys

from recipes.lab import ROOT, depth_ladder_study, depth_rates_study, engine, vit_study_card

# the plan's constants, the card and its pace are depth_rates'
from recipes.lab.depth_rates_study import ARMS, CARD, CELLS_AT_ONCE, DATA, EPOCHS, LAYOUTS, trains  # noqa: F401

RESULTS = os.path.join(ROOT, "zoo", "depth80_fashion_mnist", "depth_rates320.csv")
DEPTH = 320
MODEL = (*depth_ladder_study.MODEL, "--depth", str(DEPTH))
PLAN = engine.Plan(arms=LAYOUTS, grid=depth_rates_study.PLAN.grid, seeds=(0,), select_by="train_loss")


def markdown_table(rows):
    return depth_rates_study.rate_table(rows, RESULTS, depth_rates_study.LAYOUTS)


FIGURE = os.path.join(os.path.dirname(RESULTS), "depth_rates320.png")
FIGURE_TITLE, TITLE = depth_rates_study.titles(DEPTH, "seed 0")
STUDY = vit_study_card.study_of(sys.modules[__name__])
