"""Run the whole test suite once per Keras backend, each in its own process.

    python tests/run_all_backends.py [pytest args...]

KERAS_BACKEND is set per process, never per test (Keras picks its backend at import). Exits non-zero
if any backend fails, including pytest's exit 5 ("no tests collected").
"""

import os
import subprocess
import sys
import time

BACKENDS = ("tensorflow", "jax", "torch")


def main(pytest_args):
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    results = {}
    for backend in os.environ.get("KERAS_TSE_BACKENDS", ",".join(BACKENDS)).split(","):
        print(f"\n===== KERAS_BACKEND={backend} =====", flush=True)
        start = time.perf_counter()
        code = subprocess.call(
            [sys.executable, "-m", "pytest", "tests", *pytest_args],
            cwd=root,
            env={**os.environ, "KERAS_BACKEND": backend},
        )
        results[backend] = (code, time.perf_counter() - start)
    print("\n===== summary =====")
    for backend, (code, seconds) in results.items():
        verdict = "passed" if code == 0 else f"FAILED (pytest exit {code})"
        print(f"{backend:>10}: {verdict}, {seconds:.0f} s")
    return 0 if all(code == 0 for code, _ in results.values()) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
