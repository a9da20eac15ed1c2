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
@pytest.mark.starts_processes
def test_a_second_process_loads_the_first_step_from_the_cache(tmp_path):
    """The same ViT-12, blocks scanned, in two fresh JAX processes sharing a cache: the cold one compiles its
    step and stores it (every program it asks the cache for is a miss), the warm one finds every program it
    asks for there (hits, no miss) and trains to the same loss. JAX's own cache events count them, so the
    test asks what was compiled, not how long it took (a clock under CI's load says little)."""
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
    cold, warm = runs
    assert cold["cache_hits"] == 0 and cold["cache_misses"] > 0, runs
    assert warm["cache_misses"] == 0 and warm["cache_hits"] >= cold["cache_misses"], runs
    assert warm["loss"] == cold["loss"], runs
