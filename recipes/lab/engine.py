"""The study engine: a study is a plan of recipe runs ("cells"), resumable cell by cell, run by
`keras-tse study NAME`.

Per arm, seed 0 runs at each learning rate of the grid; if the arm's best rate (the lowest value of the
study's selection column, never the test set's) lies at an end of what was tried, the grid grows by a
factor 3 past that end, at most `max_extensions` times; once the best is inside, the other seeds run at
it. A plan with `bracket=False` runs its seeds at the grid's best rate, all at once where the grid is one point
(e.g. a rate carried over from a bracketed study); one with `every_rate=True` runs every seed at every rate
of the grid (a full grid: the depth sweep compares its arms rate by rate); one with `rates` runs each arm's
seeds at that arm's own rate, chosen elsewhere (no grid). Each finished cell is one row
appended to the study's CSV, flushed and synced, so a killed study loses only the cells that were running
(and those resume from their own last saved epoch: the recipes do). Seed 0 is the selection seed: the
verdicts use the others.
"""

import collections
import contextlib
import dataclasses
import json
import math
import os
import subprocess
import sys
import tarfile
import time
from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

from keras_tse import _checks
from keras_tse._registry import Registry
from keras_tse.machine import machine_name
from keras_tse.run_files import append_row, copy_file, read_logged_rows, replacing, write_csv, write_text
from recipes.lab import ROOT

# The seed whose runs choose each arm's learning rate (the selection seed). No verdict uses it: a rate
# picked on seed 0 flatters seed 0 (at each depth-80 arm's chosen rate, seed 0 was the best seed in 6 of 9).
SELECTION_SEED = 0
CELL_LOGS = "cell_logs.tar.gz"  # the cells' logs, packed by `copy_out`


@dataclasses.dataclass(frozen=True)
class Plan:
    arms: tuple
    grid: tuple
    seeds: tuple = (0, 1, 2)
    max_extensions: int = 2
    select_by: str = "train_loss"  # the column whose lowest seed-0 value names the best rate
    bracket: bool = True
    every_rate: bool = False
    rates: dict = dataclasses.field(default_factory=dict)  # arm -> its one rate, where another study chose it


def read_rows(path):
    """The study's finished cells; a row a kill cut short is left out (its cell runs again)."""
    return [row for _, row in read_logged_rows(path)[1]] if os.path.exists(path) else []


def _value(row, column):
    value = float(row[column])
    return value if math.isfinite(value) else math.inf  # a diverged run is the worst, never the best


def heal(path, expected=()):
    """Rewrite the study's CSV without the rows a kill cut short (their cells run again), so that the next
    row starts a line of its own. A file whose header lacks an `expected` column is not the study's: an
    error naming it, before anything is written."""
    if os.path.exists(path):
        fields, whole, cut = read_logged_rows(path)
        missing = [field for field in expected if field not in fields]
        if missing:
            raise ValueError(
                f"{path} is not this study's result file: its header {fields} lacks {missing}. "
                "Move it away or pass another --out."
            )
        if cut:
            print(f"{path}: line(s) {cut} cut short by a kill; their cells run again", flush=True)
            write_csv(path, fields, [row for _, row in whole])


def best_rate(rows, arm, plan):
    """The arm's seed-0 rate of lowest `plan.select_by`, or None before any seed-0 row; an arm whose rate
    another study chose (`plan.rates`) is read at that rate, whichever seeds ran."""
    if arm in plan.rates:
        return plan.rates[arm]
    tried = [row for row in rows if row["arm"] == arm and int(row["seed"]) == SELECTION_SEED]
    return float(min(tried, key=lambda row: _value(row, plan.select_by))["learning_rate"]) if tried else None


def verdict_seeds(members, column):
    """{seed: value} of an arm's rows at its rate, but the selection seed's: the seeds a verdict uses."""
    return {int(r["seed"]): float(r[column]) for r in members if int(r["seed"]) != SELECTION_SEED}


def at_best(rows, arm, plan):
    """(the arm's best rate, its rows at that rate: every seed run there), or (None, []) before any seed-0 row."""
    rate = best_rate(rows, arm, plan)
    if rate is None:
        return None, []
    return rate, [row for row in rows if row["arm"] == arm and math.isclose(float(row["learning_rate"]), rate)]


def _seeds_left(rows, arm, rate, plan):
    """The (rate, seed) cells of `plan.seeds` that the arm has not run at `rate`."""
    done = {int(row["seed"]) for row in rows if row["arm"] == arm and math.isclose(float(row["learning_rate"]), rate)}
    return [(rate, seed) for seed in plan.seeds if seed not in done]


def next_cells(rows, arm, plan):
    """The (learning_rate, seed) cells the arm needs next, given the finished rows."""
    if plan.every_rate:
        return [cell for rate in plan.grid for cell in _seeds_left(rows, arm, rate, plan)]
    if arm in plan.rates:
        return _seeds_left(rows, arm, plan.rates[arm], plan)
    if not plan.bracket and len(plan.grid) == 1:  # no rate to choose: every seed runs at once
        return _seeds_left(rows, arm, plan.grid[0], plan)
    tried = sorted({float(row["learning_rate"]) for row in rows if row["arm"] == arm and int(row["seed"]) == 0})
    missing = [lr for lr in plan.grid if not any(math.isclose(lr, t) for t in tried)]
    if missing:
        return [(lr, 0) for lr in missing]
    best = best_rate(rows, arm, plan)
    if plan.bracket and best in (tried[0], tried[-1]):
        if len(tried) - len(plan.grid) >= plan.max_extensions:
            return []  # the card says the best lies at the grid's end
        return [(float(f"{best / 3 if best == tried[0] else best * 3:.3g}"), 0)]
    return _seeds_left(rows, arm, best, plan)


# the lab's studies, one module each (`recipes/lab/NAME_study.py`, its `STUDY`)
STUDIES = Registry("study", "study", package="recipes.lab", suffix="_study", module_is_entry=True)


def studies():
    """{name: the study (`Study`)} of every study module of the lab."""
    return {name: module.STUDY for name, module in STUDIES.items().items()}


def plan_of(plans, arm, study):
    """The plan among `plans` that runs `arm`; an unknown arm is one line naming `study`'s arms."""
    plans = list(plans)
    for plan in plans:
        if arm in plan.arms:
            return plan
    arms = [name for plan in plans for name in plan.arms]
    raise ValueError(f"{study} has no arm {arm!r}: expected one of {', '.join(arms)}")


def nice_the_autogroup():
    """Give this process's autogroup its nice value. Under Linux's autogroup scheduling a nice value ranks
    a process only within its group (one per setsid), so a study started in a group of its own (setsid,
    nohup from a shell) otherwise takes as much CPU as everything else together."""
    try:
        with open("/proc/self/autogroup", "w") as handle:
            handle.write(str(os.nice(0)))
    except OSError:  # not Linux, autogroup off, or not allowed: the nice value alone
        pass


# The studies' image runs score the test split each epoch (`--validation-fraction 0`), as every row of them
# made before the validation split existed did: their rows stay comparable, and a study chooses nothing on
# the test split (its rates by training loss, `Plan.select_by`).
TASK_FLAGS = {"vit": ("--validation-fraction", "0")}


def run_recipe(task, argv, out, what):
    """`keras-tse train <task> argv --out out` under JAX (a killed run resumes from its last backup), its
    output appended to `out`.log; the seconds it took. A failure names `what` and the log."""
    argv = [*TASK_FLAGS.get(task, ()), *argv]
    command = [sys.executable, "-m", "keras_tse.cli.main", "train", task, *argv, "--out", out, "--verbose", "0"]
    return run_process(command, out + ".log", what)


def run_process(command, log_path, what, backend="jax"):
    """Run one cell's process under Keras backend `backend`, its output appended to `log_path`; the seconds
    the cell took over every call that ran it (a cell a budget stopped resumes from its last saved epoch
    on the next call, so its time is the sum; `log_path`.seconds keeps it). A spent budget stops it
    (`CellStopped`); a failure names `what`."""
    spent = _seconds_spent(log_path)
    start = time.perf_counter()
    with open(log_path, "a") as log:
        env = {**os.environ, "KERAS_BACKEND": backend}
        process = subprocess.Popen(command, cwd=ROOT, env=env, stdout=log, stderr=log)
        _CELLS.processes.add(process)
        try:
            with _cells_stop_with_the_study():  # one cell at a time: the interrupt comes in this thread
                code = _wait_tallying(process, log_path, spent, start)
        finally:
            _CELLS.processes.discard(process)
            spent += time.perf_counter() - start
            _write_seconds(log_path, spent)
    if _CELLS.stopping:
        raise CellStopped(what)  # the budget stopped it: no row; its folder resumes on the next call
    if code and code != STOPPED:
        raise RuntimeError(f"{what} failed (exit {code}); see {log_path}")
    return round(spent, 1)


TALLY_S = 60  # a running cell's time so far is written this often


def _wait_tallying(process, log_path, spent, start):
    """`process`'s exit code, its time so far written to `log_path`.seconds every `TALLY_S` while it runs:
    a study killed outright (SIGKILL, the machine's end) runs no `finally`, and the cell's resumed row would
    count its last call's time alone."""
    while True:
        try:
            return process.wait(timeout=TALLY_S)
        except subprocess.TimeoutExpired:
            _write_seconds(log_path, spent + time.perf_counter() - start)


STOPPED = _checks.STOPPED_STATUS  # the cell's loss became non-finite; a row, read as diverged


class _Diverged(dict):
    """A stopped run's summary: a finished run's number it lacks reads as diverged, a loss or perplexity
    infinite (the worst: a rate grid and the verdict rule score it so), anything else NaN."""

    def __missing__(self, key):
        return math.inf if "loss" in key or "perplexity" in key else math.nan


def read_summary(folder):
    """A cell's `summary.json`; a run stopped on a non-finite loss (`stopped`) as diverged (`_Diverged`)."""
    summary = read_json(folder, "summary.json")
    return _Diverged(summary) if "stopped" in summary else summary


SECONDS = ".seconds"  # beside a cell's log: the seconds its calls took so far


def _write_seconds(log_path, seconds):
    write_text(log_path + SECONDS, f"{seconds:.1f}\n")


def _seconds_spent(log_path):
    try:
        with open(log_path + SECONDS) as f:
            return float(f.read())
    except FileNotFoundError:
        return 0.0


def spread(values, digits=3):
    """A table cell of seeds: their mean, and their range when there are several: "0.551 (0.544-0.558)"."""
    mean = sum(values) / len(values)
    return f"{mean:.{digits}f}" + (f" ({min(values):.{digits}f}-{max(values):.{digits}f})" if len(values) > 1 else "")


LEARNED_TAU = ("learned_tau_mean", "learned_tau_min", "learned_tau_max")


def learned_tau_columns(summary):
    """A run's learned taus of eq. (21) (`summary.json`'s `learned_tau`, one per block) as a row's mean, min and
    max; empty where tau is fixed."""
    taus = summary.get("learned_tau", [])
    values = (sum(taus) / len(taus), min(taus), max(taus)) if taus else ("", "", "")
    return {name: (f"{v:.4f}" if taus else "") for name, v in zip(LEARNED_TAU, values)}


def classifier_columns(summary):
    """A ViT cell's row columns from its run's `summary.json`: epochs, losses, accuracy, the last block's
    similarity at the start and end, and the learned taus."""
    return {
        "epochs": summary["epochs"],
        "train_loss": summary["train_loss"],
        "test_loss": summary["test_loss"],
        "test_accuracy": summary["test_accuracy"],
        "similarity_init": summary["last_block_similarity_start"],
        "similarity_end": summary["last_block_similarity_end"],
        **learned_tau_columns(summary),
    }


def read_json(folder, name):
    with open(os.path.join(folder, name)) as handle:
        return json.load(handle)


@dataclasses.dataclass(frozen=True)
class Study:
    """A study as data: its plans ({part: (Plan, help)}, one per part), how one cell runs
    (`run_cell(runs, arm, learning_rate, seed)` -> its row), the result file the rows go to and its
    columns, and the card whose generated blocks its rows fill."""

    name: str
    title: str
    parts: dict
    run_cell: object
    results: str
    fields: tuple
    card: str | None
    figure: object = None  # redraws the card's figure from the rows, if it has one: its path, None with no rows
    # Under a budget, a cell starts only while this many seconds are left: a study whose cells cannot be
    # carried from one call to the next (a machine that starts bare) sets what one cell takes.
    cell_estimate_s: float = 0.0
    # The arm of a row, for a result file whose rows name their arm by several columns (the depth sweep's
    # depth, norm, tau, ...) rather than by an `arm` column; read_rows adds it as "arm".
    arm_of: object = None
    table: object = None  # a function of the rows that draws the card's table, if the study has one
    # a function of the rows that gives the card's verdict families, [[(A, B, metric, Comparison), ...], ...]:
    # each the comparisons its card decides together (Holm), and so the family a claim about them is judged in
    families: object = None
    # the card's generated blocks this study draws: block name -> a function of the rows that gives its markdown
    tables: dict = dataclasses.field(default_factory=dict)
    # the metric a verdict claim about the study's arms is judged on (`verdict_claims`); None: it has no claims
    claim_metric: str = None

    def plan_of(self, arm):
        """The plan that runs `arm`; an unknown arm is one line naming the study's arms."""
        return plan_of((plan for plan, _ in self.parts.values()), arm, f"the {self.name} study")

    def arms(self, parts=None):
        """The arms of `parts` (default: every part), in plan order."""
        return tuple(arm for part in (parts or self.parts) for arm in self.parts[part][0].arms)

    def read_rows(self):
        rows = read_rows(self.results)
        return rows if self.arm_of is None else [{**row, "arm": self.arm_of(row)} for row in rows]

    def pending(self, arms, running=()):
        """The cells of `arms` that can start now, given the finished rows, breadth first: by seed, and within
        a seed by how many cells the arm has then run there (finished, running or ahead in its own list), so
        that a study stopped early (cells of an hour on a CPU) has measured each arm alike rather than one arm's
        whole rate grid."""
        rows = self.read_rows()
        finished = collections.Counter((row["arm"], int(row["seed"])) for row in rows)
        ranked = [
            ((seed, finished[arm, seed] + ahead), (arm, lr, seed))
            for arm in arms
            for ahead, (lr, seed) in enumerate(next_cells(rows, arm, self.plan_of(arm)))
        ]
        ranked.sort(key=lambda item: item[0])
        return [cell for _, cell in ranked if cell not in running]


def questions(table):
    """A card's questions from their table, one a line: arm A, arm B, then what A against B answers (the
    words to the line's end), columns apart by spaces: ((A, B, question), ...)."""
    asked = []
    for line in filter(None, (line.strip() for line in table.splitlines())):
        parts = line.split(maxsplit=2)
        if len(parts) < 3:
            raise ValueError(f"A question is two arms, then its words. Received: {line!r}")
        asked.append(tuple(parts))
    return tuple(asked)


def study_of(plan, **fields):
    """The study plan module `plan` (named NAME_study) defines by its constants: TITLE, CARD, RESULTS,
    FIELDS, `run_cell`, `markdown_table`, its PARTS ({part: (Plan, help)}) or its one PLAN, and
    CELL_ESTIMATE_S if a budget must cover a whole cell; `fields` add to them or replace them (the cell
    runner, table and figure a card module gives its plans). What the study's card shows it declares too: its
    table is the card's block TABLE_BLOCK (default: the study's name), CARD_TABLES (and `fields["tables"]`) its
    other blocks, CLAIM_METRIC the metric the card's verdict claims about it are judged on."""
    parts = getattr(plan, "PARTS", None) or {"all": (plan.PLAN, "every arm")}
    name = plan.__name__.rpartition(".")[2].removesuffix("_study")
    given = dict(name=name, title=plan.TITLE, card=plan.CARD, results=plan.RESULTS, parts=parts)
    given.update(fields=getattr(plan, "FIELDS", None), run_cell=getattr(plan, "run_cell", None))
    given.update(table=getattr(plan, "markdown_table", None), claim_metric=getattr(plan, "CLAIM_METRIC", None))
    arms = {arm for part, _ in parts.values() for arm in part.arms}
    for a, b, question in getattr(plan, "QUESTIONS", ()):
        if not {a, b} <= arms:
            raise ValueError(f"{name}: the question {question!r} asks of an arm it does not have: {a!r} or {b!r}")
    tables = {**getattr(plan, "CARD_TABLES", {}), **fields.pop("tables", {})}
    study = Study(**{**given, "cell_estimate_s": getattr(plan, "CELL_ESTIMATE_S", 0.0), **fields})
    own = {getattr(plan, "TABLE_BLOCK", name): study.table} if study.table is not None else {}
    return dataclasses.replace(study, tables={**own, **tables})


class CellStopped(Exception):
    """A cell the spent budget stopped."""


class _Cells:
    """The recipe processes this engine started, so that a spent budget can stop them (each resumes next
    time from its own last saved epoch)."""

    def __init__(self):
        self.processes = set()
        self.stopping = False

    def stop(self):
        self.stopping = True
        for process in list(self.processes):
            process.terminate()
        for process in list(self.processes):
            process.wait()


_CELLS = _Cells()


def run(study, arms, runs, *, jobs=1, budget_s=None, out=None, log=print):
    """Run the pending cells of `arms`, `jobs` at a time, until none is left or `budget_s` seconds have
    passed (the cells then running are stopped: they resume from their last saved epoch on the next
    call; none starts once less than the study's `cell_estimate_s` is left); each finished cell's row
    (the study's `fields`, "machine" added here) is appended to the result file as it comes. With `out`,
    the result file and the cells' logs (one archive) are copied there as each cell finishes and when the
    budget stops the cells: what a machine that returns only one folder must keep. One job and no budget run
    the cells one by one in this thread (a Ctrl-C stops the cell at once). The rows written."""
    nice_the_autogroup()
    os.makedirs(os.path.dirname(study.results) or ".", exist_ok=True)
    os.makedirs(runs, exist_ok=True)
    heal(study.results, [field for field in study.fields if field != "machine"])
    try:
        if jobs > 1 or budget_s is not None:
            return _run_jobs(study, arms, runs, jobs, budget_s, out, log)
        written = 0
        while cells := study.pending(arms):
            log(f"start {cells[0][0]} lr {cells[0][1]:g} seed {cells[0][2]}")
            start = time.monotonic()
            _record(study, cells[0], study.run_cell(runs, *cells[0]), time.monotonic() - start, runs, out, log)
            written += 1
        return written
    finally:
        _CELLS.stopping = False  # a stop ends with the call that made it


def _run_jobs(study, arms, runs, jobs, budget_s, out, log):
    """`run`'s cells in `jobs` threads under an optional budget."""
    deadline = None if budget_s is None else time.monotonic() + budget_s
    running, written = {}, 0
    with ThreadPoolExecutor(jobs) as pool, _cells_stop_with_the_study():  # stopped before the pool's exit waits
        while True:
            if deadline is None or deadline - time.monotonic() > study.cell_estimate_s:
                for cell in study.pending(arms, set(running.values()))[: jobs - len(running)]:
                    log(f"start {cell[0]} lr {cell[1]:g} seed {cell[2]}")
                    running[pool.submit(_timed, study.run_cell, runs, *cell)] = cell
            if not running:
                return written
            timeout = None if deadline is None else max(deadline - time.monotonic(), 0)
            done, _ = wait(running, timeout=timeout, return_when=FIRST_COMPLETED)
            if not done:  # the budget is spent: stop the cells, keep what finished
                _CELLS.stop()
                wait(running)
                if out:  # the stopped cells' logs too: how far each got, where no cell finished
                    copy_out(study, runs, out)
                log(f"budget of {budget_s:g} s spent: {len(running)} cell(s) stopped; they resume on the next call")
                return written
            for future in done:
                _record(study, running.pop(future), *future.result(), runs, out, log)
                written += 1


@contextlib.contextmanager
def _cells_stop_with_the_study():
    """Ctrl-C or SIGTERM in the thread that waits for the cells stops them too (each resumes from its last
    saved epoch), before anything waits for them to end: without it they would train on, orphaned."""
    try:
        yield
    except BaseException:
        _CELLS.stop()
        raise


def _timed(function, *args):
    start = time.monotonic()
    return function(*args), time.monotonic() - start


def _record(study, cell, row, seconds, runs, out, log):
    """Append a finished cell's row (its machine added) to the result file, hand it off to `out`, log it."""
    row = {**row, "machine": machine_name()}
    append_row(study.results, {field: row[field] for field in study.fields})
    if out:
        copy_out(study, runs, out)
    log(f"done {cell[0]} lr {cell[1]:g} seed {cell[2]}: {seconds:.0f} s")


def copy_out(study, runs, out):
    """Copy the result file into `out` and pack every cell's log into one `cell_logs.tar.gz` there (whole
    files, replaced atomically): two files whatever the cell count, as a machine that returns only a few
    files from one folder needs."""
    os.makedirs(out, exist_ok=True)
    target = os.path.join(out, os.path.basename(study.results))
    if os.path.exists(study.results):  # none before a first row
        copy_file(study.results, target)
    archive = os.path.join(out, CELL_LOGS)
    with replacing(archive, "wb") as f, tarfile.open(fileobj=f, mode="w:gz") as tar:
        for name in sorted(os.listdir(runs)):
            if name.endswith(".log"):
                tar.add(os.path.join(runs, name), arcname=name)
