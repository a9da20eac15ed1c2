"""The paper's depth on a CPU: 80-block ViTs on a Fashion-MNIST subset, nine arms, a learning-rate grid
per arm on a selection seed, then the verdict seeds at each arm's best rate. Resumable cell by cell.

    nice -n 19 keras-tse study depth80 [--jobs 2] [--runs runs/depth80]
    keras-tse study depth80 --card      # its tables and figure, from the rows

Each cell is one run of `keras-tse train vit` (JAX, `--scan`) in its own folder under
`--runs` (a killed cell resumes from its last saved epoch); a finished cell becomes one row of
`zoo/depth80_fashion_mnist/results.csv`, which is all the card (`vit_study_card`) reads. This module is
the plan, data alone; `vit_study_card` runs its cells and draws its card.

The plan (the engine's) follows from the rows: an arm first runs seed 0 at each rate of the grid;
if its best rate (the lowest final training loss: trainability is the paper's question, and the test set
is not used to choose) lies at an end of what was tried, the grid grows by a factor 3 past that end (at
most twice); once the best is inside, seeds 1-5 run at it (seed 0 chose the rate, so no verdict uses it).
"""

import os
import sys

from recipes.lab import (
    ROOT,  # noqa: E402
    engine,
    vit_study_card,
)

RESULTS = os.path.join(ROOT, "zoo", "depth80_fashion_mnist", "results.csv")

# Width 32, 4 heads of 8, patch 7 (16 patches and the class token), depth 80: the paper's depth at a
# width a 2-core CPU trains (about 75 s an epoch of 10,000 images with JAX and scan, measured).
MODEL = ("--depth", "80", "--hidden-dim", "32", "--num-heads", "4", "--patch-size", "7", "--scan")
# every weight decayed (`--weight-decay-rule all`) and no augmentation: what the study's first rows trained
# under, kept so that every row is comparable
DATA = ("--dataset", "fashion_mnist", "--train-size", "10000", "--batch-size", "128", "--no-download",
        "--weight-decay-rule", "all", "--augment", "none")  # fmt: skip
EPOCHS = 4  # 316 steps; the step schedule (x0.2 at 70% and 90%, Sec. 3.3) follows the epoch count
WARMUP_STEPS = 79  # one epoch of 10,000 images at batch 128, linear from 0
ARMS = {
    "post": ("--norm", "post"),
    "post_warmup": ("--norm", "post", "--warmup-steps", str(WARMUP_STEPS)),
    "pre": ("--norm", "pre"),
    "deescalate": ("--norm", "deescalate"),  # the paper's tau = 1 at every block output
    "deescalate_warmup": ("--norm", "deescalate", "--warmup-steps", str(WARMUP_STEPS)),
    "deepnorm": ("--norm", "deepnorm"),
    "layerscale": ("--norm", "layerscale"),
    "deescalate_layerscale": ("--norm", "deescalate_layerscale"),
    "deescalate_learned_tau": ("--norm", "deescalate", "--learn-tau"),
}
# Seed 0 chose each arm's rate; the verdicts use the other seeds only (a rate picked on a seed flatters that
# seed). The paper's central comparison (de-escalation, post-norm as published, and LayerScale, the strongest
# arm) runs ten verdict seeds: with five pairs no exact rank or sign-flip test can go below p = 0.0625, so
# five seeds decide only through the t-test's normality. The other arms keep five.
SELECTION_SEED = 0
GRID = (1e-4, 3e-4, 1e-3)
CENTRAL = ("post", "deescalate", "layerscale")
PARTS = {
    "central": (
        engine.Plan(arms=CENTRAL, grid=GRID, seeds=tuple(range(11)), select_by="train_loss"),
        "de-escalation, post-norm and LayerScale: seeds 1-10",
    ),
    "others": (
        engine.Plan(
            arms=tuple(a for a in ARMS if a not in CENTRAL), grid=GRID, seeds=tuple(range(6)), select_by="train_loss"
        ),
        "the other six arms: seeds 1-5",
    ),
}
# The card's questions (`engine.questions`), each a pair of arms: A, B, what A against B answers.
QUESTIONS = engine.questions("""
    deescalate              post         does de-escalation train where post-norm does not?
    post_warmup             post         does warmup rescue post-norm?
    deescalate              post_warmup  de-escalation against post-norm with warmup
    deescalate_warmup       deescalate   does de-escalation still need warmup?
    deescalate              pre          de-escalation against pre-norm
    deescalate              deepnorm     de-escalation against DeepNorm
    deescalate              layerscale   de-escalation against LayerScale
    deescalate_layerscale   layerscale   does de-escalation add to LayerScale?
    deescalate_learned_tau  deescalate   a learned tau against the paper's tau = 1
""")
# The paper's central comparison, with LayerScale (the strongest arm at five seeds) beside it: three questions
# on ten verdict seeds an arm, decided in a family of their own on final training loss (trainability, the
# paper's question; test accuracy is shown beside as a description), by the rule and by the exact sign-flip test.
CENTRAL_QUESTIONS = engine.questions("""
    deescalate  post        does de-escalation train where post-norm does not?
    deescalate  layerscale  de-escalation against LayerScale
    layerscale  post        LayerScale against post-norm
""")
CENTRAL_METRIC = CLAIM_METRIC = "train_loss"
CARD_TABLES = {"depth80_central": lambda rows: vit_study_card.central_table(rows, sys.modules[__name__])}
FIGURE = os.path.join(os.path.dirname(RESULTS), "loss_curves.png")
FIGURE_TITLE = "ViT, depth 80, width 32, Fashion-MNIST 10k"
CELLS_AT_ONCE = "two cells at once"
TITLE = "ViT-80 at width 32 on a Fashion-MNIST subset: nine arms, each at its own best rate"
CARD = os.path.join(ROOT, "zoo", "depth80_fashion_mnist.md")
STUDY = vit_study_card.study_of(sys.modules[__name__])
