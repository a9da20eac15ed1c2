"""The literature's depth fixes beside de-escalation, in the cell where post-norm fails: `depth_rates`'s cell (160
blocks, width 32, Fashion-MNIST 10k, 2 epochs, its criterion for "trains"), each fix at its own rate (a bracketed
grid on seed 0), then verdict seeds 1-5 at that rate. Resumable cell by cell.

    keras-tse study depth_fixes --dry-run
    nice -n 19 keras-tse study depth_fixes --jobs 2
    keras-tse study depth_fixes --card

The arms: ReZero, ContraNorm (after each block, the authors' s = 0.1, t = 1), centred attention ((P - U) V in
every head), Sub-LN, Admin (omega as the authors' package sets it) and sigma-reparam; post-norm, pre-norm,
de-escalation, DeepNorm, LayerScale and de-escalation + LayerScale ran this cell in `depth_rates`
(`depth_rates.csv`, the same data, model, epochs, rates and seeds, an earlier code version); all six run again
here (the part "references") on the verdict seeds at the rates `depth_rates` chose, so that every question
compares rows of one code version.

Choices where nothing is published: the cell and the criterion are `depth_rates`'s, fixed before its cells ran;
every arm recomputes its blocks in the backward pass (`--remat`, as `depth_rates`: memory only, the numbers
the same) but sigma-reparam, whose training step updates each kernel's singular-vector estimate, which a
recomputed block may not write (its 160 blocks fit without it).
"""

import os
import sys

from recipes.lab import ROOT, depth_rates_study, engine, vit_study_card
from recipes.lab.depth_rates_study import DATA, DEPTH, EPOCHS, trains  # noqa: F401  (the plan's constants)

RESULTS = os.path.join(ROOT, "zoo", "depth80_fashion_mnist", "depth_fixes.csv")
MODEL = tuple(flag for flag in depth_rates_study.MODEL if flag != "--remat")
LAYOUTS = ("rezero", "contranorm", "centred_attention", "subln", "admin", "sigma_reparam")
ARMS = {layout: ("--norm", layout, *(() if layout == "sigma_reparam" else ("--remat",))) for layout in LAYOUTS}


def parts(grid, reference_rates, chosen_by):
    """The plan's two parts at one depth: the six fixes, a bracketed rate `grid` on seed 0 then seeds 1-5 at the
    best; the references on seeds 1-5 at `reference_rates` ({layout: rate}, frozen), which `chosen_by` chose."""
    # three extensions, not the engine's two: ReZero's residual gains start at 0 and its seed 0 still improved at
    # the second extension (9e-3), and an arm whose best stays at an edge gets no verdict seeds
    fixes = engine.Plan(arms=LAYOUTS, grid=grid, seeds=(0, 1, 2, 3, 4, 5), max_extensions=3, select_by="train_loss")
    references = engine.Plan(
        arms=tuple(reference_rates), grid=(), seeds=(1, 2, 3, 4, 5), bracket=False, rates=reference_rates
    )
    return {
        "fixes": (fixes, "the six fixes: a bracketed rate grid on seed 0, then seeds 1-5 at the best rate"),
        "references": (references, f"depth_rates' six layouts, seeds 1-5 at the rates {chosen_by} chose"),
    }


# The references, rerun here so that a verdict compares rows of one code version: `depth_rates`'s six layouts,
# each at the rate `depth_rates` chose on its seed 0, frozen, on the verdict seeds alone (its seed-0 grid is not
# run again: the rates it chose are the plan's, fixed before these rows).
REFERENCE_RATES = {
    "deescalate": 3e-4,
    "layerscale": 3e-3,
    "post": 1e-4,
    "pre": 3e-4,
    "deepnorm": 1e-3,
    "deescalate_layerscale": 3e-3,
}
PARTS = parts((1e-4, 3e-4, 1e-3), REFERENCE_RATES, "depth_rates")
ARMS.update({layout: ("--norm", layout, "--remat") for layout in REFERENCE_RATES})
QUESTIONS = engine.questions("""
    centred_attention   deescalate          centring inside attention against eq. (21) after the block
    contranorm          deescalate          ContraNorm against de-escalation, its large-temperature limit
    contranorm          centred_attention   ContraNorm after the block against centring inside attention
    rezero              layerscale          ReZero against LayerScale
    subln               admin               Sub-LN against Admin
    sigma_reparam       rezero              sigma-reparam against ReZero
    deescalate          post                de-escalation against post-norm, the paper's claim in this cell
    deescalate          pre                 de-escalation against pre-norm
    deepnorm            layerscale          DeepNorm against LayerScale
""")


def markdown_table(rows):
    return depth_rates_study.rate_table(rows, RESULTS, LAYOUTS)


FIGURE = os.path.join(os.path.dirname(RESULTS), "depth_fixes.png")
FIGURE_TITLE, _ = depth_rates_study.titles(DEPTH, "")
TITLE = f"The literature's depth fixes at {DEPTH} blocks, each at its own rate"
CELLS_AT_ONCE = "two cells at once"
CARD = os.path.join(ROOT, "zoo", "depth80_fashion_mnist.md")
CLAIM_METRIC = "train_loss"  # what a verdict claim about its arms is judged on (recipes/lab/verdict_claims.py)
STUDY = vit_study_card.study_of(sys.modules[__name__])
