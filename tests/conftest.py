"""Where each test runs: on every backend, or once.

Keras picks its backend at import, so `tests/run_all_backends.py` runs the suite once per backend,
each in its own process. A test whose result can depend on KERAS_BACKEND runs in every one of them:
numerics of layers and models, training steps, saving and loading, callbacks that read a model,
cross-backend loads, a run killed under one backend and resumed under another. A test whose result
cannot (loaders and their content checks, downloads, CLI parsing and help, flag validation, the
published-numbers and card checks, the layout, CSV healing, run-folder I/O, the kill chain at file
renames and zip writes) runs in one process only: running it three times proves nothing more.

The rule is this file: every test file is in EVERY_BACKEND or ONE_BACKEND, and inside a file one
test may move to the other group with `@pytest.mark.one_backend` or `@pytest.mark.every_backend`.
`tests/test_suite.py` fails on a test file in neither list, so a new file has to choose.

Which process runs the one-backend group is the runner's choice, through KERAS_TSE_ONE_BACKEND_TESTS:
"run" (all of them), "skip" (none), or a half of the group: "in_process" (those not marked
`starts_processes`) and "starting_processes" (those marked: their work is in processes they start
with their own KERAS_BACKEND, so the process that hosts them can be any backend's). The runner gives
the two halves to two processes so that no one process carries the whole group. A plain `pytest`
(the variable unset) runs them all.
"""

import os
import tempfile

import keras
import pytest

from keras_tse.training.compile_cache import ENVIRONMENT_VARIABLE, use_compile_cache

EVERY_BACKEND = frozenset(
    {
        "test_attention_diagnostics.py",
        "test_baselines.py",
        "test_block_compile.py",
        "test_bench.py",
        "test_blocks.py",
        "test_callbacks.py",
        "test_compile_cache.py",
        "test_de_escalation.py",
        "test_escalation.py",
        "test_export.py",
        "test_fixtures.py",
        "test_gpt.py",
        "test_initializers.py",
        "test_kill_resume.py",
        "test_language_model.py",
        "test_layouts.py",
        "test_preset_folders.py",
        "test_probe.py",
        "test_recipe_txl.py",
        "test_recipes.py",
        "test_reproducibility.py",
        "test_saving.py",
        "test_scale.py",
        "test_self_attention.py",
        "test_similarity.py",
        "test_shipped_presets.py",
        "test_spectral.py",
        "test_stochastic_depth.py",
        "test_transformer_xl.py",
        "test_vit.py",
    }
)
ONE_BACKEND = frozenset(
    {
        "test_bad_inputs.py",
        "test_cli.py",
        "test_data.py",
        "test_datasets.py",
        "test_figures.py",
        "test_gpu_plan.py",
        "test_layout.py",
        "test_presets.py",
        "test_processes.py",
        "test_published_numbers.py",
        "test_verdicts.py",
        "test_readme.py",
        "test_real_data.py",
        "test_reliability.py",
        "test_study_recipes.py",
        "test_suite.py",
        "test_sweep.py",
        "test_training.py",
        "test_training_kit.py",
    }
)
ONE_BACKEND_TESTS = "KERAS_TSE_ONE_BACKEND_TESTS"
ONE_BACKEND_MODES = ("run", "skip", "in_process", "starting_processes")
_RUN_FOLDERS = []


def classification_errors(test_dir):
    """One line per test file of `test_dir` in neither group or in both, and per listed name with no file."""
    files = {name for name in os.listdir(test_dir) if name.startswith("test_") and name.endswith(".py")}
    listed = EVERY_BACKEND | ONE_BACKEND
    return (
        [f"{name}: in neither EVERY_BACKEND nor ONE_BACKEND (tests/conftest.py)" for name in sorted(files - listed)]
        + [f"{name}: in both EVERY_BACKEND and ONE_BACKEND" for name in sorted(EVERY_BACKEND & ONE_BACKEND)]
        + [f"{name}: listed, but no such file in {test_dir}" for name in sorted(listed - files)]
    )


def runs_on_every_backend(item):
    """The test's group: its own marker if it has one, else its file's list."""
    marker = item.get_closest_marker("every_backend") or item.get_closest_marker("one_backend")
    if marker is not None:
        return marker.name == "every_backend"
    return item.path.name not in ONE_BACKEND  # an unclassified file runs everywhere (test_suite.py fails on it)


def pytest_report_header(config):
    return f"keras {keras.__version__}, backend {keras.backend.backend()}"


def pytest_configure(config):
    wanted = os.environ.get("KERAS_BACKEND")
    if wanted and keras.backend.backend() != wanted:
        raise pytest.UsageError(f"KERAS_BACKEND={wanted} but Keras runs {keras.backend.backend()}")
    mode = os.environ.get(ONE_BACKEND_TESTS, "run")
    if mode not in ONE_BACKEND_MODES:
        raise pytest.UsageError(f"{ONE_BACKEND_TESTS} must be one of {ONE_BACKEND_MODES}. Received: {mode!r}")
    # One compilation cache for the whole run (tests/run_all_backends.py shares it between its processes),
    # never the user's: the suite builds the same small models again and again, in this process and in
    # the recipe processes it starts, and JAX then compiles each program once (tests/README.md).
    if not os.environ.get(ENVIRONMENT_VARIABLE):
        _RUN_FOLDERS.append(tempfile.TemporaryDirectory(prefix="keras_tse_compile_cache_"))  # removed at exit
        os.environ[ENVIRONMENT_VARIABLE] = _RUN_FOLDERS[-1].name
    use_compile_cache()
    config.addinivalue_line("markers", "every_backend: run on every backend, whatever the file's group")
    config.addinivalue_line("markers", "one_backend: run in one backend's process only, whatever the file's group")
    config.addinivalue_line("markers", "starts_processes: a one-backend test whose work runs in processes it starts")


def kept_here(item, mode):
    """Whether a process in `mode` (of ONE_BACKEND_MODES) runs the test."""
    if mode == "run" or runs_on_every_backend(item):
        return True
    starts_processes = item.get_closest_marker("starts_processes") is not None
    return {"skip": False, "in_process": not starts_processes, "starting_processes": starts_processes}[mode]


def pytest_collection_modifyitems(config, items):
    mode = os.environ.get(ONE_BACKEND_TESTS, "run")
    kept, left = [], []
    for item in items:
        (kept if kept_here(item, mode) else left).append(item)
    config.hook.pytest_deselected(items=left)
    items[:] = kept


@pytest.fixture(autouse=True)
def _fresh_seed():
    keras.utils.set_random_seed(1234)
    yield
    keras.config.set_dtype_policy("float32")
