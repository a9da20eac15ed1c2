"""Run-folder I/O, the one place every run file is written and read .

Files written whole or not at all: a temporary file in the same folder, flushed to disk, then renamed.
`os.replace` within one folder is atomic on POSIX and Windows, so a kill at any moment leaves either
the previous file or the new one, never half of one. Every result file and checkpoint of keras_tse
goes through here. Logs that grow by one measurement per row (`append_row`) are appended and fsynced
row by row, so an interrupted run keeps every row written; `read_logged_rows` reads them back and
names the rows a kill cut short.
"""

import contextlib
import csv
import fnmatch
import glob
import json
import os
import shutil
import warnings

import numpy as np

from keras_tse import run_lock


class RunFolderMismatch(ValueError):
    """A run folder holds a run of other settings (`keras_tse.training.check_run_folder`): one
    paragraph naming the keys that differ. Here, not in the runner, so that a recipe can name it
    before Keras is imported."""


# A folder is the user's until proven ours: every command that writes a folder first claims it here.
MANIFEST = "keras_tse.json"
DATA_RECORD = "data_contents.json"  # beside the manifest: what a user's data held when the run began


def claim_folder(
    folder, command, settings, writes=(), marker=None, flag="--out", settings_before=None, data_contents=None,
    data_flag="--data-dir",
):  # fmt: skip
    """Make `folder` a `command`'s output folder, or check that it already is one of these `settings`.

    A missing or empty folder is made ours: `keras_tse.json` (the manifest) records the command and
    its settings. A folder with our manifest is ours if the command is the same and no setting in
    both differs. A folder without one is someone else's, and refused, unless it is a run this
    command made before manifests existed: every entry matches a pattern of `writes` and the path
    pattern `marker` (e.g. `*/config.json`) matches a file in it; `settings_before(folder)`, where
    given, reads that run's settings to compare. Settings are compared by dotted name; a difference
    names the first setting. A folder claimed is held (`keras_tse.run_lock`): this process is its one
    writer until the command ends, and another process that claims it meanwhile is refused. With a
    user's data, `data_contents()` (its `data.own.contents` record, read only when needed) is kept in
    `DATA_RECORD` when the folder is first claimed, so that a rerun on changed data is refused naming
    what changed (under `data_flag`), not two fingerprints. Returns "new" or "ours".

    The one claim of a command's output folder. Inside a training command's, each run's own folder is
    checked against the `config.json` it holds (`keras_tse.training.check_run_folder`) and held while it
    trains.
    """
    if data_contents is None:
        return _claim(folder, command, settings, writes, marker, flag, settings_before)
    record = os.path.join(folder, DATA_RECORD)
    try:
        state = _claim(folder, command, settings, (*writes, DATA_RECORD), marker, flag, settings_before)
    except RunFolderMismatch:
        if not os.path.exists(record):
            raise
        with open(record) as f:
            before, now = json.load(f), data_contents()
        if before == now:
            raise
        raise RunFolderMismatch(
            f"{data_flag}: received data changed since the run in {folder} began ({describe_change(before, now)}); "
            f"expected the data that run trained on (restore it, or pass another {flag})"
        ) from None
    if not os.path.exists(record):
        write_json(record, data_contents())
    return state


def _claim(folder, command, settings, writes, marker, flag, settings_before):
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise RunFolderMismatch(f"{flag}: received {folder}, a file; expected a folder")
    path = os.path.join(folder, MANIFEST)
    settings = json.loads(json.dumps(settings))  # as stored: tuples become lists
    if os.path.exists(path):
        with open(path) as f:
            stored = json.load(f)
        given = {"command": command, **flatten(settings)}
        _same_run(folder, flag, given, {"command": stored.get("command"), **flatten(stored.get("settings", {}))})
        run_lock.hold(folder, flag)  # ours: from here on, this process is its one writer
        _drop_partial(path)
        return "ours"
    ignored = (run_lock.LOCK, MANIFEST + ".partial")
    entries = sorted(e for e in os.listdir(folder) if e not in ignored) if os.path.isdir(folder) else []
    ours_before = marker is not None and bool(glob.glob(os.path.join(glob.escape(folder), marker)))
    foreign = [e for e in entries if not any(fnmatch.fnmatch(e, w) for w in writes)]
    if entries and (foreign or not ours_before):
        named = foreign or entries  # without the marker, even names we use are not proven ours
        shown = ", ".join(named[:4]) + (", ..." if len(named) > 4 else "")
        raise RunFolderMismatch(
            f"{flag}: received {folder}, which holds files keras-tse did not write ({shown}); expected a new or "
            f"empty folder, or one keras-tse {command} made"
        )
    if entries and settings_before is not None:
        before = json.loads(json.dumps(settings_before(folder)))
        _same_run(folder, flag, {"command": command, **flatten(settings)}, {"command": command, **flatten(before)})
    run_lock.hold(folder, flag)  # before the first write: a second writer is refused from here on
    _drop_partial(path)
    if os.path.exists(path):  # another run claimed it between our look and our lock: check its settings
        return _claim(folder, command, settings, writes, marker, flag, settings_before)
    write_json(path, {"command": command, "settings": settings})
    return "new"


def describe_change(before, after, shown=3):
    """What differs between two `contents` records, in words: files (arrays) added, removed, edited."""

    def listed(names):
        return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")

    parts = []
    for word, names in (
        ("added", sorted(set(after) - set(before))),
        ("removed", sorted(set(before) - set(after))),
        (
            "changed",
            [_changed(k, before[k], after[k]) for k in sorted(set(before) & set(after)) if before[k] != after[k]],
        ),
    ):
        if names:
            parts.append(f"{len(names)} {word}: {listed(names)}")
    return "; ".join(parts) or "no file differs (the same files, read in another order or split)"


def _changed(name, before, after):
    """A changed entry's name, with an array's shape before and after where that changed."""
    shape_before, shape_after = before.rpartition(" ")[0], after.rpartition(" ")[0]  # "" for a file's digest
    return f"{name} ({shape_before} -> {shape_after})" if shape_before != shape_after else name


def _drop_partial(path):
    """Remove the manifest's temporary, left by a kill inside its write. Only the folder's holder may:
    before the lock it may be a live writer's, whose rename would then fail."""
    if os.path.exists(path + ".partial"):
        os.remove(path + ".partial")


def flatten(config, prefix=""):
    """{"train": {"epochs": 3}} -> {"train.epochs": 3}: every setting by one dotted name."""
    flat = {}
    for key, value in config.items():
        if isinstance(value, dict) and value:
            flat.update(flatten(value, f"{prefix}{key}."))
        else:
            flat[f"{prefix}{key}"] = value
    return flat


def _same_run(folder, flag, given, stored):
    for key in given:
        if key in stored and given[key] != stored[key]:
            raise RunFolderMismatch(
                f"{flag}: received {folder}, a {stored['command']} run with {key} {stored[key]!r}; expected a "
                f"folder for {key} {given[key]!r} (pass another {flag}, or remove {folder} to start over)"
            )


def claim_file(path, looks_ours, what, flag="--out"):
    """Check that `path` may be written: new, or a file this command wrote (`looks_ours(path)`)."""
    if os.path.isdir(path):
        raise RunFolderMismatch(f"{flag}: received {path}, a folder; expected a file name for {what}")
    if os.path.exists(path) and not looks_ours(path):
        raise RunFolderMismatch(
            f"{flag}: received {path}, a file keras-tse did not write; expected a new file name for {what}"
        )


@contextlib.contextmanager
def replacing(path, mode="w", suffix=".partial"):
    """Open a temporary sibling of `path` for writing; on a clean exit it is fsynced and renamed to `path`."""
    folder = os.path.dirname(path) or "."
    os.makedirs(folder, exist_ok=True)
    temporary = f"{path}{suffix}"
    try:
        with open(temporary, mode, **({"newline": ""} if "b" not in mode else {})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def write_text(path, text):
    with replacing(path) as f:
        f.write(text)


def write_json(path, payload, indent=2):
    with replacing(path) as f:
        json.dump(payload, f, indent=indent)


def write_csv(path, fieldnames, rows):
    """A whole CSV: header, then `rows` (dicts)."""
    with replacing(path) as f:
        writer = csv.DictWriter(f, fieldnames=list(fieldnames))
        writer.writeheader()
        writer.writerows(rows)


def save_arrays(path, **arrays):
    """`numpy.savez` of `arrays` into `path`, whole or not at all."""
    with replacing(path, "wb") as f:
        np.savez(f, **arrays)


def copy_file(source, path):
    """A copy of `source` at `path`, whole or not at all."""
    with open(source, "rb") as original, replacing(path, "wb") as f:
        shutil.copyfileobj(original, f)


def save_model(model, path):
    """`model.save(path)` (a `.keras` file) through a temporary `.keras` sibling, then renamed; a language model's
    `tokenizer` (`keras_tse.data.WordTokenizer`), where it has one, written into the archive with it."""
    if not path.endswith(".keras"):
        raise ValueError(f"A model file must end in .keras. Received: path={path!r}")
    tokenizer = getattr(model, "tokenizer", None)

    def save(temporary):
        model.save(temporary)
        if tokenizer is not None:
            tokenizer.write_into(temporary)

    save_through_temporary(path, ".keras", save)  # Keras insists on the suffix


def save_weights(model, path, also=None):
    """`model.save_weights(path)` (a `.weights.h5` file) through a temporary sibling, then renamed; `also(model,
    temporary)` adds to the file before the rename."""

    def save(temporary):
        model.save_weights(temporary)
        if also is not None:
            also(model, temporary)

    save_through_temporary(path, ".weights.h5", save)


def new_figure(figsize, ncols=1):
    """A matplotlib `Figure` and its `[1, ncols]` axes, made without pyplot: no global backend is
    chosen or switched (a notebook user's stays as it was), nothing is kept open after saving."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(1, ncols, squeeze=False)[0]


def save_figure(fig, path, dpi=100):
    """Write a figure as a PNG, whole or not at all."""
    fig.tight_layout()
    with replacing(path, "wb") as f:
        fig.savefig(f, format="png", dpi=dpi)


def save_through_temporary(path, suffix, save):
    """`save(temporary)` writes a file ending in `suffix` beside `path`, which is then fsynced and renamed to `path`."""
    temporary = f"{path[: -len(suffix)]}.partial{suffix}"
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    try:
        save(temporary)
        _fsync(temporary)
        os.replace(temporary, path)
    finally:
        if os.path.exists(temporary):
            os.remove(temporary)


def _fsync(path):
    with open(path, "rb") as f:
        os.fsync(f.fileno())


def append_row(path, record):
    """Append `record` (a dict) as one row of the CSV at `path`, its header first if the file is new, flushed
    to disk. A file whose header names other columns is refused: under it the values would be read as
    other columns."""
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    if not new:
        with open(path, newline="") as f:
            header = next(csv.reader(f), [])
        if header != list(record):
            raise ValueError(
                f"{path}: received a row of columns {list(record)}; expected the file's columns {header} "
                "(write to another file, or move this one away)"
            )
    with open(path, "a", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=list(record))
        if new:
            writer.writeheader()
        writer.writerow(record)
        f.flush()
        os.fsync(f.fileno())  # on disk before the run goes on: an interruption keeps the row


def read_logged_rows(path):
    """`(fields, whole, cut)` of a CSV that rows are appended to: `whole` the `(line number, row)` pairs
    written completely, `cut` the line numbers a kill cut short (fields missing, or the last line
    without its newline). The one reading both the run folders' CSVs and the sweep's go through."""
    with open(path, newline="") as f:
        text = f.read()
    reader = csv.DictReader(text.splitlines())
    fields = reader.fieldnames or []
    last_line = len(text.splitlines())
    whole, cut = [], []
    for number, row in enumerate(reader, start=2):
        complete = number < last_line or text.endswith("\n")
        if complete and None not in row and all(row.get(k) is not None for k in fields):
            whole.append((number, row))
        else:
            cut.append(number)
    return fields, whole, cut


def chosen_checkpoint(run):
    """(the `.keras` file of run folder `run` to use, why): `checkpoints/best.keras` where its finished run chose it
    on a validation split (`summary.json`'s `best_chosen_on`), else `checkpoints/last.keras`, the final model (a
    best checkpoint chosen on the test split would carry the test set into the choice)."""
    best, last = (os.path.join(run, "checkpoints", name) for name in ("best.keras", "last.keras"))
    summary = os.path.join(run, "summary.json")
    chosen_on = None
    if os.path.isfile(summary):
        with open(summary) as f:
            chosen_on = json.load(f).get("best_chosen_on")
    if chosen_on == "validation" and os.path.isfile(best):
        return best, "best.keras, the epoch of lowest validation loss"
    on_test = " (its best.keras was chosen on the test split)" if chosen_on == "test" else ""
    return last, f"last.keras, the final epoch's model{on_test}"


def read_history(path):
    """`history.csv` as column -> list, one entry per epoch (a resumed run's repeats: last wins)."""
    if not os.path.exists(path):
        return {}
    rows = {}
    with open(path, newline="") as f:
        for number, row in enumerate(csv.DictReader(f), start=2):
            try:
                rows[int(row["epoch"])] = {key: float(value) for key, value in row.items()}
            except (TypeError, ValueError):  # a row cut short by a kill: RunBackup drops it on resume
                warnings.warn(f"{path}: line {number} is incomplete; skipped", stacklevel=2)
    columns = {}
    for epoch in sorted(rows):
        for key, value in rows[epoch].items():
            columns.setdefault(key, []).append(value)
    return columns


def similarity_start_end(path):
    """Token similarity per block at the first measurement of a `similarity.csv` (before any resume)
    and at its last epoch end: the start and end that summaries and cards report."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    columns = sorted(k for k in rows[0] if k.startswith("tsim_"))
    ends = [r for r in rows if r["when"] == "epoch_end"] or rows
    return [float(rows[0][c]) for c in columns], [float(ends[-1][c]) for c in columns]


def read_steps(path):
    """`steps.csv` as (steps, losses) NumPy arrays; a resumed run's repeated steps: last wins."""
    rows = {}
    if os.path.exists(path):
        with open(path, newline="") as f:
            for row in csv.DictReader(f):
                rows[int(row["step"])] = float(row["loss"])
    steps = np.array(sorted(rows), "int64")
    return steps, np.array([rows[s] for s in steps])
