"""`keras-tse`: the command line of the zoo.

keras-tse bench           train-step throughput and memory, ours beside a KerasHub or timm peer
keras-tse datasets        every data set by name: task, input, where it comes from offline
keras-tse demo            the paper's claim on 8x8 digits: similarity at init, then training
keras-tse escalation      token similarity after each block at initialisation (Sec. 2.4)
keras-tse export          a trained model as a .keras file, a TF SavedModel or ONNX
keras-tse figures         the paper's analysis figures (1, 2, 3, 4, 5, 8) as PNG + CSV (the lab's, in a checkout)
keras-tse generate        continue a text with a trained language model
keras-tse info            versions, backend, the devices it sees (is the GPU used?), dtype policy
keras-tse presets         every model preset with its parameter count, input and card
keras-tse probe M.keras   per-block similarity and attention diagnostics of a saved model
keras-tse study           the lab's studies: list, run or resume one, dry-run, regenerate its card (in a checkout)
keras-tse sweep           the depth study's resumable grid on 8x8 digits (the lab's, in a checkout)
keras-tse train           train a model family, a preset or the paper's two (vit, lm) into a run folder

Each subcommand is a module of `keras_tse.cli.commands`; this one assembles the parser and
runs the command behind the edge every command shares (`flags`).
"""

import os
import sys

from keras_tse.cli import flags
from keras_tse.cli.commands import COMMANDS
from keras_tse.cli.info import package_version


def _parser():
    parser = flags.Parser(prog="keras-tse", description=__doc__.splitlines()[0])
    parser.add_argument("--version", action="version", version=f"keras-tse {package_version('keras_tse')}")
    commands = parser.add_subparsers(dest="command", required=True)
    for name, command in COMMANDS.items().items():
        # one line, both its entry in `keras-tse --help` and its own description
        options = getattr(command, "PARSER", {})  # a command that reads every word itself (`train`)
        subparser = commands.add_parser(name, help=command.HELP, description=command.HELP, **options)
        command.add_arguments(subparser)
        subparser.set_defaults(
            run=command.run,
            needs_backend=getattr(command, "NEEDS_BACKEND", True),
            resumes=getattr(command, "RESUMES", False),  # a command whose rerun goes on from what it saved
            prog_of=getattr(command, "prog_of", lambda args, name=name: f"keras-tse {name}"),
        )
    return parser


def main(argv=None):
    # TensorFlow's C++ start-up notices drown the table when TF is installed; errors still show.
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    args = _parser().parse_args(argv)
    prog = args.prog_of(args)  # `keras-tse train NAME` names its NAME
    # the backend before Keras is imported; `info` reports on any backend Keras knows; `study` runs its
    # cells in processes of their own; `train` chooses it once its task's flags are read
    trains = args.command != "info"
    return flags.edge(prog, lambda: _run(args), choose=args.needs_backend, trains=trains, resumes=args.resumes)


def _run(args):
    if "compile_cache" in args:  # the commands that train
        from keras_tse.training.compile_cache import use_compile_cache

        use_compile_cache(args.compile_cache)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
