"""Run the test suite once per Keras backend, each in its own process, the processes side by side.

    python tests/run_all_backends.py [pytest args...]

KERAS_BACKEND is set per process, never per test (Keras picks its backend at import). The tests whose
result cannot depend on the backend (tests/conftest.py says which) run once: those that run in the test's own
process in PyTorch's when PyTorch is among the backends, else the first one's; those whose work is in processes
they start in whichever process reaches them first, each process taking them once its own tests are done.
Each process prints its slowest tests
(pytest's --durations) and the summary gives each backend's wall time, so a change that adds
minutes is seen the day it lands. Exits non-zero if any backend fails, pytest's exit 5 ("no tests
collected") included.

Environment: KERAS_TSE_BACKENDS (default tensorflow,jax,torch) picks the backends;
KERAS_TSE_TEST_JOBS (default 3) how many run at once. On the 2-core CI machine three at once ran the
suite in less wall time than two at once (README, "Tests", has the measurements).
"""

import os
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor

BACKENDS = ("tensorflow", "jax", "torch")
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# every test phase of a second or more, not only the slowest 30: tests/ci_times.py keeps them
# (tests/durations.json) so that the tests to make cheaper are known when the suite grows
DURATIONS = ["--durations=0", "--durations-min=1.0"]
COMPILE_CACHE = "KERAS_TSE_COMPILE_CACHE"  # keras_tse.training.compile_cache reads it
SHARED_TESTS = "KERAS_TSE_SHARED_TESTS"  # tests/conftest.py reads it
WITH_ONCE = {  # what a process runs of the backend-independent tests, by its mode
    "run": " (with the backend-independent tests)",
    "starting_processes": " (sharing the backend-independent tests that start processes)",
}
_print_lock = threading.Lock()


def _say(text):
    with _print_lock:
        print(text, flush=True)


def one_backend_process(backends):
    """The backend whose process also runs the backend-independent tests: PyTorch's when it is there
    (the cheapest start-up for the recipe processes many of them launch), else the first one's."""
    return "torch" if "torch" in backends else backends[0]


def one_backend_modes(backends, once):
    """KERAS_TSE_ONE_BACKEND_TESTS per backend (tests/conftest.py): `once` runs the one-backend group, the
    others the group's tests that start their own processes; with KERAS_TSE_SHARED_TESTS set, each of those
    runs in the first process to reach it. (Given to one process, TensorFlow's, that half made it end last,
    1,223 s against 1,027 and 1,047 s in one CI run.)"""
    return {b: "run" if b == once else "starting_processes" for b in backends}


def shared_out(folder):
    """{backend: how many of the shared tests its process ran}, from the files `tests/conftest.py` claims
    (`conftest.shared`: the one-backend tests that start processes)."""
    counts = {}
    for name in os.listdir(folder):
        with open(os.path.join(folder, name)) as f:
            backend = f.read().split(" ", 1)[0]
        counts[backend] = counts.get(backend, 0) + 1
    return counts


def launch_order(backends, once):
    """The process with the most to do starts first, so the last one to start is a short one."""
    return sorted(backends, key=lambda b: (b != once, b != "jax", b != "tensorflow"))


# With processes side by side, PyTorch's OpenMP pool and TensorFlow's op pools are cut to one thread:
# a pool sized to every core, sharing them with other processes, spins on threads that are not
# running. XLA keeps its own: cut to one thread, JAX's pre-norm step measured 1.54x its post-norm one
# beside two other processes (tests/test_bench.py's bar is 1.5x; its docstring has 1.08x alone).
ONE_THREAD = {"OMP_NUM_THREADS": "1", "TF_NUM_INTRAOP_THREADS": "1", "TF_NUM_INTEROP_THREADS": "1"}


def run_backend(backend, mode, pytest_args, side_by_side):
    """pytest under one backend, its output kept in a file and printed whole when it ends."""
    env = {**os.environ, "KERAS_BACKEND": backend, "KERAS_TSE_ONE_BACKEND_TESTS": mode}
    if side_by_side:
        env.update(ONE_THREAD)
    _say(f"===== KERAS_BACKEND={backend} started{WITH_ONCE.get(mode, '')}")
    start = time.perf_counter()
    with tempfile.TemporaryFile("w+") as log:
        code = subprocess.call(
            [sys.executable, "-m", "pytest", "tests", *DURATIONS, *pytest_args],
            cwd=ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        seconds = time.perf_counter() - start
        log.seek(0)
        _say(f"\n===== KERAS_BACKEND={backend}: {seconds:.0f} s =====\n{log.read()}")
    return code, seconds


def main(pytest_args):
    # one compilation cache for the three processes and every process they start (tests/conftest.py);
    # a fresh one per run, so CI's times do not depend on an earlier run's cache
    if not os.environ.get(COMPILE_CACHE):
        with tempfile.TemporaryDirectory(prefix="keras_tse_compile_cache_") as cache:
            os.environ[COMPILE_CACHE] = cache
            return main(pytest_args)
    backends = [b for b in os.environ.get("KERAS_TSE_BACKENDS", ",".join(BACKENDS)).split(",") if b]
    unknown = sorted(set(backends) - set(BACKENDS))
    if unknown:
        sys.exit(f"KERAS_TSE_BACKENDS names {unknown}; expected some of {', '.join(BACKENDS)}")
    jobs = os.environ.get("KERAS_TSE_TEST_JOBS", "3")
    if not jobs.isdigit() or int(jobs) < 1:
        sys.exit(f"KERAS_TSE_TEST_JOBS must be a positive integer. Received: {jobs!r}")
    jobs = int(jobs)
    once = one_backend_process(backends)
    modes = one_backend_modes(backends, once)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="keras_tse_shared_tests_") as shared:
        os.environ[SHARED_TESTS] = shared
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            futures = {
                b: pool.submit(run_backend, b, modes[b], pytest_args, jobs > 1) for b in launch_order(backends, once)
            }
            results = {b: f.result() for b, f in futures.items()}
        ran = shared_out(shared)
    print(f"\n===== summary ({jobs} at a time on {os.cpu_count()} cores) =====")
    for backend in backends:
        code, seconds = results[backend]
        verdict = "passed" if code == 0 else f"FAILED (pytest exit {code})"
        print(f"{backend:>10}: {verdict}, {seconds:.0f} s{WITH_ONCE.get(modes[backend], '')}, "
              f"{ran.get(backend, 0)} of the shared tests that start processes")  # fmt: skip
    print(f"{'wall':>10}: {time.perf_counter() - start:.0f} s")
    return 0 if all(code == 0 for code, _ in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
