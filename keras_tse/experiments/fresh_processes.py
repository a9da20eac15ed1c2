"""The compile-time recipes' shared harness: each variant measured in a fresh process, one report.

A compile measured after another in the same process is cheaper (the compiler's own start-up is paid
once, some programs are shared), so `recipes/scan_compile_time.py` and `recipes/torch_compile_time.py`
run every variant as `SCRIPT --only VARIANT ...` in a new interpreter, which prints its measurement
as the last line of JSON.
"""

import json
import subprocess
import sys


def measure_apart(script, variants, argv):
    """variant -> the JSON `script --only variant *argv` printed last, each in a fresh process."""
    results = {}
    for variant in variants:
        done = subprocess.run(
            [sys.executable, script, "--only", variant, *argv], capture_output=True, text=True, check=True
        )
        results[variant] = json.loads(done.stdout.strip().splitlines()[-1])
        print(variant, results[variant], flush=True)
    return results


def report(result, table, out):
    """Print the markdown table; write `result` to `out` (JSON) where one is named."""
    print(table)
    if out:
        from keras_tse import run_files

        run_files.write_json(out, result)
        print(f"wrote {out}")
    return 0
