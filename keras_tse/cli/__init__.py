"""The `keras-tse` command, what a zoo user runs: train, generate, export, info, presets, datasets, the
demo, the escalation table, the bench. `main` assembles it from one module per subcommand
(`commands`), behind the edge every command shares (`flags`). The lab's commands (study, sweep,
figures) find the lab in a checkout (`checkout`): the installed package does not hold it.

Tooling, not library: `import keras_tse` never loads this package; it imports the library and
`keras_tse.training`, and nothing imports it but the command line and the tests.
"""
