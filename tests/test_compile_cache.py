"""The persistent compilation cache (keras_tse.training.compile_cache, the `--compile-cache` flag)."""

import json
import os
import subprocess
import sys

import keras
import pytest

from keras_tse.training.compile_cache import OFF, use_compile_cache

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_each_backend_gets_its_own_folder_or_none(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "unchanged")  # restored after the test
    try:
        path = use_compile_cache(tmp_path)
        backend = keras.backend.backend()
        if backend == "tensorflow":  # no cache wired: its CPU default runs graphs, not XLA programs
            assert path is None and os.listdir(tmp_path) == []
        else:
            assert path == str(tmp_path / backend) and os.path.isdir(path)
            assert (os.environ["TORCHINDUCTOR_CACHE_DIR"] == path) == (backend == "torch")
        assert use_compile_cache(OFF) is None
        if backend == "torch":  # compiled anew: inductor's default folder would serve earlier programs
            fresh = os.environ["TORCHINDUCTOR_CACHE_DIR"]
            assert fresh != path and os.listdir(fresh) == []
    finally:
        use_compile_cache()  # back to the suite's own cache (tests/conftest.py)


def test_a_folder_that_cannot_be_made_is_one_line_naming_it(tmp_path):
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    if keras.backend.backend() == "tensorflow":
        pytest.skip("TensorFlow has no cache wired, so no folder is made")
    with pytest.raises(ValueError, match=f"{blocker}.*cannot be made.*'off'"):
        use_compile_cache(blocker)


def test_a_default_folder_that_cannot_be_made_warns_and_trains_without(tmp_path, monkeypatch):
    if keras.backend.backend() == "tensorflow":
        pytest.skip("TensorFlow has no cache wired, so no folder is made")
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    monkeypatch.delenv("KERAS_TSE_COMPILE_CACHE")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))  # a read-only home's stand-in
    try:
        with pytest.warns(UserWarning, match=f"{blocker}.*cannot be made.*Compiling without it"):
            assert use_compile_cache() is None
    finally:
        monkeypatch.undo()
        use_compile_cache()  # back to the suite's own cache (tests/conftest.py)


@pytest.mark.one_backend  # it starts its own JAX processes
def test_a_second_process_loads_the_first_step_from_the_cache(tmp_path):
    """The same ViT-12, blocks scanned, in two fresh JAX processes sharing a cache: the warm one compiles
    nothing (JAX reports the compile seconds it saved), trains to the same loss, and spends at least 3x
    fewer CPU seconds on its first step.

    The bar is on the process's CPU seconds, not its wall clock: compiling is CPU work the cache
    removes, while wall time also counts the waits for a core. A clean-clone CI run (three suites on
    two cores) measured 4.8 s wall cold and 1.7 s warm (2.8x) and so failed a wall-clock bar.
    Measured (2-core CPU): 4.7 CPU s cold, 0.58-0.62 warm (7.5x) with nothing beside it, 4.7 and
    0.54-0.59 (8x) beside four busy processes, whose wall clock read 8.1 s cold and 0.5-1.4 s warm.
    What a warm step still pays is tracing one block in Python and loading the executables, which no
    cache removes. CPU seconds need no second warm process to take the best of (wall seconds did).
    """
    runs = []
    for _ in range(2):  # cold, then warm
        printed = subprocess.run(
            [sys.executable, os.path.join(ROOT, "tests", "first_step_worker.py"), str(tmp_path / "cache"), "True"],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "KERAS_BACKEND": "jax", "PYTHONPATH": ROOT},
        ).stdout
        runs.append(json.loads(printed.strip().splitlines()[-1]))
    cold, *warm = runs
    # JAX counts the compile seconds each cache hit saved (wall seconds, so they swell under load):
    # none cold, some warm; the CPU ratio below is the bar
    assert cold["saved_s"] == 0 and all(w["saved_s"] > 0 for w in warm), runs
    assert all(w["loss"] == cold["loss"] for w in warm), runs
    assert max(w["first_step_cpu_s"] for w in warm) < cold["first_step_cpu_s"] / 3, runs
