"""Keep a CI run's measured times: parse the output of `.ci/run` into tests/ci_times.json (each backend's
wall time and the total, one record a run) and tests/durations.json (the last run's per-test seconds).

    CI=true bash .ci/run > ci.log 2>&1
    python tests/ci_times.py ci.log --date 2026-11-23 --machine "2-core AMD EPYC CPU, 24 GiB" \
        --commit $(git rev-parse --short HEAD)

`.ci/run` prints each backend's wall time and pytest's summary (tests/run_all_backends.py) and, last,
its own total; this script appends one record per run, and tests/README.md's `ci` table is printed from the
file (recipes/lab/generated_tables.py). A log without the total line (a run before `.ci/run` printed it)
takes `--total` from the CI service's report.
"""

import argparse
import json
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TIMES = os.path.join(ROOT, "tests", "ci_times.json")
DURATIONS = os.path.join(ROOT, "tests", "durations.json")
BACKENDS = ("tensorflow", "jax", "torch")
WALL = re.compile(r"^===== KERAS_BACKEND=(\w+): (\d+) s =====$", re.M)
SUMMARY = re.compile(r"^=+ (.*?) in [\d.]+s(?: \([\d:]+\))? =+$", re.M)
TOTAL = re.compile(r"^ci total: (\d+) s$", re.M)
# pytest's --durations lines: "12.34s call     tests/test_x.py::test_y[case]"
DURATION = re.compile(r"^([\d.]+)s (setup|call|teardown) +(tests/.+)$", re.M)


def parse(log, total=None):
    """{backend: {"wall_s", "tests"}} and the total seconds, from the text of one `.ci/run`."""
    # each backend's output follows its wall-time header and ends with pytest's summary line
    parts = WALL.split(log)  # [before, backend, seconds, output, backend, seconds, output, ...]
    backends = {}
    for backend, seconds, text in zip(parts[1::3], parts[2::3], parts[3::3]):
        summary = SUMMARY.findall(text)
        tests = re.sub(r", \d+ warnings?", "", summary[-1]) if summary else "no summary"
        backends[backend] = {"wall_s": int(seconds), "tests": tests}
    if sorted(backends) != sorted(BACKENDS):
        raise ValueError(f"the log names the backends {sorted(backends)}; expected {sorted(BACKENDS)}")
    found = TOTAL.findall(log)
    if total is None and not found:
        raise ValueError("the log has no 'ci total: N s' line; give --total")
    return backends, int(total if total is not None else found[-1])


def durations(log):
    """{backend: {test: seconds}}, each test's setup, call and teardown summed, slowest first, from the
    text of one `.ci/run` (pytest prints every phase of a second or more: tests/run_all_backends.py)."""
    parts = WALL.split(log)
    found = {}
    for backend, text in zip(parts[1::3], parts[3::3]):
        seconds = {}
        for value, _, test in DURATION.findall(text):
            seconds[test] = round(seconds.get(test, 0.0) + float(value), 2)
        found[backend] = dict(sorted(seconds.items(), key=lambda item: (-item[1], item[0])))
    return found


def markdown_table(records):
    lines = [
        "| date | commit | machine | beside it | total | TensorFlow | JAX | PyTorch (+ the run-once tests) |",
        "|---|---|---|---|---:|---|---|---|",
    ]
    for r in records:
        cells = [f"{r['backends'][b]['wall_s']:,} s ({r['backends'][b]['tests']})" for b in BACKENDS]
        beside = r.get("beside", "not recorded")  # the runs recorded before this column
        head = f"| {r['date']} | {r['commit']} | {r['machine']} | {beside} | **{r['total_s']:,} s** |"
        lines.append(f"{head} {' | '.join(cells)} |")
    return "\n".join(lines)


def spread(records):
    """One line: how many runs the file keeps and the range of their totals."""
    totals = [r["total_s"] for r in records]
    return (
        f"{len(records)} runs on record (tests/ci_times.json), {min(totals):,} to {max(totals):,} s in total: "
        "the 2-core machines differ from run to run (the machine column), so compare runs on one machine."
    )


def read(path=TIMES):
    with open(path) as f:
        return json.load(f)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("log", help="the output of one `bash .ci/run`")
    parser.add_argument("--date", required=True)
    parser.add_argument("--machine", required=True)
    parser.add_argument("--commit", required=True)
    parser.add_argument("--total", type=int, help="seconds, where the log has no total line")
    parser.add_argument("--beside", required=True, help='what ran beside it on the machine ("nothing", a study, ...)')
    parser.add_argument("--out", default=TIMES)
    parser.add_argument("--durations", default=DURATIONS, help="where the run's per-test seconds go (replaced)")
    args = parser.parse_args(argv)
    with open(args.log) as f:
        log = f.read()
    try:
        backends, total = parse(log, args.total)
    except ValueError as error:
        sys.exit(f"ci_times: {args.log}: {error}")
    records = read(args.out) if os.path.exists(args.out) else []
    record = {"date": args.date, "commit": args.commit, "machine": args.machine, "beside": args.beside}
    record["total_s"] = total
    records.append({**record, "backends": backends})
    with open(args.out, "w") as f:
        json.dump(records, f, indent=1)
        f.write("\n")
    with open(args.durations, "w") as f:
        json.dump({"commit": args.commit, "machine": args.machine, "seconds": durations(log)}, f, indent=1)
        f.write("\n")
    print(markdown_table(records[-1:]))


if __name__ == "__main__":
    main()
