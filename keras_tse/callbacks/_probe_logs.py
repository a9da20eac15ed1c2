"""Where a probing callback's per-block values go besides its own CSV: the epoch logs (and so fit's
progress line, History and CSVLogger) and TensorBoard. Shared by TokenSimilarityMetric and
AttentionDiagnostics, whose values are named `<measure>_<block>` (`tsim_07`, `qk_variance_12`).

A depth-80 model has 160 similarity values per measurement: on the progress line they bury the loss.
So the logs get the last block's value of each measure by default (`tsim_last`), and every
value goes to the callback's CSV and, when asked, to TensorBoard as one scalar per block.
"""

import os
import time

LOGS = ("last", "all", "none")


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
