"""`keras-tse figures`: the paper's analysis figures (1, 2, 3, 4, 5, 8) as PNG + CSV."""

import time

from keras_tse.cli import flags

HELP = "regenerate the paper's analysis figures (PNG + CSV)"
NUMBERS = ("1", "2", "3", "4", "5", "8")  # recipes.lab.figures.FIGURES's keys (a test keeps them equal)


def add_arguments(parser):
    parser.add_argument(
        "--which",
        type=flags.choice_list(NUMBERS, {"all": NUMBERS}),
        default="all",
        help="comma-separated figure numbers, or all (default: all, 1,2,3,4,5,8)",
    )
    parser.add_argument("--out", default="runs/figures", help="output folder (default: runs/figures)")
    parser.add_argument("--quick", action="store_true", help="fewer trials and blocks: seconds, for CI")


def run(args):
    from keras_tse.cli.checkout import lab

    make_figures = lab("figures").make_figures

    which = list(args.which)
    start = time.perf_counter()
    make_figures(which, args.out, quick=args.quick, verbose=1)
    names = ", ".join(f"fig{w}.png/.csv" for w in which)
    print(f"{time.perf_counter() - start:.0f} s; outputs in {args.out}/: {names}")
    return 0
