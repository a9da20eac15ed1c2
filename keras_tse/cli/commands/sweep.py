"""`keras-tse sweep`: the resumable depth x norm x tau x init x lr x seed grid on 8x8 digits."""

import time

from keras_tse import data
from keras_tse.cli import flags
from keras_tse.layouts import layout_names
from keras_tse.norms import BASELINE_NORMS, INITIALIZERS, PAPER_NORMS
from keras_tse.run_files import claim_folder

HELP = "resumable grid: depth x norm x tau x lr x seed, ViT on 8x8 digits (or --dataset)"
RESUMES = True  # the same command goes on from the run folders it saved

# The grid's axes: (flags, type of the comma-separated list, help); the first flag names the
# SweepConfig field
AXES = (
    (("--depths",), flags.comma_list(flags.depth), "comma-separated depths (default: 12,24,48)"),
    (
        ("--norms",),
        flags.choice_list(layout_names(), {}),
        f"comma-separated norms (default: {','.join(PAPER_NORMS)}; also {','.join(BASELINE_NORMS)})",
    ),
    (("--taus",), flags.comma_list(flags.tau), "de-escalation strengths (default: 1.0,0.5)"),
    (
        ("--initializers", "--inits"),
        flags.choice_list(INITIALIZERS, {}),
        "weight schemes (default: torch,glorot; also normal, transformer_xl)",
    ),
    (("--learning-rates",), flags.comma_list(flags.positive_float), "AdamW learning rates (default: 1e-3,3e-4,1e-4)"),
    (("--seeds",), flags.comma_list(flags.non_negative_int, distinct=True), "comma-separated seeds (default: 0,1,2)"),
)


def add_arguments(parser):
    parser.add_argument("--out", default="runs/sweep", help="folder of sweep.csv and plots/ (default: runs/sweep)")
    parser.add_argument("--quick", action="store_true", help="depths 2,4; post, deescalate, rezero; 12 steps: seconds")
    for names, kind, text in AXES:
        parser.add_argument(*names, type=kind, help=text)
    parser.add_argument("--steps", type=flags.positive_int, help="training steps per cell (default: 300)")
    parser.add_argument("--batch-size", type=flags.positive_int, help="batch size (default: 64)")
    parser.add_argument(
        "--dataset",
        choices=data.list_datasets("images", own=False),
        help="an image set of the data registry (keras-tse datasets) (default: digits, 8x8, shipped inside keras_tse)",
    )
    flags.add_compile_cache(parser)


def run(args):
    from keras_tse.cli.checkout import lab

    SweepConfig, markdown_table, run_sweep = (
        getattr(lab("sweep"), n) for n in ("SweepConfig", "markdown_table", "run_sweep")
    )

    config = flags.config_from(SweepConfig, args)
    settings = {"dataset": config.dataset} if config.dataset != "digits" else {}
    claim_folder(args.out, "sweep", settings, writes=("sweep.csv", "cells", "plots"), marker="sweep.csv")
    start = time.perf_counter()
    rows = run_sweep(config, args.out)
    print(
        f"\n{markdown_table(rows)}\n\n{len(rows)} cells in {args.out}/sweep.csv, plots in {args.out}/plots "
        f"({time.perf_counter() - start:.0f} s this run)"
    )
    return 0
