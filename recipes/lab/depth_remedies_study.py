"""Why de-escalation stops at 160 blocks at 80's rate, and what the literature's remedies do there: the
`depth_rates` cell (160 blocks, 2 epochs, its criterion for "trains") at the one rate where 80 blocks train
and 160 stall (1e-3), de-escalation as it failed and with each remedy, seeds 0-5. Resumable cell by cell.

    keras-tse study depth_remedies --dry-run
    nice -n 19 keras-tse study depth_remedies --jobs 2
    keras-tse study depth_remedies --card

The remedies (one change each, everything else the failing cell's):
- warmup: the rate rises linearly from 0 over the first 16 steps (a tenth of the cell's 158), as the
  language-model study warms up (zoo/ptb_transformer_xl16.md);
- a smaller tau: eq. (21) at tau 0.5 and 0.25 (the paper's Fig. 5 range), less of the token mean removed;
- LayerScale with de-escalation (each branch scaled by a learned 1e-4 at init, CaiT's): the depth-scaled
  residual the literature pairs with depth, here at this rate.

Choices where nothing is published: the rate is fixed (no grid: the question is the failing rate's), so
every seed is a verdict seed but seed 0, kept out as everywhere (`recipes/lab/engine.py`); the criterion
and the cell are `depth_rates`'s, fixed before those cells ran.
"""

import os
import sys

from recipes.lab import ROOT, depth_rates_study, engine, vit_study_card
from recipes.lab.depth_rates_study import DATA, EPOCHS, MODEL, trains  # noqa: F401  (the plan's constants)

RESULTS = os.path.join(ROOT, "zoo", "depth80_fashion_mnist", "depth_remedies.csv")
RATE = 1e-3
WARMUP_STEPS = 16
ARMS = {
    "deescalate": ("--norm", "deescalate"),
    "deescalate_warmup": ("--norm", "deescalate", "--warmup-steps", str(WARMUP_STEPS)),
    "deescalate_tau0.5": ("--norm", "deescalate", "--tau", "0.5"),
    "deescalate_tau0.25": ("--norm", "deescalate", "--tau", "0.25"),
    "deescalate_layerscale": ("--norm", "deescalate_layerscale"),
}
LAYOUTS = tuple(ARMS)
PLAN = engine.Plan(arms=LAYOUTS, grid=(RATE,), seeds=(0, 1, 2, 3, 4, 5), select_by="train_loss", bracket=False)
QUESTIONS = engine.questions("""
    deescalate_warmup       deescalate   does warmup rescue de-escalation at 160 blocks and 1e-3?
    deescalate_tau0.5       deescalate   does tau 0.5 rescue it?
    deescalate_tau0.25      deescalate   does tau 0.25 rescue it?
    deescalate_layerscale   deescalate   does LayerScale rescue it?
""")


def markdown_table(rows):
    """Each arm's seeds at 1e-3: final training loss, **trains** where the criterion holds."""
    lines = ["| arm | seeds | final training loss by seed | seeds that train |", "|---|---:|---|---:|"]
    for arm in LAYOUTS:
        mine = sorted((r for r in rows if r["arm"] == arm), key=lambda r: int(r["seed"]))
        cells = ", ".join(f"{'**' if trains(r) else ''}{float(r['train_loss']):.3f}{'**' if trains(r) else ''}"
                          for r in mine)  # fmt: skip
        lines.append(f"| {arm} | {len(mine)} | {cells or 'not run'} | {sum(map(trains, mine))} |")
    return "\n".join(lines) + (
        f"\n\nAt lr {RATE:g}, 160 blocks, {EPOCHS} epochs; bold: trains by the criterion (`depth_rates`); "
        f"{len(rows)} cells measured (`{os.path.relpath(RESULTS, ROOT)}`)."
    )


FIGURE = os.path.join(os.path.dirname(RESULTS), "depth_remedies.png")
FIGURE_TITLE = f"ViT, depth {depth_rates_study.DEPTH}, width 32, Fashion-MNIST 10k, lr {RATE:g}, {EPOCHS} epochs"
CELLS_AT_ONCE = "two cells at once"
TITLE = "Why de-escalation stops at 160 blocks at 80's rate: warmup, a smaller tau, LayerScale, at 1e-3"
CARD = os.path.join(ROOT, "zoo", "depth80_fashion_mnist.md")
STUDY = vit_study_card.study_of(sys.modules[__name__])
