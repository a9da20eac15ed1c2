"""The literature's depth fixes one rung down: `depth_fixes`'s arms, questions, data and epochs at 320 blocks, the
plan the GPU runs (a 320-block cell is past what the 2-core CPU affords on verdict seeds). Resumable cell by cell.

    keras-tse study depth_fixes320 --dry-run
    nice -n 19 keras-tse study depth_fixes320 --jobs 4          # on a GPU machine (tests/gpu_plan.sh)
    keras-tse study depth_fixes320 --card

The six fixes: a bracketed rate grid on seed 0 (`depth_rates320`'s, 1e-4 to 1e-3, extended where a best rate sits
at an edge), then seeds 1-5 at the best. `depth_rates`'s six layouts: seeds 1-5 at the rates `depth_rates320`
chose on its seed 0, frozen (post-norm's best sat at that grid's lowest rate, 1.11e-5, and stays there: a
reference, not a fix under test). Choices where nothing is published: those of `depth_fixes`.
"""

import os
import sys

from recipes.lab import ROOT, depth_fixes_study, depth_rates320_study, depth_rates_study, vit_study_card

# the arms, questions, data, epochs and criterion are depth_fixes'; the card and its pace too
from recipes.lab.depth_fixes_study import (  # noqa: F401  (the plan's constants)
    ARMS,
    CARD,
    CELLS_AT_ONCE,
    CLAIM_METRIC,
    DATA,
    EPOCHS,
    LAYOUTS,
    QUESTIONS,
    trains,
)

RESULTS = os.path.join(ROOT, "zoo", "depth80_fashion_mnist", "depth_fixes320.csv")
DEPTH = depth_rates320_study.DEPTH
MODEL = (*depth_fixes_study.MODEL, "--depth", str(DEPTH))  # the last --depth is the one argparse keeps
REFERENCE_RATES = {
    "deescalate": 1e-4,
    "layerscale": 3e-3,
    "post": 1.11e-5,
    "pre": 3e-4,
    "deepnorm": 3e-4,
    "deescalate_layerscale": 1e-3,
}
PARTS = depth_fixes_study.parts(depth_rates320_study.PLAN.grid, REFERENCE_RATES, "depth_rates320")


def markdown_table(rows):
    return depth_rates_study.rate_table(rows, RESULTS, LAYOUTS)


FIGURE = os.path.join(os.path.dirname(RESULTS), "depth_fixes320.png")
FIGURE_TITLE, _ = depth_rates_study.titles(DEPTH, "")
TITLE = f"The literature's depth fixes at {DEPTH} blocks, each at its own rate"
STUDY = vit_study_card.study_of(sys.modules[__name__])
