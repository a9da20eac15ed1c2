"""Which of the processes training together this one is (JAX's distributed runtime), read without
importing a backend where there is none to ask."""

import contextlib
import importlib

import keras


def process():
    """(index, count) of this process among those training together; (0, 1) alone."""
    if keras.backend.backend() != "jax":
        return 0, 1
    jax = importlib.import_module("jax")
    return jax.process_index(), jax.process_count()


@contextlib.contextmanager
def this_process_only():
    """No distribution inside: what is built and run here lives on this process's devices alone."""
    found = keras.distribution.distribution()
    keras.distribution.set_distribution(None)
    try:
        yield
    finally:
        keras.distribution.set_distribution(found)
