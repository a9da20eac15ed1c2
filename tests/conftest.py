"""The suite runs once per backend: KERAS_BACKEND is set per process (tests/run_all_backends.py)."""

import os

import keras
import pytest


def pytest_report_header(config):
    return f"keras {keras.__version__}, backend {keras.backend.backend()}"


def pytest_configure(config):
    wanted = os.environ.get("KERAS_BACKEND")
    if wanted and keras.backend.backend() != wanted:
        raise pytest.UsageError(f"KERAS_BACKEND={wanted} but Keras runs {keras.backend.backend()}")


@pytest.fixture(autouse=True)
def _fresh_seed():
    keras.utils.set_random_seed(1234)
    yield
    keras.config.set_dtype_policy("float32")
