"""The `keras-tse` subcommands, one module each: `HELP` (its line in `keras-tse --help`),
`add_arguments(parser)` and `run(args)`. `keras_tse.cli.main` assembles the parser from every module of
this package (`COMMANDS`, in name order): a new command is a new module. A module here imports no Keras at
its top: `--help` and a bad flag answer before any backend loads, and the backend is chosen first
(`flags.choose_backend`)."""

from keras_tse._registry import Registry

COMMANDS = Registry("command", "command", package=__name__, module_is_entry=True)
