"""`keras-tse info`: versions, the backend and the devices it sees, the dtype policy."""

from keras_tse.cli.info import environment, format_environment

HELP = "versions, the backend and the devices it sees, the dtype policy"


def add_arguments(parser):
    """No flags: it reports on whichever backend Keras takes (any Keras knows, numpy too)."""


def run(args):
    print(format_environment(environment()))
    return 0
