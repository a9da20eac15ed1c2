"""The suite's own rule (tests/conftest.py): every test file says whether its result can depend on
the backend, and a run with KERAS_TSE_ONE_BACKEND_TESTS=skip leaves out exactly the one-backend tests."""

import os
import pathlib
import re
import subprocess
import sys

import pytest

from tests import conftest
from tests.run_all_backends import launch_order, one_backend_modes, one_backend_process, shared_out

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py

TESTS = os.path.dirname(os.path.abspath(__file__))


def test_every_test_file_is_in_exactly_one_group():
    assert conftest.classification_errors(TESTS) == []


def test_a_new_file_that_states_no_group_or_two_is_named(tmp_path):
    (tmp_path / "test_chosen.py").write_text("import pytest\n\npytestmark = pytest.mark.one_backend\n")
    (tmp_path / "test_listed.py").write_text("pytestmark = [pytest.mark.every_backend, pytest.mark.large]\n")
    (tmp_path / "test_new_feature.py").write_text("def test_x():\n    pass\n")
    (tmp_path / "test_torn.py").write_text("pytestmark = [pytest.mark.every_backend, pytest.mark.one_backend]\n")
    (tmp_path / "helpers_new.py").write_text("")  # not a test file: needs no group
    assert conftest.classification_errors(str(tmp_path)) == [
        "test_new_feature.py: its pytestmark names no group; expected one of every_backend, one_backend",
        "test_torn.py: its pytestmark names every_backend and one_backend; expected one of every_backend, one_backend",
    ]


class _Item:
    """A collected test as the group rule sees it: its own marker (if any), then its file's."""

    def __init__(self, file, marker=None):
        self.path = pathlib.Path(TESTS) / file
        with open(self.path) as f:
            (group,) = conftest.declared_groups(f.read())
        self.marks = [pytest.Mark(name, (), {}) for name in (marker, group) if name]

    def iter_markers(self):
        return iter(self.marks)

    def get_closest_marker(self, name):
        return next((mark for mark in self.marks if mark.name == name), None)


def test_a_marker_moves_one_test_out_of_its_files_group():
    assert conftest.runs_on_every_backend(_Item("test_vit.py"))
    assert not conftest.runs_on_every_backend(_Item("test_data.py"))
    assert not conftest.runs_on_every_backend(_Item("test_vit.py", "one_backend"))
    assert conftest.runs_on_every_backend(_Item("test_data.py", "every_backend"))


def test_skip_mode_deselects_the_one_backend_tests_and_keeps_the_rest():
    files = ["tests/test_training.py", "tests/test_recipes.py"]
    env = {**os.environ, conftest.ONE_BACKEND_TESTS: "skip"}
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", *files],
        capture_output=True,
        text=True,
        cwd=os.path.dirname(TESTS),
        env=env,
    )
    assert result.returncode == 0, result.stdout[-2000:]  # both files import and collect
    kept = [line for line in result.stdout.splitlines() if "::" in line]
    collected, total, deselected = map(
        int, re.search(r"(\d+)/(\d+) tests collected \((\d+) deselected", result.stdout).groups()
    )
    assert collected == len(kept) and deselected == total - collected > 0
    assert not any("test_training.py" in line for line in kept)  # a one-backend file: every test deselected
    names = {line.split("::")[1] for line in kept}
    assert "test_checkpoint_reloads_and_fit_continues" in names  # every backend
    assert "test_separate_calls_share_one_plot" not in names  # marked one_backend inside an every-backend file
    assert "test_no_data_stops_with_the_file_to_fetch" not in names  # marked one_backend inside that file


def test_the_one_backend_group_runs_in_one_process_and_its_starting_half_is_shared(tmp_path):
    """One process runs the whole group, the others the tests that start processes; each of those runs in the
    first process to claim it, and a claim is made once, whoever tries next."""
    one_backend = [_Item("test_data.py"), _Item("test_processes.py", "starts_processes"), _Item("test_vit.py")]
    runs = {mode: [conftest.kept_here(i, mode) for i in one_backend] for mode in conftest.ONE_BACKEND_MODES}
    assert runs["run"] == [True, True, True] and runs["skip"] == [False, False, True]
    assert runs["starting_processes"] == [False, True, True]
    assert [conftest.shared(i) for i in one_backend] == [False, True, False]  # only these write a claim
    assert one_backend_modes(["tensorflow", "jax", "torch"], "torch") == {
        "tensorflow": "starting_processes",
        "jax": "starting_processes",
        "torch": "run",
    }
    assert one_backend_modes(["jax"], "jax") == {"jax": "run"}
    first = [conftest.claimed(f"tests/test_x.py::test_{i}", str(tmp_path), "jax") for i in range(3)]
    again = [conftest.claimed(f"tests/test_x.py::test_{i}", str(tmp_path), "torch") for i in range(4)]
    assert first == [True, True, True] and again == [False, False, False, True]
    assert shared_out(str(tmp_path)) == {"jax": 3, "torch": 1}
    data, processes, vit = one_backend  # test_vit.py is an every-backend file
    assert sorted([processes, data, vit], key=conftest.shared_order) == [vit, data, processes]


def test_the_runner_gives_the_one_backend_tests_to_one_process_and_starts_it_first():
    assert one_backend_process(["tensorflow", "jax", "torch"]) == "torch"
    assert one_backend_process(["jax", "tensorflow"]) == "jax"
    assert launch_order(["tensorflow", "jax", "torch"], "torch") == ["torch", "jax", "tensorflow"]
    assert launch_order(["tensorflow", "jax"], "tensorflow") == ["tensorflow", "jax"]


def _ci_log(backends, total="ci total: 1500 s"):
    parts = []
    for backend, seconds, summary in backends:
        parts += [f"===== KERAS_BACKEND={backend}: {seconds} s =====", "....", f"=== {summary} in 9.5s (0:00:09) ==="]
    return "\n".join([*parts, "All checks passed!", total, ""])


def test_ci_times_reads_each_backends_wall_time_and_the_total_from_a_ci_log():
    from tests import ci_times

    log = _ci_log(
        [
            ("torch", 1029, "459 passed, 8 skipped, 30 warnings"),
            ("tensorflow", 1046, "289 passed, 8 skipped, 170 deselected, 1 warning"),
            ("jax", 1306, "296 passed, 1 skipped, 170 deselected"),
        ]
    )
    backends, total = ci_times.parse(log)
    assert total == 1500
    assert backends["jax"] == {"wall_s": 1306, "tests": "296 passed, 1 skipped, 170 deselected"}
    assert backends["tensorflow"]["tests"] == "289 passed, 8 skipped, 170 deselected"
    assert backends["torch"] == {"wall_s": 1029, "tests": "459 passed, 8 skipped"}
    record = {"date": "d", "commit": "c", "machine": "m", "beside": "nothing", "total_s": total, "backends": backends}
    row = ci_times.markdown_table([record])
    assert "| d | c | m | nothing | **1,500 s** | 1,046 s (289 passed, 8 skipped, 170 deselected) | 1,306 s" in row
    assert "| m | not recorded |" in ci_times.markdown_table([{k: v for k, v in record.items() if k != "beside"}])
    with pytest.raises(ValueError, match="no 'ci total: N s' line"):
        ci_times.parse(log.replace("ci total: 1500 s", ""))
    assert ci_times.parse(log.replace("ci total: 1500 s", ""), total=2143)[1] == 2143
    with pytest.raises(ValueError, match=r"the log names the backends \['jax', 'torch'\]"):
        ci_times.parse(_ci_log([("torch", 1, "1 passed"), ("jax", 2, "2 passed")]))


def test_ci_times_keeps_each_tests_seconds_per_backend_phases_summed():
    from tests import ci_times

    durations = (
        "============================= slowest durations ==============================\n"
        "41.20s call     tests/test_recipes.py::test_kill[a b]\n"
        "3.50s setup    tests/test_recipes.py::test_kill[a b]\n"
        "12.00s call     tests/test_vit.py::test_presets\n"
        "1.25s teardown tests/test_vit.py::test_presets\n"
    )
    log = _ci_log([("torch", 9, "2 passed"), ("tensorflow", 8, "1 passed"), ("jax", 7, "1 passed")])
    log = log.replace("===== KERAS_BACKEND=jax: 7 s =====\n....", "===== KERAS_BACKEND=jax: 7 s =====\n" + durations)
    found = ci_times.durations(log)
    assert found["torch"] == {} and found["tensorflow"] == {}
    assert list(found["jax"].items()) == [
        ("tests/test_recipes.py::test_kill[a b]", 44.7),  # setup and call
        ("tests/test_vit.py::test_presets", 13.25),
    ]


@pytest.mark.every_backend
def test_full_float32_matmuls_turns_the_backends_tf32_off_and_back():
    """What the GPU-bound reference tests rely on: inside, this backend's TF32 switch reads off (JAX's
    default matmul precision "highest"); after, it reads what it read before."""
    import keras

    from tests.helpers import full_float32_matmuls

    def setting():
        if keras.backend.backend() == "jax":
            import jax

            return jax.config.jax_default_matmul_precision
        if keras.backend.backend() == "tensorflow":
            import tensorflow as tf

            return tf.config.experimental.tensor_float_32_execution_enabled()
        import torch

        return torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32

    before = setting()
    with full_float32_matmuls():
        assert setting() in ("highest", False, (False, False))
    assert setting() == before


@pytest.mark.starts_processes
def test_the_processes_the_suite_starts_compile_with_loop_emitters_too(tmp_path):
    """`conftest.fewer_compile_passes_in_started_processes`: a process started with this one's environment finds
    XLA:CPU's loop emitters in XLA_FLAGS, and every test file that sets XLA_FLAGS for a process keeps them there."""
    from tests.helpers import STARTED_PROCESS_XLA_FLAGS

    read = "import os; print(os.environ.get('XLA_FLAGS', ''))"
    printed = subprocess.run([sys.executable, "-c", read], capture_output=True, text=True, check=True).stdout
    assert STARTED_PROCESS_XLA_FLAGS in printed.split()
    for name in sorted(os.listdir(TESTS)):
        if name.startswith("test_") and name.endswith(".py"):
            with open(os.path.join(TESTS, name)) as f:
                source = f.read()
            if '"XLA_FLAGS":' in source:  # a file that sets them for a process it starts
                assert "STARTED_PROCESS_XLA_FLAGS" in source, name


@pytest.mark.every_backend
def test_jax_compiles_with_loop_emitters_only_while_most_optimisations_are_off():
    """`conftest.fewer_cpu_compile_passes`: the options JAX builds for a CPU program ask XLA for its loop emitters
    while the suite's JAX_DISABLE_MOST_OPTIMIZATIONS holds, and not inside `xla_optimizations` (a test marked
    `xla_optimized`), whose programs keep XLA's defaults; an option a caller gives wins."""
    import keras

    if keras.backend.backend() != "jax":
        pytest.skip("XLA compile options are JAX's here")
    import jax
    from jax._src import compiler

    from tests.helpers import xla_optimizations

    def overrides(given=None):
        options = compiler.get_compile_options(1, 1, env_options_overrides=given, backend=jax.devices("cpu")[0].client)
        return dict(options.env_option_overrides)

    assert overrides() == {"xla_cpu_use_fusion_emitters": False}
    assert overrides({"xla_cpu_use_fusion_emitters": True}) == {"xla_cpu_use_fusion_emitters": True}
    with xla_optimizations():
        assert overrides() == {}


@pytest.mark.every_backend
def test_tensorflow_traces_the_training_step_once_with_the_optimizer_built_first_and_trains_the_same(monkeypatch):
    """`conftest.one_trace_per_tensorflow_step`: Keras's own `fit` (`__wrapped__`) traces the step twice, its first
    trace making the optimizer's variables; the suite's `fit`, with the optimizer built first, once. Same losses."""
    import keras
    import numpy as np

    if keras.backend.backend() != "tensorflow":
        pytest.skip("Keras builds the optimizer before the first step on this backend")
    from keras.src.backend.tensorflow.trainer import TensorFlowTrainer

    from tests.helpers import tiny_vit

    traces, step = [], TensorFlowTrainer.train_step
    monkeypatch.setattr(TensorFlowTrainer, "train_step", lambda self, data: traces.append(1) or step(self, data))
    x, y = np.random.default_rng(0).standard_normal((32, 8, 8, 1)).astype("float32"), np.arange(32) % 10
    runs = {}
    for fit in (TensorFlowTrainer.fit.__wrapped__, TensorFlowTrainer.fit):
        keras.utils.set_random_seed(0)
        model = tiny_vit(depth=1)
        model.compile(keras.optimizers.Adam(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
        traces.clear()
        losses = fit(model, x, y, batch_size=8, epochs=2, shuffle=False, verbose=0).history["loss"]
        runs[len(traces)] = losses
    assert sorted(runs) == [1, 2]
    assert runs[1] == runs[2]
