"""Yu & Zhang, Sec. 3.4: a 60-block Transformer-XL on WikiText-103, post-norm vs pre-norm vs de-escalated.

The paper (Fig. 7, 50,000 iterations on one V100, mean of >= 3 trials): post-norm "essentially
failed"; post-norm with de-escalation (tau = 1, causal, at each FFN input) and pre-norm trained
alike. Settings: Transformer-XL's WikiText-103 base configuration (Dai et al. 2019) with depth
16 -> 60, FFN 2100 -> 820, batch 60 -> 40, no dropout, no gradient clipping; so 10 heads of 41,
width 410, segment and memory 150, adaptive input and softmax with cutoffs 20000/40000/200000
(tied), Adam at 2.5e-4 with cosine decay, no warm-up.

Run (one folder per variant under --out; rerun the same command to resume after an interruption):

    KERAS_BACKEND=jax python recipes/wikitext103_txl.py --norm all --data-dir ~/data
    python recipes/wikitext103_txl.py --smoke --norm all   # small model, CPython's docs as text, CPU

WikiText-103 comes from --data-dir (wikitext-103/wiki.{train,valid,test}.tokens, or
wikitext-103-v1.zip), or is downloaded there and checked against its MD5.

Speed and scale (keras_tse.scale): --mixed-precision (mixed_bfloat16), --jit-compile (torch.compile on
PyTorch), --data-parallel (JAX, keras.distribution.DataParallel over every visible device):

    KERAS_BACKEND=jax python recipes/wikitext103_txl.py --norm deescalate --mixed-precision --data-parallel
"""

import argparse
import dataclasses
import os
import sys

import keras
import numpy as np

from keras_tse import data, scale, zoo
from keras_tse.layers.initializers import INITIALIZERS
from keras_tse.language_model import LMTrainConfig, fit_language_model, plot_training_loss, summary_line

# === Model: the paper's three depth-60 variants ===
VARIANTS = {norm: f"transformer_xl60_wt103_{norm}" for norm in ("post", "pre", "deescalate")}

# === Optimisation: Transformer-XL base settings as Sec. 3.4 keeps them ===
TRAIN = LMTrainConfig()

# === Smoke: a CPU-sized model on CPython's documentation, end to end in about a minute per variant ===
SMOKE_PRESET = "transformer_xl8_small"
SMOKE_MODEL = dict(depth=4)
SMOKE_TRAIN = dataclasses.replace(TRAIN, steps=60, eval_interval=20, batch_size=8, learning_rate=1e-3,
                                  log_interval=10)
SMOKE_VOCAB = 4000


def load_data(args):
    if args.smoke:
        return data.load_python_docs(max_vocab=SMOKE_VOCAB)
    try:
        return data.load_wikitext103(args.data_dir, download=not args.no_download)
    except FileNotFoundError as error:
        sys.exit(f"wikitext103_txl: {error}")


def run(args):
    """Train the chosen variants; returns {variant: summary}."""
    jit_compile = scale.configure(args)
    ids, vocab = load_data(args)
    config = dataclasses.replace(SMOKE_TRAIN if args.smoke else TRAIN, jit_compile=jit_compile)
    if args.steps:
        config = dataclasses.replace(config, steps=args.steps, eval_interval=min(config.eval_interval, args.steps))
    if args.eval_interval:
        config = dataclasses.replace(config, eval_interval=args.eval_interval)
    config = dataclasses.replace(config, learning_rate=args.learning_rate or config.learning_rate,
                                 similarity_every_n_batches=args.similarity_every)
    variants = list(VARIANTS) if args.norm == "all" else [args.norm]
    summaries, run_dirs = {}, {}
    for norm in variants:
        keras.utils.set_random_seed(args.seed)
        preset = SMOKE_PRESET if args.smoke else VARIANTS[norm]
        overrides = {"vocab_size": len(vocab), "norm": norm}
        if args.smoke:
            overrides.update(SMOKE_MODEL, name=f"smoke_{norm}")
        if args.depth:
            overrides["depth"] = args.depth
        if args.init:
            overrides["initializer"] = args.init
        model = zoo.from_preset(preset, **overrides)
        run_dir = run_dirs[norm] = os.path.join(args.out, norm)
        trainable = sum(int(np.prod(w.shape)) for w in model.trainable_weights)  # count_params adds the memory
        print(f"\n=== {norm}: {model.name}, {trainable:,} parameters, {config.steps} steps -> {run_dir}")
        summaries[norm] = fit_language_model(
            model, ids["train"], ids["valid"], run_dir, config,
            extra_config={"preset": preset, "overrides": overrides, "smoke": args.smoke, "seed": args.seed,
                          "backend": keras.backend.backend(), "dtype_policy": keras.config.dtype_policy().name,
                          "data_parallel": args.data_parallel},
        )
    plot_training_loss(run_dirs, os.path.join(args.out, "plots", "loss_curves.png"),
                       "Transformer-XL on WikiText-103 (Yu & Zhang Fig. 7)"
                       + (" - smoke run, CPython docs as text" if args.smoke else ""))
    print()
    for norm, summary in summaries.items():
        print(summary_line(norm, summary))
    return summaries


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--norm", choices=[*VARIANTS, "all"], default="all")
    parser.add_argument("--data-dir", default=None, help="where WikiText-103 is or goes (default ~/.keras_tse/datasets)")
    parser.add_argument("--no-download", action="store_true", help="never download; use --data-dir files only")
    parser.add_argument("--out", default="runs/wikitext103_txl", help="run folder (default: runs/wikitext103_txl)")
    parser.add_argument("--steps", type=int, default=None, help="override the step count")
    parser.add_argument("--eval-interval", type=int, default=None, help="steps between validations")
    parser.add_argument("--depth", type=int, default=None, help="override the number of blocks")
    parser.add_argument("--learning-rate", type=float, default=None, help="override the learning rate")
    parser.add_argument("--similarity-every", type=int, default=None, help="also measure every N batches")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--init", choices=INITIALIZERS, default=None,
                        help="weight scheme (default: transformer_xl, the reference code's N(0, 0.02))")
    scale.add_arguments(parser)
    parser.add_argument("--smoke", action="store_true", help="small model, CPython docs as text, 60 steps")
    return parser.parse_args(argv)


if __name__ == "__main__":
    run(parse_args())
