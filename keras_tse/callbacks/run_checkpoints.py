"""`best.keras` and `last.keras` of a run folder, each written whole.

Keras' `ModelCheckpoint` writes the target in place: a kill during the write leaves a truncated zip
that Keras then reports as "File not found". Here each file goes through a temporary sibling and a
rename (`keras_tse.run_files.save_model`), so it is always the previous complete model or the new one.
An epoch whose training loss is not finite writes neither: the last good model stays.
"""

import math

import keras

from keras_tse import lora, run_files
from keras_tse.callbacks.run_backup import finite_logs
from keras_tse.run_files import read_history


class RunCheckpoints(keras.callbacks.Callback):
    """After each finite epoch: the model to `last_path`; to `best_path` when `monitor` improved.

    Args:
        last_path: `.keras` file of the newest model, or None.
        best_path: `.keras` file of the model with the lowest `monitor` so far, or None.
        monitor: the epoch log that decides "best" (lower is better). Defaults to `"val_loss"`.
        history_path: the run's `history.csv`, or None. Its lowest `monitor` at train begin is the best so far:
            read then, after `RunBackup` has cut it to the epochs the run resumes after, so that the rows of
            an attempt it could not resume (it starts over) keep no `best_path` from being written.
    """

    def __init__(self, last_path=None, best_path=None, monitor="val_loss", history_path=None):
        super().__init__()
        self.last_path, self.best_path, self.monitor = last_path, best_path, monitor
        self.history_path = history_path
        self.best = math.inf

    def on_train_begin(self, logs=None):
        history = read_history(self.history_path) if self.history_path else {}
        self.best = min((v for v in history.get(self.monitor, []) if math.isfinite(v)), default=math.inf)

    def on_epoch_end(self, epoch, logs=None):
        if not finite_logs(logs):
            return
        if self.last_path:
            self._save(self.last_path)
        value = (logs or {}).get(self.monitor)
        if self.best_path and value is not None and math.isfinite(float(value)) and float(value) < self.best:
            self.best = float(value)
            self._save(self.best_path)

    def _save(self, path):
        """The model (its adapters merged, `zoo.lora`), and where it has adapters, them beside it, as `.lora.h5`."""
        run_files.save_model(self.model, path)
        if lora.lora_layers(self.model):
            lora.save_lora_weights(self.model, path.removesuffix(".keras") + lora.SUFFIX)
