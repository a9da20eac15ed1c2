"""The `keras-tse` subcommands, one module each: `HELP` (its line in `keras-tse --help`),
`add_arguments(parser)` and `run(args)`. `keras_tse.cli.main` assembles the parser from them
in the order of `COMMANDS`. A module here imports no Keras at its top: `--help` and a bad flag answer
before any backend loads, and the backend is chosen first (`flags.choose_backend`)."""

COMMANDS = (
    "train",
    "demo",
    "escalation",
    "probe",
    "presets",
    "figures",
    "bench",
    "sweep",
    "study",
    "datasets",
    "export",
    "generate",
    "info",
)
