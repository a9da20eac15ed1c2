"""The experiments behind the `keras-tse` command: the demo, the escalation table, the paper's
figures, the benchmarks and the depth-study sweep, and the command line itself: `cli` assembles it
from one module per subcommand (`commands`), behind the edge every command shares (`flags`).

Tooling, not library: `import keras_tse` never loads this package; it imports the library and
`keras_tse.training`, and nothing imports it but the command line and the tests.
"""
