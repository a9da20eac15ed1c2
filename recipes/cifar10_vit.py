"""Yu & Zhang, Sec. 3.3: an 80-block ViT on CIFAR-10, post-norm vs pre-norm vs de-escalated post-norm.

The paper (Fig. 6, 150 epochs on one V100, mean of >= 3 trials): plain post-norm trains far worse
than the other two; de-escalated post-norm (tau = 1 at every block output) reaches a slightly lower
training loss than pre-norm. Settings (Sec. 3.3, Table 1): depth 80, hidden 192, FFN 384, 8 heads of
24, patches 4x4, class-token head; AdamW (0.9, 0.999), weight decay 0.1; learning rate 1e-4
(5e-5 for post-norm), x0.2 at 70% and 90% of training; batch 128; RandAugment; 150 epochs.

Run (one folder per variant under --out; rerun the same command to resume after an interruption):

    KERAS_BACKEND=jax python recipes/cifar10_vit.py --norm all --data-dir ~/data/cifar10
    python recipes/cifar10_vit.py --smoke --norm all      # the whole recipe on local synthetic data, CPU

CIFAR-10 comes from --data-dir (cifar-10-python.tar.gz or its extracted cifar-10-batches-py/), or is
downloaded there and checked against its MD5.

Speed and scale (keras_tse.scale): --mixed-precision (mixed_bfloat16), --jit-compile (torch.compile on
PyTorch), --data-parallel (JAX, keras.distribution.DataParallel over every visible device):

    KERAS_BACKEND=jax python recipes/cifar10_vit.py --norm deescalate --mixed-precision --data-parallel   # several GPUs
"""

import argparse
import dataclasses
import os
import sys

import keras

from keras_tse import data, scale, zoo
from keras_tse.layers.initializers import INITIALIZERS
from keras_tse.training import TrainConfig, fit_variant, plot_losses, read_history, summary_line

# === Model: the paper's three variants, each a preset with its learning rate ===
VARIANTS = {
    "post": {"preset": "vit80_cifar10_post", "learning_rate": 5e-5},  # smaller lr "to obtain a meaningful reduction"
    "pre": {"preset": "vit80_cifar10_pre", "learning_rate": 1e-4},
    "deescalate": {"preset": "vit80_cifar10_deescalate", "learning_rate": 1e-4},
}

# === Optimisation: Sec. 3.3 ===
TRAIN = TrainConfig(epochs=150, batch_size=128)

# === Smoke: everything shrunk to run end to end in about a minute on a CPU ===
SMOKE_MODEL = dict(depth=4, hidden_dim=32, ffn_dim=64, num_heads=4)
SMOKE_TRAIN = dataclasses.replace(TRAIN, epochs=3, batch_size=64, learning_rate=1e-3)
SMOKE_DATA = dict(num_train=256, num_test=128)
PROBE_SIZE = 64  # test images on which TokenSimilarityMetric measures each block


def load_data(args):
    if args.smoke:
        return data.synthetic_cifar10(**SMOKE_DATA, seed=args.seed)
    try:
        return data.load_cifar10(args.data_dir, download=not args.no_download)
    except FileNotFoundError as error:
        sys.exit(f"cifar10_vit: {error}")


def run(args):
    """Train the chosen variants; returns {variant: summary}."""
    jit_compile = scale.configure(args)
    (x_train, y_train), (x_test, y_test) = load_data(args)
    train_config = dataclasses.replace(SMOKE_TRAIN if args.smoke else TRAIN, jit_compile=jit_compile)
    if args.epochs:
        train_config = dataclasses.replace(train_config, epochs=args.epochs)
    normalization = dict(mean=data.cifar10.MEAN, std=data.cifar10.STD)
    train = data.image_dataset(x_train, y_train, train_config.batch_size, augment=True, shuffle=True,
                               seed=args.seed, **normalization)
    test = data.image_dataset(x_test, y_test, train_config.batch_size, **normalization)
    probe = data.normalized(x_test[:PROBE_SIZE], **normalization)
    steps_per_epoch = -(-len(y_train) // train_config.batch_size)

    variants = list(VARIANTS) if args.norm == "all" else [args.norm]
    summaries, histories = {}, {}
    for norm in variants:
        variant = VARIANTS[norm]
        lr = variant["learning_rate"] if not args.smoke else train_config.learning_rate
        config = dataclasses.replace(train_config, learning_rate=args.learning_rate or lr,
                                     similarity_every_n_batches=args.similarity_every)
        keras.utils.set_random_seed(args.seed)
        overrides = dict(SMOKE_MODEL, name=f"smoke_{norm}") if args.smoke else {}
        if args.init:
            overrides["initializer"] = args.init
        model = zoo.from_preset(variant["preset"], **overrides)
        run_dir = os.path.join(args.out, norm)
        print(f"\n=== {norm}: {model.name}, {model.count_params():,} parameters, lr {config.learning_rate:g} -> {run_dir}")
        summaries[norm] = fit_variant(
            model, train, test, run_dir, config, probe, steps_per_epoch,
            extra_config={"preset": variant["preset"], "overrides": overrides, "smoke": args.smoke,
                          "seed": args.seed, "backend": keras.backend.backend(),
                          "dtype_policy": keras.config.dtype_policy().name, "data_parallel": args.data_parallel},
        )
        histories[norm] = read_history(os.path.join(run_dir, "history.csv"))
    plot_losses(histories, os.path.join(args.out, "plots", "loss_curves.png"),
                "ViT on CIFAR-10 (Yu & Zhang Fig. 6)" + (" - smoke run, synthetic data" if args.smoke else ""))
    print()
    for norm, summary in summaries.items():
        print(summary_line(norm, summary))
    return summaries


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--norm", choices=[*VARIANTS, "all"], default="all")
    parser.add_argument("--data-dir", default=None, help="where CIFAR-10 is or goes (default ~/.keras_tse/datasets)")
    parser.add_argument("--no-download", action="store_true", help="never download; use --data-dir files only")
    parser.add_argument("--out", default="runs/cifar10_vit", help="run folder (default: runs/cifar10_vit)")
    parser.add_argument("--epochs", type=int, default=None, help="override the epoch count")
    parser.add_argument("--learning-rate", type=float, default=None, help="override every variant's lr")
    parser.add_argument("--similarity-every", type=int, default=None, help="also measure every N batches")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--init", choices=INITIALIZERS, default=None,
                        help="weight scheme (default: the preset's, torch: the paper's code, nn.Linear/nn.Conv2d)")
    scale.add_arguments(parser)
    parser.add_argument("--smoke", action="store_true", help="tiny model, synthetic data, 3 epochs")
    return parser.parse_args(argv)


if __name__ == "__main__":
    run(parse_args())
