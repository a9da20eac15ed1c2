"""Command-line flags checked where they enter: the CLI and the recipes share these.

Each `type=` below rejects a bad value with a message naming what it received, and `Parser` reports
any flag error as one line (no usage block, no traceback) and exit status 2. `--epochs 0` is an error,
not "use the default".
"""

import argparse
import os
import sys

from keras_tse.norms import INITIALIZERS


class Parser(argparse.ArgumentParser):
    """argparse, with an error reported on one line: `<prog>: error: <what>` and exit status 2."""

    run_folder = None  # set by add_run_arguments: --out's default, with "_smoke" added under --smoke

    def error(self, message):
        print(f"{self.prog}: error: {message}", file=sys.stderr)
        sys.exit(2)

    def parse_args(self, args=None, namespace=None):
        parsed = super().parse_args(args, namespace)
        if self.run_folder is not None and parsed.out is None:
            # a smoke run never lands in the real run's folder, which would then refuse the real settings
            parsed.out = self.run_folder + ("_smoke" if parsed.smoke else "")
        if self.run_folder is not None and parsed.verbose is None:
            parsed.verbose = 1 if sys.stdout.isatty() else 2  # a progress bar on a terminal, a line per epoch in a file
        if self.run_folder is not None and os.path.exists(parsed.out) and not os.path.isdir(parsed.out):
            self.error(
                f"--out must be a folder (it holds one run folder per variant). Received: --out {parsed.out}, a file"
            )
        return parsed


def positive_int(text):
    value = _number(text, int, "a positive integer")
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, received {text!r}")
    return value


def non_negative_int(text):
    value = _number(text, int, "an integer >= 0")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, received {text!r}")
    return value


def positive_float(text):
    value = _number(text, float, "a positive number")
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number, received {text!r}")
    return value


def unit_float(text):
    value = _number(text, float, "a number in [0, 1]")
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError(f"must be a number in [0, 1], received {text!r}")
    return value


def comma_list(kind):
    """A `type=` for comma-separated values, each checked by `kind` (one of the above, or `str`)."""

    def parse(text):
        values = tuple(kind(v.strip()) for v in text.split(",") if v.strip())
        if not values:
            raise argparse.ArgumentTypeError(f"must be a comma-separated list, received {text!r}")
        return values

    parse.__name__ = f"comma-separated {getattr(kind, '__name__', 'value')}"
    return parse


def choice_list(choices, groups):
    """A `type=` for one or more comma-separated names out of `choices`, in the order given; a name in
    `groups` (e.g. "all") stands for its tuple of names."""

    def parse(text):
        names = []
        for name in (n.strip() for n in text.split(",") if n.strip()):
            if name not in (*choices, *groups):
                raise argparse.ArgumentTypeError(
                    f"must be one or more of {', '.join([*choices, *groups])}, comma-separated; received {name!r}"
                )
            names.extend(n for n in groups.get(name, (name,)) if n not in names)
        if not names:
            raise argparse.ArgumentTypeError(f"must name at least one of {', '.join(choices)}, received {text!r}")
        return tuple(names)

    parse.__name__ = "comma-separated names"
    return parse


def _number(text, kind, what):
    try:
        return kind(text)
    except (TypeError, ValueError):
        raise argparse.ArgumentTypeError(f"must be {what}, received {text!r}") from None


def exit_code_of(prog, function, errors):
    """Run `function()`; an error of the types `errors` (bad settings, an unreadable file, a run folder
    of other settings) ends as one line `<prog>: <what>` on stderr, no traceback, exit status 2."""
    try:
        result = function()
    except errors as error:
        message = " ".join(str(error).split()) or type(error).__name__
        print(f"{prog}: {message}", file=sys.stderr)
        return 2
    return result if isinstance(result, int) else 0


def add_compile_cache(parser, default=None):
    """`--compile-cache DIR|off`, read by `keras_tse.training.compile_cache.use_compile_cache`; its
    default None there is $KERAS_TSE_COMPILE_CACHE, else ~/.cache/keras_tse/compile."""
    where = "$KERAS_TSE_COMPILE_CACHE, else ~/.cache/keras_tse/compile" if default is None else default
    parser.add_argument(
        "--compile-cache",
        default=default,
        metavar="DIR",
        help=f"persistent cache of compiled programs (JAX, torch.compile); 'off' compiles anew (default: {where})",
    )


def add_scale_arguments(parser):
    """The flags `keras_tse.training.scale.configure` reads: precision, compilation, data parallelism."""
    parser.add_argument(
        "--mixed-precision",
        action="store_true",
        help="train under the mixed_bfloat16 policy (float32 variables, bfloat16 compute)",
    )
    parser.add_argument(
        "--jit-compile",
        action="store_true",
        help="compile(jit_compile=True): torch.compile on PyTorch (XLA is the default on JAX, and TF on a GPU)",
    )
    parser.add_argument(
        "--data-parallel",
        action="store_true",
        help="JAX only: keras.distribution.DataParallel over every visible device",
    )


def add_run_arguments(parser, out, hidden_help, init_help, smoke_help):
    """The flags both training recipes take: where the data and the run go, the model-size and
    optimisation overrides, the seed, the weight scheme, the scale flags and `--smoke`."""
    parser.add_argument(
        "--data-dir",
        default=None,
        help="where the data set is or goes (default $KERAS_TSE_DATA_DIR or ~/.keras_tse/datasets)",
    )
    parser.add_argument("--no-download", action="store_true", help="never download; use --data-dir files only")
    parser.run_folder = out
    parser.add_argument("--out", default=None, help=f"run folder (default: {out}; {out}_smoke with --smoke)")
    parser.add_argument("--depth", type=positive_int, default=None, help="override the number of blocks")
    parser.add_argument("--hidden-dim", type=positive_int, default=None, help=hidden_help)
    parser.add_argument("--learning-rate", type=positive_float, default=None, help="override every variant's lr")
    parser.add_argument("--similarity-every", type=positive_int, default=None, help="also measure every N batches")
    parser.add_argument("--seed", type=non_negative_int, default=0, help="seed of init, shuffling, dropout (default 0)")
    parser.add_argument("--init", choices=INITIALIZERS, default=None, help=init_help)
    add_scale_arguments(parser)
    add_compile_cache(parser)
    parser.add_argument("--smoke", action="store_true", help=smoke_help)
    parser.add_argument(
        "--verbose",
        type=int,
        choices=(0, 1, 2),
        default=None,
        help="fit's output: 1 a progress bar, 2 one line per epoch, 0 none (default: 1 on a terminal, else 2)",
    )
