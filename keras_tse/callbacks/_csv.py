"""Appending one measurement per row, as it is made, so an interrupted run keeps every row written."""

import csv
import os


def append_row(path, record):
    new = not os.path.exists(path) or os.path.getsize(path) == 0
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
