"""Files written whole or not at all: a temporary file in the same folder, flushed to disk, then renamed.

`os.replace` within one folder is atomic on POSIX and Windows, so a kill at any moment leaves either
the previous file or the new one, never half of one. Every result file and checkpoint of keras_tse
goes through here (issue 15).
"""

import contextlib
import csv
import json
import os


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


def save_model(model, path):
    """`model.save(path)` (a `.keras` file) through a temporary `.keras` sibling, then renamed."""
    if not path.endswith(".keras"):
        raise ValueError(f"A model file must end in .keras. Received: path={path!r}")
    _through_temporary(path, ".keras", model.save)  # Keras insists on the suffix


def save_weights(model, path):
    """`model.save_weights(path)` (a `.weights.h5` file) through a temporary sibling, then renamed."""
    _through_temporary(path, ".weights.h5", model.save_weights)


def _through_temporary(path, suffix, save):
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
