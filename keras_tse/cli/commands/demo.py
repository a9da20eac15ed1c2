"""`keras-tse demo`: the paper's claim on 8x8 digits (`keras_tse.training.demo`)."""

from keras_tse.cli import flags

HELP = "post vs pre vs de-escalated deep ViT on 8x8 digits (CPU, minutes)"
RESUMES = True  # the same command goes on from the run folders it saved


def add_arguments(parser):
    # defaults live in DemoConfig (None = not given); the help repeats them (tests/test_cli.py checks it)
    parser.add_argument("--out", help="run folder (default: runs/demo; with --quick runs/demo_quick)")
    parser.add_argument(
        "--quick", action="store_true", help="12 blocks, seed 0, 3 epochs: the three variants in about 90 s on a CPU"
    )
    parser.add_argument("--depth", type=flags.depth, help="blocks (default: 24)")
    parser.add_argument("--epochs", type=flags.positive_int, help="epochs (default: 10)")
    parser.add_argument(
        "--learning-rate", type=flags.positive_float, help="AdamW learning rate for all variants (default: 0.0003)"
    )
    parser.add_argument(
        "--seeds",
        type=flags.comma_list(flags.non_negative_int, distinct=True),
        help="comma-separated training seeds (default: 0,1,2)",
    )
    parser.add_argument(
        "--verbose",
        type=int,
        choices=(0, 1, 2),
        default=2,
        help="fit's progress output: 0 (none), 1 (a bar) or 2 (a line per epoch; the default)",
    )
    flags.add_compile_cache(parser)


def run(args):
    from keras_tse import data
    from keras_tse.training.demo import DemoConfig, run_demo

    config = flags.config_from(DemoConfig, args)
    with data.tensorflow_unseen_by_keras(needed=False):  # the demo's batches are NumPy's
        run_demo(args.out or ("runs/demo_quick" if args.quick else "runs/demo"), config, verbose=args.verbose)
    return 0
