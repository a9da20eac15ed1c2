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
