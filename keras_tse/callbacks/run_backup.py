"""Resumable runs that survive a kill at any moment: backup, restore, and the run's CSVs trimmed.

Keras' `BackupAndRestore` writes its weights file and its epoch file in place and one after the
other, so a kill inside either write leaves a backup that cannot be read or that disagrees with the
logs. `RunBackup` keeps one weights file per finished epoch, `epoch_00005.weights.h5` (weights and
optimizer state after 5 epochs), each written whole through `keras_tse.run_files`, and deletes all but
the newest two. The file name is the epoch, so there is no second file to disagree with.

Order matters twice in the callback list:
- `RunBackup` itself goes first: its `on_train_begin` restores the weights and the epoch before any
  other callback looks at the model;
- `RunBackup.saver()` goes last: the epoch's backup is written after every other callback has
  written that epoch's rows, so a kill between the two repeats the epoch (its rows are trimmed on
  resume) instead of losing a row.

On resume, the temporary files of interrupted writes (`*.partial*`) are removed, and every `*.csv`
in the run folder with an `epoch` column loses the rows of epochs the backup does not hold, and any
row a kill cut short, so no row is duplicated or missing. A weights file that cannot be read (cut short, or
written by another model) is reported in one line and set aside as `*.unreadable`, and the previous one is
used; with none readable the run starts over. Left in place, such a file would count among the newest two
backups and have the resumed run's own deleted as soon as written.
An epoch whose loss is not finite is never backed up.
"""

import glob
import math
import os
import re
import warnings

import keras

from keras_tse import lora, run_files
from keras_tse.run_files import read_logged_rows

PATTERN = re.compile(r"epoch_(\d{5})\.weights\.h5$")


class RunBackup(keras.callbacks.Callback):
    """Restore the newest readable backup at train begin; `saver()` writes one after each finite epoch.

    Args:
        backup_dir: folder of the `epoch_NNNNN.weights.h5` files.
        run_dir: folder whose `*.csv` files (with an `epoch` column) are trimmed to the restored epoch.
            Defaults to the parent of `backup_dir`.
        log: a function taking one line, for what resuming did.
    """

    def __init__(self, backup_dir, run_dir=None, log=print):
        super().__init__()
        self.backup_dir = backup_dir
        self.run_dir = run_dir or os.path.dirname(os.path.abspath(backup_dir))
        self.log = log
        self.restored_epoch = 0

    def on_train_begin(self, logs=None):
        for folder, _, files in os.walk(self.run_dir):  # temporaries of writes a kill interrupted
            for name in files:
                if ".partial" in name:
                    os.remove(os.path.join(folder, name))
        self.restored_epoch = self._restore()
        if self.restored_epoch:
            self.model._initial_epoch = self.restored_epoch  # what fit reads to resume (as BackupAndRestore)
        for path in glob.glob(os.path.join(self.run_dir, "*.csv")):
            trim_epochs(path, self.restored_epoch)

    def saver(self):
        """The callback that writes the backups; list it after every callback that writes the run's files."""
        return _Saver(self)

    def backups(self):
        """(epoch, path) of every complete backup, newest first."""
        found = []
        for path in glob.glob(os.path.join(self.backup_dir, "epoch_*.weights.h5")):
            match = PATTERN.search(os.path.basename(path))
            if match:
                found.append((int(match.group(1)), path))
        return sorted(found, reverse=True)

    def _restore(self):
        backups = self.backups()
        if backups and self.model.optimizer is not None and not self.model.optimizer.built:
            self.model.optimizer.build(self.model.trainable_variables)  # its state is in the file too
        for epoch, path in backups:
            try:
                self.model.load_weights(path)
                lora.restore_state(self.model, path)
            except Exception as error:  # noqa: BLE001 - h5py and Keras raise several kinds for a bad file
                os.replace(path, f"{path}.unreadable")
                self.log(f"RunBackup: {path} cannot be read ({type(error).__name__}: {gist(error)}); set aside as "
                         f"{os.path.basename(path)}.unreadable, trying an older backup")  # fmt: skip
                continue
            self.log(f"RunBackup: resuming after epoch {epoch} from {path}")
            return epoch
        if backups:
            self.log(f"RunBackup: no readable backup in {self.backup_dir}; starting over from epoch 0")
        return 0

    def save(self, epoch, logs):
        if not finite_logs(logs):
            return  # a non-finite epoch is never a state to resume from
        run_files.save_weights(self.model, os.path.join(self.backup_dir, f"epoch_{epoch + 1:05d}.weights.h5"),
                               also=lora.add_state)  # fmt: skip
        for _, old in self.backups()[2:]:  # keep the newest and one fallback
            os.remove(old)


class _Saver(keras.callbacks.Callback):
    def __init__(self, backup):
        super().__init__()
        self.backup = backup

    def on_epoch_end(self, epoch, logs=None):
        self.backup.save(epoch, logs)


def gist(error, limit=300):
    """An exception's message on one line: its first two non-blank lines (Keras's "could not be loaded" names
    the count, then an example; the list of every layer after them would run to thousands of characters)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    text = " ".join(lines[:2])
    return text if len(text) <= limit else text[: limit - 3] + "..."


def finite_logs(logs):
    """False when the epoch's training loss is NaN or infinite (the run is stopping)."""
    loss = (logs or {}).get("loss")
    return loss is None or math.isfinite(float(loss))


def trim_epochs(path, keep_below):
    """Rewrite `path` (atomically) without rows of epoch >= `keep_below` and without rows a kill cut short.

    Rows whose `epoch` is empty (the measurement before training) are kept when an epoch was restored;
    with `keep_below` 0 the run starts over and measures them again, so they go too. Files without an
    `epoch` column are left alone.
    """
    fields, whole, cut = read_logged_rows(path)
    if "epoch" not in fields:
        return
    last_line = max([number for number, _ in whole] + cut, default=1)
    for number in cut:
        where = "the last line" if number == last_line else f"line {number}"
        warnings.warn(f"{path}: {where} is incomplete (an interrupted write); dropped", stacklevel=2)
    kept = [row for _, row in whole if (row["epoch"] == "" and keep_below > 0) or _before(row["epoch"], keep_below)]
    if cut or len(kept) != len(whole):
        run_files.write_csv(path, fields, kept)


def _before(epoch, keep_below):
    return epoch != "" and int(epoch) < keep_below
