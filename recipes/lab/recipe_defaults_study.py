"""What the training recipe's defaults change at the paper's depth: the depth-80 study's model and data
(ViT-80 at width 32, 10,000 Fashion-MNIST images, 4 epochs) trained with today's defaults, timm's
weight-decay rule (no decay on biases, norm gains and offsets, the position table, the class token, tau
and the residual gains) and Fashion-MNIST's augmentation (pad-and-random-crop plus horizontal flip),
against the depth-80 study's own rows, trained before those defaults (every weight decayed, no
augmentation). Resumable cell by cell.

    nice -n 19 keras-tse study recipe_defaults --jobs 2
    keras-tse study recipe_defaults --card      # the before/after table, from both result files

The paper's three variants, each at the rate the depth-80 study chose for it on seed 0 (`DEPTH80_RATES`,
checked against its rows by a test), seeds 0 and 1, with both new defaults and with the decay rule alone
(`--augment none`), so that the table tells the two changes apart. Two seeds an arm answer no question by
the verdict rule (it asks for 5 verdict seeds): the table reports, it does not judge. Under augmentation the training
loss is measured on augmented images, so it is not the old runs' measure; test accuracy (the same
unaugmented test images) is the one to compare.
"""

import os
import sys

from recipes.lab import ROOT, depth80_study, engine, vit_study_card
from recipes.lab.engine import spread

RESULTS = os.path.join(ROOT, "zoo", "depth80_fashion_mnist", "recipe_defaults.csv")
BEFORE = ("--weight-decay-rule", "all", "--augment", "none")  # the depth-80 study's settings: the old defaults
DATA = tuple(flag for flag in depth80_study.DATA if flag not in BEFORE)  # the rest as the depth-80 study's
MODEL = depth80_study.MODEL
EPOCHS = depth80_study.EPOCHS
VARIANTS = ("post", "pre", "deescalate")
# Each variant with both new defaults, and with the decay rule alone (no augmentation), to tell them apart.
ARMS = {norm: ("--norm", norm) for norm in VARIANTS}
ARMS.update({f"{norm}_decay_only": ("--norm", norm, "--augment", "none") for norm in VARIANTS})
DEPTH80_RATES = {"post": 3e-4, "pre": 1e-3, "deescalate": 1e-3}  # the depth-80 study's best rates (its card)
RATES = {arm: DEPTH80_RATES[arm.removesuffix("_decay_only")] for arm in ARMS}
SEEDS = (0, 1)
PLAN = engine.Plan(tuple(ARMS), (), SEEDS, rates=RATES)


def before_rows(norm):
    """The depth-80 study's rows of variant `norm` at its rate, seeds `SEEDS`: the same runs, old defaults."""
    rows = depth80_study.STUDY.read_rows()
    rate = DEPTH80_RATES[norm]
    return [r for r in rows if r["arm"] == norm and float(r["learning_rate"]) == rate and int(r["seed"]) in SEEDS]


def markdown_table(rows):
    """Per arm, before (depth-80 study) and after (this study): final training loss, test accuracy and the last
    block's similarity at the end, seed means (min-max), then the seeds' count."""
    lines = [
        "| arm | lr | defaults | seeds | final train loss | test accuracy | similarity at end |",
        "|---|---:|---|---:|---:|---:|---:|",
    ]
    for norm in VARIANTS:
        kinds = (
            ("before: all decayed, no augmentation", before_rows(norm)),
            ("timm's decay, no augmentation", [r for r in rows if r["arm"] == f"{norm}_decay_only"]),
            ("after: timm's decay, crop-and-flip", [r for r in rows if r["arm"] == norm]),
        )
        for label, members in kinds:
            if not members:
                lines.append(f"| {norm} | {DEPTH80_RATES[norm]:g} | {label} | 0 | not run | | |")
                continue
            cells = [spread([float(r[c]) for r in members], d)
                     for c, d in (("train_loss", 3), ("test_accuracy", 4), ("similarity_end", 4))]  # fmt: skip
            lines.append(f"| {norm} | {DEPTH80_RATES[norm]:g} | {label} | {len(members)} | {' | '.join(cells)} |")
    return "\n".join(lines) + (
        f"\n\n{len(rows)} cells measured (`zoo/depth80_fashion_mnist/recipe_defaults.csv`); the before rows are "
        "the depth-80 study's (`results.csv`), seeds 0 and 1, the rate-choosing seed 0 included. Two seeds an arm: "
        "no verdict (the rule asks for 5 verdict seeds)."
    )


FIGURE_TITLE = "ViT-80, width 32, Fashion-MNIST 10k: timm's decay rule and crop-and-flip"
CELLS_AT_ONCE = "two cells at once"
TITLE = "The recipe's defaults at depth 80: timm's weight decay and crop-and-flip against the old ones"
CARD = os.path.join(ROOT, "zoo", "depth80_fashion_mnist.md")
STUDY = vit_study_card.study_of(sys.modules[__name__])
