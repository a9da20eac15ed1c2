"""`keras-tse figures`: the paper's analysis figures (1, 2, 3, 4, 5, 8) as PNG + CSV."""

import time

HELP = "regenerate the paper's analysis figures (PNG + CSV)"


def add_arguments(parser):
    parser.add_argument(
        "--which", default="1,2,3,4,5,8", help="comma-separated figure numbers (default: all, 1,2,3,4,5,8)"
    )
    parser.add_argument("--out", default="runs/figures", help="output folder (default: runs/figures)")
    parser.add_argument("--quick", action="store_true", help="fewer trials and blocks: seconds, for CI")


def run(args):
    from keras_tse.experiments.figures import make_figures

    which = [w.strip() for w in args.which.split(",") if w.strip()]
    start = time.perf_counter()
    make_figures(which, args.out, quick=args.quick, verbose=1)
    names = ", ".join(f"fig{w}.png/.csv" for w in which)
    print(f"{time.perf_counter() - start:.0f} s; outputs in {args.out}/: {names}")
    return 0
