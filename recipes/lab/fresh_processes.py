"""The compile-time recipes' shared harness: each variant measured in a fresh process, one report.

A compile measured after another in the same process is cheaper (the compiler's own start-up is paid
once, some programs are shared), so the lab's `scan_compile_time` and `torch_compile_time` run every
variant as `SCRIPT --only VARIANT ...` in a new interpreter, which prints its measurement
as the last line of JSON.
"""

import argparse
import json
import os
import subprocess
import sys


def measure_apart(script, variants, argv):
    """variant -> the JSON `script --only variant *argv` printed last, each in a fresh process (the script run
    as its module from the checkout's root, where `recipes.lab` imports)."""
    from recipes.lab import ROOT

    module = os.path.splitext(os.path.relpath(script, ROOT))[0].replace(os.sep, ".")
    results = {}
    for variant in variants:
        command = [sys.executable, "-m", module, "--only", variant, *argv]
        done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=ROOT)
        results[variant] = json.loads(done.stdout.strip().splitlines()[-1])
        print(variant, results[variant], flush=True)
    return results


def main(parser, variants, measure, run, table, argv=None):
    """A recipe's command line on this harness: `parser` holds the recipe's own flags; this adds
    `--out` and the hidden `--only VARIANT` that `measure_apart` passes, and dispatches: with
    `--only`, print `measure(variant, args)` as JSON (one fresh process's part); else `run(args)`
    and `report` it with `table(result)`."""
    parser.add_argument("--out", default=None, help="the JSON to write")
    parser.add_argument("--only", choices=variants, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.only:
        print(json.dumps(measure(args.only, args)))
        return 0
    result = run(args)
    return report(result, table(result), args.out)


def report(result, table, out):
    """Print the markdown table; write `result` to `out` (JSON) where one is named."""
    print(table)
    if out:
        from keras_tse import run_files

        run_files.write_json(out, result)
        print(f"wrote {out}")
    return 0
