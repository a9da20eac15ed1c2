"""Stop training at the first NaN or infinite loss, say where, and leave a note in the run folder.

Like `keras.callbacks.TerminateOnNaN`, plus the reason: one printed line and `stopped.json`
(`{"reason", "epoch", "batch", "loss"}`) in the run folder, so a finished-looking run says why it
ended. The checkpoint and backup callbacks skip a non-finite epoch, so the last good state stays.
"""

import math
import os

import keras

from keras_tse import run_files


class StopOnNonFinite(keras.callbacks.Callback):
    """Set `model.stop_training` at the first batch whose loss is NaN or infinite.

    Args:
        run_dir: folder for `stopped.json`, or None for none.
        log: a function taking one line.
    """

    def __init__(self, run_dir=None, log=print):
        super().__init__()
        self.run_dir, self.log = run_dir, log
        self.stopped = None
        self._epoch = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        loss = (logs or {}).get("loss")
        if loss is None or math.isfinite(float(loss)) or self.stopped:
            return
        self.stopped = {
            "reason": "non-finite training loss",
            "epoch": self._epoch,
            "batch": int(batch),
            "loss": str(float(loss)),
        }
        self.model.stop_training = True
        kept = "the last finite epoch's checkpoint is kept" if self._epoch else "no epoch had finished to keep"
        self.log(f"Stopped: the training loss is {float(loss)} at epoch {self._epoch}, batch {batch}; {kept}.")
        if self.run_dir:
            run_files.write_json(os.path.join(self.run_dir, "stopped.json"), self.stopped)
