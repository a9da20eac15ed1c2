"""`best.keras` and `last.keras` of a run folder, each written whole.

Keras' `ModelCheckpoint` writes the target in place: a kill during the write leaves a truncated zip
that Keras then reports as "File not found". Here each file goes through a temporary sibling and a
rename (`keras_tse.run_files.save_model`), so it is always the previous complete model or the new one.
An epoch whose training loss is not finite writes neither: the last good model stays.
"""

import math

import keras

from keras_tse import run_files
from keras_tse.callbacks.run_backup import finite_logs


class RunCheckpoints(keras.callbacks.Callback):
    """After each finite epoch: the model to `last_path`; to `best_path` when `monitor` improved.

    Args:
        last_path: `.keras` file of the newest model, or None.
        best_path: `.keras` file of the model with the lowest `monitor` so far, or None.
        monitor: the epoch log that decides "best" (lower is better). Defaults to `"val_loss"`.
        best_so_far: the lowest `monitor` of the epochs before a resume (from the run's history).
    """

    def __init__(self, last_path=None, best_path=None, monitor="val_loss", best_so_far=math.inf):
        super().__init__()
        self.last_path, self.best_path, self.monitor = last_path, best_path, monitor
        self.best = best_so_far

    def on_epoch_end(self, epoch, logs=None):
        if not finite_logs(logs):
            return
        if self.last_path:
            run_files.save_model(self.model, self.last_path)
        value = (logs or {}).get(self.monitor)
        if self.best_path and value is not None and math.isfinite(float(value)) and float(value) < self.best:
            self.best = float(value)
            run_files.save_model(self.model, self.best_path)
