"""Where each test runs: on every backend, or once.

Keras picks its backend at import, so `tests/run_all_backends.py` runs the suite once per backend,
each in its own process. A test whose result can depend on KERAS_BACKEND runs in every one of them:
numerics of layers and models, training steps, saving and loading, callbacks that read a model,
cross-backend loads, a run killed under one backend and resumed under another. A test whose result
cannot (loaders and their content checks, downloads, CLI parsing and help, flag validation, the
published-numbers and card checks, the layout, CSV healing, run-folder I/O, the kill chain at file
renames and zip writes) runs in one process only: running it three times proves nothing more.

The rule: every test file states its group at its top, `pytestmark = pytest.mark.every_backend` or
`pytestmark = pytest.mark.one_backend`, and inside a file one test may move to the other group with its
own `@pytest.mark.one_backend` or `@pytest.mark.every_backend`. `tests/test_suite.py` fails on a test
file that states no group, so a new file has to choose, in the file itself.

Which process runs the one-backend group is the runner's choice, through KERAS_TSE_ONE_BACKEND_TESTS:
"run" (all of them), "skip" (none), or "starting_processes" (those marked `starts_processes`: their work
is in processes they start with their own KERAS_BACKEND, so the process that hosts them can be any
backend's). A plain `pytest` (the variable unset) runs them all.

The runner shares the one-backend tests out as the processes go: one process runs the whole group, the
others the half that starts processes, and with KERAS_TSE_SHARED_TESTS naming a folder every process
runs them after its other tests, each one in whichever process reaches it first (`claimed`: a file
created there, once). The processes then end near one another, whichever backend's own tests are
slowest that day.
"""

import functools
import gc
import hashlib
import os
import re
import resource
import tempfile

# XLA's optimisation passes cost more CPU than they save on the suite's small programs: JAX's process took
# 736 CPU-s with most of them off against about 930 with them on, every test passing both ways. Set before
# Keras imports JAX, so the recipe processes the tests start inherit it; a test that measures the compiled
# program, or computes enough for the passes to pay, takes them back with `@pytest.mark.xla_optimized`.
os.environ.setdefault("JAX_DISABLE_MOST_OPTIMIZATIONS", "1")

import keras  # noqa: E402
import pytest  # noqa: E402

from keras_tse.training.compile_cache import ENVIRONMENT_VARIABLE, use_compile_cache  # noqa: E402

GROUPS = ("every_backend", "one_backend")
_PYTESTMARK = re.compile(r"^pytestmark = (.*)$", flags=re.M)


def declared_groups(text):
    """The groups a test file's source names in its module-level `pytestmark`."""
    marks = " ".join(_PYTESTMARK.findall(text))
    return set(re.findall(r"pytest\.mark\.(every_backend|one_backend)\b", marks))


ONE_BACKEND_TESTS = "KERAS_TSE_ONE_BACKEND_TESTS"
ONE_BACKEND_MODES = ("run", "skip", "starting_processes")
SHARED_TESTS = "KERAS_TSE_SHARED_TESTS"
_RUN_FOLDERS = []


def classification_errors(test_dir):
    """One line per test file of `test_dir` whose module-level `pytestmark` names no group, or two."""
    errors = []
    for name in sorted(os.listdir(test_dir)):
        if not (name.startswith("test_") and name.endswith(".py")):
            continue
        with open(os.path.join(test_dir, name)) as f:
            groups = declared_groups(f.read())
        if len(groups) != 1:
            found = " and ".join(sorted(groups)) or "no group"
            errors.append(f"{name}: its pytestmark names {found}; expected one of {', '.join(GROUPS)}")
    return errors


def runs_on_every_backend(item):
    """The test's group: its own marker if it has one, else its file's (the closest mark wins)."""
    for mark in item.iter_markers():
        if mark.name in GROUPS:
            return mark.name == "every_backend"
    return True  # a file without a group runs everywhere (tests/test_suite.py fails on it)


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
    fewer_cpu_compile_passes()
    fewer_compile_passes_in_started_processes()
    one_trace_per_tensorflow_step()
    freeze_what_lives()
    config.addinivalue_line("markers", "every_backend: run on every backend, whatever the file's group")
    config.addinivalue_line("markers", "one_backend: run in one backend's process only, whatever the file's group")
    config.addinivalue_line("markers", "starts_processes: a one-backend test whose work runs in processes it starts")
    config.addinivalue_line("markers", "xla_optimized: JAX compiles this test's programs with XLA's optimisations on")


def fewer_cpu_compile_passes():
    """Where JAX compiles for this machine's CPU with most optimisations off (JAX_DISABLE_MOST_OPTIMIZATIONS, above),
    XLA:CPU's loop emitters instead of its fusion emitters too: a small program compiles in about half the time
    (a six-block gradient 0.9 -> 0.45 s a shape), a large one runs slower (the 48-block bfloat16 test 84 -> 287
    CPU-s), so a test marked `xla_optimized` keeps XLA's defaults. Per compile, through the options JAX builds
    for each program, because XLA_FLAGS would hold for the whole process (tests/README.md has both measured)."""
    if keras.backend.backend() != "jax":
        return
    import jax
    from jax._src import compiler

    build = compiler.get_compile_options

    def get_compile_options(*args, env_options_overrides=None, backend=None, **kwargs):
        cpu = backend is None or getattr(backend, "platform", "cpu") == "cpu"
        if cpu and jax.config.values["jax_disable_most_optimizations"]:
            env_options_overrides = {"xla_cpu_use_fusion_emitters": False, **(env_options_overrides or {})}
        return build(*args, env_options_overrides=env_options_overrides, backend=backend, **kwargs)

    compiler.get_compile_options = get_compile_options


def fewer_compile_passes_in_started_processes():
    """The processes the suite starts compile with XLA:CPU's loop emitters too (`fewer_cpu_compile_passes` reaches
    this process's compiles alone; they run with most optimisations off, JAX_DISABLE_MOST_OPTIMIZATIONS above): the
    ViT recipe's smoke run took 18.1 CPU-s without and 12.8 with, the language model's 12.5 and 9.2 (JAX, no compile
    cache, measured). Through XLA_FLAGS, which XLA reads once a process: this process's XLA reads them first, so
    the `xla_optimized` tests here keep XLA's defaults."""
    from tests.helpers import STARTED_PROCESS_XLA_FLAGS

    if keras.backend.backend() == "jax":
        import jax

        jax.devices()  # JAX's XLA reads XLA_FLAGS as it starts
    elif keras.backend.backend() == "tensorflow":
        import tensorflow as tf

        tf.function(lambda: tf.constant(1.0) + 1.0, jit_compile=True)()  # TensorFlow's, at its first XLA compile
    flags = os.environ.get("XLA_FLAGS", "")
    if "xla_cpu_use_fusion_emitters" not in flags:
        os.environ["XLA_FLAGS"] = f"{flags} {STARTED_PROCESS_XLA_FLAGS}".strip()


def one_trace_per_tensorflow_step():
    """On TensorFlow, every `fit` and `train_on_batch` of the suite builds the model's optimizer first
    (`optimizer_built_first`), as Keras does itself on JAX and PyTorch, and on TensorFlow under a distribution
    strategy. Without a strategy Keras leaves it to the first traced step, and a `tf.function` whose first trace
    creates variables is traced a second time to run: tracing is most of what a small model's training costs
    there, and the graph that runs is the same (tests/test_suite.py). Four model files in TensorFlow's process
    alone: 61 -> 41 CPU-s. A model compiled with metrics still traces twice (Keras makes them in that step too)."""
    if keras.backend.backend() != "tensorflow":
        return
    from keras.src.backend.tensorflow.trainer import TensorFlowTrainer

    def built_first(method):
        @functools.wraps(method)  # `__wrapped__`: Keras's own, for the test that compares the two
        def run(self, *args, **kwargs):
            optimizer_built_first(self)
            return method(self, *args, **kwargs)

        return run

    for name in ("fit", "train_on_batch"):
        setattr(TensorFlowTrainer, name, built_first(getattr(TensorFlowTrainer, name)))


def optimizer_built_first(model):
    """Build a compiled model's optimizer on its trainable variables, where Keras would build it in the first
    traced step with those same variables: not under a strategy (Keras builds it there, in the strategy's scope),
    nor before every layer has its variables (they too are made in that step)."""
    optimizer = getattr(model, "optimizer", None)
    if optimizer is None or optimizer.built or getattr(model, "_distribute_strategy", None) is not None:
        return
    if all(layer.built for layer in model._flatten_layers()):
        optimizer.build(model.trainable_variables)


def kept_here(item, mode):
    """Whether a process in `mode` (of ONE_BACKEND_MODES) runs the test."""
    if mode == "run" or runs_on_every_backend(item):
        return True
    return mode == "starting_processes" and item.get_closest_marker("starts_processes") is not None


def pytest_collection_modifyitems(config, items):
    mode = os.environ.get(ONE_BACKEND_TESTS, "run")
    kept, left = [], []
    for item in items:
        (kept if kept_here(item, mode) else left).append(item)
    config.hook.pytest_deselected(items=left)
    if os.environ.get(SHARED_TESTS):
        kept.sort(key=shared_order)
    items[:] = kept


def shared_order(item):
    """Where a test goes in a process that shares the one-backend tests: its every-backend tests (0), then the
    one-backend tests only it runs (1), then those any process may take (2), so that a process takes them once
    its own are done (the one running the whole group, reaching them in file order, took all but 10 of them)."""
    if runs_on_every_backend(item):
        return 0
    return 2 if shared(item) else 1


def claimed(nodeid, folder, by):
    """Whether the test is this process's to run: the first process to create its file in `folder` takes it
    (O_EXCL: of processes that try at once, one creates it). The file says which process took it."""
    path = os.path.join(folder, hashlib.sha1(nodeid.encode()).hexdigest())
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return False
    with os.fdopen(fd, "w") as f:
        f.write(f"{by} {nodeid}\n")
    return True


def shared(item):
    """Whether any process sharing the one-backend tests may run it (the others run in one process only)."""
    return not runs_on_every_backend(item) and item.get_closest_marker("starts_processes") is not None


def freeze_what_lives():
    """Collect, then move every object still alive out of the collector's sight (`gc.freeze`). Keras runs a
    full collection each time a layer drops a Variable (`Layer.__delattr__`, 13 times in one `quantize`),
    and a full collection walks every object the process holds: the imported backends and what earlier
    test files left (683,884 objects after tests/test_saving.py on JAX), so a depth-2 model's int8 round
    trip took 15 to 52 s in a full run. Frozen, those objects are not walked; what a test file leaves
    alive is frozen after it, so the next file's collections walk only what it makes."""
    gc.collect()
    gc.freeze()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield  # the file's own fixtures are gone by now
    if nextitem is None or nextitem.module is not item.module:
        freeze_what_lives()


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    folder = os.environ.get(SHARED_TESTS)
    if folder and shared(item) and not claimed(item.nodeid, folder, keras.backend.backend()):
        pytest.skip("a one-backend test another backend's process took (KERAS_TSE_SHARED_TESTS)")


@pytest.fixture(autouse=True)
def _xla_optimisations(request):
    """XLA's optimisations on for a test marked `xla_optimized` (`tests.helpers.xla_optimizations`)."""
    if request.node.get_closest_marker("xla_optimized") is None:
        yield
        return
    from tests.helpers import xla_optimizations

    with xla_optimizations():
        yield


@pytest.fixture
def float32_matmuls():
    """The test's products in full float32 (`tests.helpers.full_float32_matmuls`): for a test that checks an
    equation against a float32 reference, which TF32 on a GPU would miss."""
    from tests.helpers import full_float32_matmuls

    with full_float32_matmuls():
        yield


@pytest.fixture(autouse=True)
def _fresh_seed():
    keras.utils.set_random_seed(1234)
    yield
    keras.config.set_dtype_policy("float32")


# CPU seconds a test used, its own threads and the processes it started and waited for included. Three
# backends share two cores in CI, so a test's wall time (pytest's --durations) grows with what runs beside
# it; its CPU seconds do not, and they are what it takes from the others.
_CPU_SECONDS = {}
CPU_REPORT = int(os.environ.get("KERAS_TSE_CPU_REPORT", "30"))  # how many tests the summary lists


def _cpu_now():
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    start = _cpu_now()
    yield
    _CPU_SECONDS[item.nodeid] = _cpu_now() - start


def pytest_terminal_summary(terminalreporter):
    if not _CPU_SECONDS:
        return
    total = sum(_CPU_SECONDS.values())
    terminalreporter.write_sep("=", f"most CPU seconds (of {total:.0f} s in {len(_CPU_SECONDS)} tests)")
    for nodeid, seconds in sorted(_CPU_SECONDS.items(), key=lambda kv: -kv[1])[:CPU_REPORT]:
        terminalreporter.write_line(f"{seconds:7.1f} s  {nodeid}")
