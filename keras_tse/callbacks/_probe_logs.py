"""When a probing callback measures, and where its per-block values go besides its own CSV: the
epoch logs (and so fit's progress line, History and CSVLogger) and TensorBoard. Shared by
TokenSimilarityMetric and AttentionDiagnostics (`ProbeSchedule`), whose values are named
`<measure>_<block>` (`tsim_07`, `qk_variance_12`).

A depth-80 model has 160 similarity values per measurement: on the progress line they bury the loss.
So the logs get the last block's value of each measure by default (`tsim_last`), and every
value goes to the callback's CSV and, when asked, to TensorBoard as one scalar per block.
"""

import os
import time

import keras

from keras_tse import _checks

LOGS = ("last", "all", "none")


class ProbeSchedule(keras.callbacks.Callback):
    """Measure at train begin, every `every_n_batches` training batches and at each epoch end; put the
    values into fit's logs (as `logs` says) and TensorBoard; count the seconds spent measuring.

    A subclass writes `_measure(when)`, returning `(step, {"<measure>_<block>": value})` after keeping
    its own records, and may write `_start()`, run at train begin before the first measurement.
    """

    def __init__(self, every_n_batches=None, logs="last", tensorboard_dir=None):
        super().__init__()
        self.every_n_batches = _checks.positive_int("every_n_batches", every_n_batches, allow_none=True)
        self.logs = _checks.one_of("logs", logs, LOGS)
        self._tensorboard = ScalarWriter(tensorboard_dir) if tensorboard_dir else None
        self._step, self._epoch = 0, 0
        self._seconds_measuring, self._seconds_training, self._clock = 0.0, 0.0, None

    @property
    def overhead(self):
        """Seconds measuring / seconds training (fit time outside this callback), so far; None before a
        training batch has ended (a run resumed with no step left trains none: no ratio to give)."""
        if self._step == 0:
            return None
        return self._seconds_measuring / max(self._seconds_training, 1e-9)

    def on_train_begin(self, logs=None):
        self._start()
        self._timed("train_begin")
        self._clock = time.perf_counter()

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        self._step += 1
        if self.every_n_batches and self._step % self.every_n_batches == 0:
            self._into_logs(logs, "batch")

    def on_epoch_end(self, epoch, logs=None):
        self._into_logs(logs, "epoch_end")

    def _start(self):
        pass

    def _into_logs(self, logs, when):
        if self._clock is not None:
            self._seconds_training += time.perf_counter() - self._clock
        values = self._timed(when)
        if logs is not None:
            logs.update(for_logs(values, self.logs))
        self._clock = time.perf_counter()

    def _timed(self, when):
        start = time.perf_counter()
        step, values = self._measure(when)
        if self._tensorboard is not None:
            self._tensorboard.write(step, values)
        self._seconds_measuring += time.perf_counter() - start
        return values


def for_logs(values, logs):
    """The part of `{"<measure>_<block>": value}` that goes into fit's logs under `logs`."""
    if logs == "all":
        return dict(values)
    if logs == "none":
        return {}
    last = {}
    for key, value in values.items():  # blocks come in order, so the last one seen per measure stays
        last[key.rsplit("_", 1)[0] + "_last"] = value
    return last


class ScalarWriter:
    """TensorBoard event files of `<measure>/<block>` scalars, through the `tensorboard` package's own
    writer (no TensorFlow needed, so it works on every backend). Keras' TensorBoard callback only sees
    what is in the logs, and writes with `tf.summary`, which JAX and PyTorch installs lack."""

    def __init__(self, logdir):
        try:
            from tensorboard.compat.proto import event_pb2, summary_pb2
            from tensorboard.summary.writer.event_file_writer import EventFileWriter
        except ImportError as error:
            raise ImportError(
                f"tensorboard_dir={logdir!r} needs the `tensorboard` package: pip install tensorboard"
            ) from error
        os.makedirs(logdir, exist_ok=True)
        self._event, self._summary = event_pb2.Event, summary_pb2.Summary
        self._writer = EventFileWriter(logdir)

    def write(self, step, values):
        summary = self._summary(
            value=[self._summary.Value(tag=_tag(k), simple_value=float(v)) for k, v in values.items()]
        )
        self._writer.add_event(self._event(wall_time=time.time(), step=int(step), summary=summary))
        self._writer.flush()  # on disk as measured: an interrupted run keeps its scalars


def _tag(key):
    measure, block = key.rsplit("_", 1)
    return f"{measure}/block_{block}"
