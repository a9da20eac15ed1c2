"""The GPU's first Fig. 6 runs (ViT-80 at Table 1's size on Fashion-MNIST, post-norm, pre-norm and
de-escalation, JAX, float32) and the bench cases timed apart: the card blocks drawn from what those calls
returned, committed under `zoo/gpu/` (`cells.csv`, one row per run with its machine; `fig6.json` and
`fig6_stopped.json`, the runs' results by `benchmark_results`; `returned/*_bench_*.json`). No new run adds
to them: Fig. 6 at the paper's size goes on as the `fig6_paper` study, the speed table as `speed_paper`.
"""

import glob
import json
import os

from recipes.lab import ROOT, engine, markdown

ZOO = os.path.join(ROOT, "zoo", "gpu")
FIG6_CELLS = 12  # the first Fig. 6 plan: post, pre, de-escalation x 3 seeds, then 3 arms x 1 seed


def read_cells(zoo=ZOO):
    return {row["cell"]: row for row in engine.read_rows(os.path.join(zoo, "cells.csv"))}


def fig6_block(zoo=ZOO):
    """The first Fig. 6 runs' table and the machines they ran on, the runs stopped at the budget apart
    (their schedule was cut short), or "not measured"."""
    cells = [row for row in read_cells(zoo).values() if row["figure"] == "fig6"]
    done = [row for row in cells if row["finished"] == "1"]
    stopped = [row for row in cells if row["finished"] == "0" and row["epochs"]]
    parts = []
    if done:
        parts.append(_figure_table(zoo, "fig6"))
        parts.append(f"{len(done)} of the plan's {FIG6_CELLS} cells, {_provenance(done)}.")
    if stopped:
        epochs = "/".join(sorted({row["epochs"] for row in stopped}))
        parts.append(
            f"Stopped before the end of their schedule, {len(stopped)} cells, {_provenance(stopped)}: each number "
            f"is the run's last finished epoch ({epochs} of {_planned_epochs(stopped[0])} planned, so the learning "
            "rate's schedule was cut short), the training time that of its finished epochs. The plan does not run "
            "them again."
        )
        parts.append(_figure_table(zoo, "fig6_stopped", verdicts=True))
    return "\n\n".join(parts) or "Not measured on a GPU."


def _figure_table(zoo, figure, verdicts=False):
    """A figure's result file as the card's table; with `verdicts`, de-escalation against the others and
    pre- against post-norm by the verdict rule."""
    from recipes.lab import benchmark_results

    with open(os.path.join(zoo, f"{figure}.json")) as f:
        results = json.load(f)
    table = benchmark_results.markdown_table(results)
    if not verdicts:
        return table
    lines = [benchmark_results.verdicts(results)]
    if {"pre", "post"} <= set(results["runs"]):
        lines.append(benchmark_results.verdicts(results, "pre", ["post"]))
    return table + "\n\n" + "\n".join(line for line in lines if line)


def _planned_epochs(row):
    return row["command"].split("--epochs ")[1].split()[0]


def _provenance(rows):
    machines = sorted(
        {f"{r['device']} ({r['backend']}, {r['dtype']}, Keras {r['keras']}, JAX {r['jax']})" for r in rows}
    )
    dates = sorted(r["date"][:10] for r in rows)
    sharing = sorted({r["parallel"] for r in rows if r["parallel"]})
    shared = f", {' or '.join(sharing)} runs sharing the GPU" if sharing else ""
    when = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
    return f"run on {'; '.join(machines)}{shared}, {when} (`zoo/gpu/cells.csv`)"


def speed_table(results):
    """One row per timed case of bench results (`keras-tse bench --out`'s "results"): step time,
    throughput, compile, memory."""
    header = ("backend", "case", "device", "dtype", "batch", "step (ms)", "throughput", "TFLOP/s", "compile (s)",
              "peak memory (GB)")  # fmt: skip
    rows = [
        (r["backend"], r["case"], r["device"], r["dtype"], f"{r['batch']}", f"{r['step_ms']:.1f}",
         f"{r['throughput']:,.0f} {r['unit']}", f"{r['train_tflops']:.3g}", f"{r['compile_s']:.1f}",
         f"{r['peak_memory_gb']:.2f}")
        for r in results
    ]  # fmt: skip
    return markdown.table(header, rows, right=range(4, 10))


def _returned(zoo, kind):
    """(file name, its JSON) of each `returned/*_<kind>_*.json` a GPU machine returned, by name."""
    found = []
    for path in sorted(glob.glob(os.path.join(zoo, "returned", f"*_{kind}_*.json"))):
        with open(path) as f:
            found.append((os.path.basename(path), json.load(f)))
    return found


def benches_apart(zoo=ZOO):
    """Bench files a GPU machine returned on their own (`returned/*_bench_*.json`: a case timed alone in
    the last minutes of a machine's time), as a paragraph and their table; None where there are none."""
    returned = _returned(zoo, "bench")
    if not returned:
        return None
    results = [result for _, record in returned for result in record["results"]]
    names = ", ".join(f"`{name}`" for name, _ in returned)
    failed = [f"{r['case']} ({r['error']})" for r in results if "error" in r]
    timed = [r for r in results if "error" not in r]
    text = (
        f"Measured apart from the plan's cells, one call a file ({names} in `zoo/gpu/returned/`; "
        f"`keras-tse bench --dtype mixed_bfloat16 --cases CASES --steps 10 --rounds 2`, on PyTorch with "
        f"`--jit-compile --isolate`; median of 20 timed steps):\n\n{speed_table(timed)}"
    )
    return text + (f"\n\nNot measured: {'; '.join(failed)}." if failed else "")


def profile_block(zoo=ZOO):
    """The ViT train step's traces (`returned/*_profile_*.json`, `tests/gpu_profile.py`): per variant its step
    and compile time, the kernels it launches and their summed time; then each variant's ten costliest
    kernels. None where there are none."""
    records = _returned(zoo, "profile")
    if not records:
        return None
    lines = [
        "| file | device | variant | step (ms) | compile (s) | kernels a step | kernel time a step (ms) "
        "| kernel time / step | peak memory (GB) |",
        "|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    tops = []
    for name, record in records:
        for v in record["variants"]:
            busy = v["device_busy_ms_per_step"]
            lines.append(
                f"| `{name}` | {record['device']} | {v['variant']} | {v['step_ms']:.1f} | {v['compile_s']:.1f} "
                f"| {v['kernels_per_step']:,.0f} | {busy:.1f} | {busy / v['step_ms']:.2f} | {v['peak_memory_gb']:.2f} |"
            )
            top = sum(k["ms_per_step"] for k in v["top10"])
            rows = [f"| {k['kernel']} | {k['ms_per_step']:.2f} | {k['launches_per_step']:.0f} |" for k in v["top10"]]
            tops.append(
                f"{v['variant']}: the ten costliest kernels, {top:.1f} of {busy:.1f} ms a step\n\n"
                "| kernel | ms a step | launches a step |\n|---|---:|---:|\n" + "\n".join(rows)
            )
    settings = records[0][1]["settings"]
    head = (
        f"ViT-{settings['depth']} ({settings['norm']}), batch {settings['batch']}, {settings['dtype']}, "
        f"{records[0][1]['backend']} {records[0][1]['jax']}, Keras {records[0][1]['keras']}; step = median of "
        f"{settings['steps']} steps from batch start to the loss on the host; kernel time = the summed durations "
        "of the GPU stream's kernels in a profiler trace of as many steps."
    )
    return "\n\n".join([head, "\n".join(lines), *tops])
