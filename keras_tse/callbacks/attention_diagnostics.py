import numpy as np

from keras_tse.analysis.diagnostics import block_diagnostics
from keras_tse.callbacks._probe_logs import ProbeSchedule
from keras_tse.run_files import append_row


# Not registered for serialization, like TokenSimilarityMetric: a probe batch is data, not configuration.
class AttentionDiagnostics(ProbeSchedule):
    """Attention entropy and QK eigenspectrum per block and head, tracked during `fit`.

    The two lenses of Bao, Hataya & Karakida (ICML 2024): the entropy of
    each attention row (low: entropy collapse, attention on few tokens),
    averaged over the probe batch's query rows, and the eigenvalue moments of
    each head's `W = W_Q W_K^T` (`keras_tse.analysis.spectral.qk_spectrum`: mean,
    variance, `xi = tr(W)/sqrt(tr(W^2))`; a concentrated spectrum, small
    variance, localizes attention without collapsing it).

    At train begin, each epoch end and, with `every_n_batches`, every N
    batches, it runs the probe batch up to each keras_tse block and calls the
    block's probe path (explicit softmax) for its attention matrices. Its
    values are `entropy_XX` and `qk_variance_XX` (head means per block `XX`):
    fit's logs, and so History and CSVLogger (list this callback before
    CSVLogger), get the last block's (`entropy_last`, `qk_variance_last`)
    unless `logs="all"`; `tensorboard_dir` gets every one as a scalar, and
    `csv_path` every measurement per block and head. The
    model's state is restored after each measurement (Transformer-XL blocks
    write their memory when called); with `warmup_inputs`, the segment before
    the probe runs first so that memory models are probed with a filled memory.

    Args:
        probe_inputs: a batch the model accepts.
        every_n_batches: int or `None`. Defaults to `None`.
        csv_path: file to append each measurement to, or `None`.
        warmup_inputs: a batch run (unmeasured) before the probe, or `None`.
        logs: `"last"`, `"all"` or `"none"`, as in TokenSimilarityMetric.
        tensorboard_dir: folder for TensorBoard scalars, or `None`.

    Reference:
        Bao, Hataya & Karakida, "Self-attention networks localize when
        QK-eigenspectrum concentrates", ICML 2024.
    """

    def __init__(
        self, probe_inputs, every_n_batches=None, csv_path=None, warmup_inputs=None, logs="last", tensorboard_dir=None
    ):
        super().__init__(every_n_batches, logs, tensorboard_dir)
        self.probe_inputs = probe_inputs
        self.csv_path, self.warmup_inputs = csv_path, warmup_inputs
        self.records = []  # one dict per (measurement, block, head)

    def measure(self, when="now"):
        """Measure now; returns the per-block head means that go into the logs."""
        return self._timed(when)

    def _measure(self, when):
        per_block = block_diagnostics(self.model, self.probe_inputs, self.warmup_inputs)
        width = len(str(len(per_block) - 1))
        values = {}
        for i, stats in enumerate(per_block):
            values[f"entropy_{i:0{width}d}"] = float(np.mean(stats["entropy"]))
            values[f"qk_variance_{i:0{width}d}"] = float(np.mean(stats["variance"]))
            for head in range(len(stats["entropy"])):
                record = {
                    "epoch": "" if when == "train_begin" else self._epoch,
                    "step": self._step,
                    "when": when,
                    "block": i,
                    "head": head,
                    **{k: float(v[head]) for k, v in stats.items()},
                }
                self.records.append(record)
                if self.csv_path:
                    append_row(self.csv_path, record)
        return self._step, values
