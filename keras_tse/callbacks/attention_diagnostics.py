import keras
import numpy as np
from keras import ops

from keras_tse.analysis.similarity import restore_state, snapshot_state
from keras_tse.analysis.spectral import attention_entropy, qk_spectrum
from keras_tse.layers import _checks
from keras_tse.run_files import append_row


# Not registered for serialization, like TokenSimilarityMetric: a probe batch is data, not configuration.
class AttentionDiagnostics(keras.callbacks.Callback):
    """Attention entropy and QK eigenspectrum per block and head, tracked during `fit`.

    The two lenses of Bao, Hataya & Karakida (ICML 2024): the entropy of
    each attention row (low: entropy collapse, attention on few tokens),
    averaged over the probe batch's query rows, and the eigenvalue moments of
    each head's `W = W_Q W_K^T` (`keras_tse.analysis.spectral.qk_spectrum`: mean,
    variance, `xi = tr(W)/sqrt(tr(W^2))`; a concentrated spectrum, small
    variance, localizes attention without collapsing it).

    At train begin, each epoch end and, with `every_n_batches`, every N
    batches, it runs the probe batch up to each keras_tse block and calls the
    block's probe path (explicit softmax) for its attention matrices. The
    epoch logs get `entropy_XX` and `qk_variance_XX` (head means per block
    `XX`), so History and CSVLogger carry them (list this callback before
    CSVLogger); `csv_path` gets every measurement per block and head. The
    model's state is restored after each measurement (Transformer-XL blocks
    write their memory when called); with `warmup_inputs`, the segment before
    the probe runs first so that memory models are probed with a filled memory.

    Args:
        probe_inputs: a batch the model accepts.
        every_n_batches: int or `None`. Defaults to `None`.
        csv_path: file to append each measurement to, or `None`.
        warmup_inputs: a batch run (unmeasured) before the probe, or `None`.

    Reference:
        Bao, Hataya & Karakida, "Self-attention networks localize when
        QK-eigenspectrum concentrates", ICML 2024.
    """

    def __init__(self, probe_inputs, every_n_batches=None, csv_path=None, warmup_inputs=None):
        super().__init__()
        every_n_batches = _checks.positive_int("every_n_batches", every_n_batches, allow_none=True)
        self.probe_inputs, self.every_n_batches = probe_inputs, every_n_batches
        self.csv_path, self.warmup_inputs = csv_path, warmup_inputs
        self.records = []  # one dict per (measurement, block, head)
        self._step, self._epoch = 0, 0

    def on_train_begin(self, logs=None):
        self.measure("train_begin")

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch

    def on_train_batch_end(self, batch, logs=None):
        self._step += 1
        if self.every_n_batches and self._step % self.every_n_batches == 0:
            values = self.measure("batch")
            if logs is not None:
                logs.update(values)

    def on_epoch_end(self, epoch, logs=None):
        values = self.measure("epoch_end")
        if logs is not None:
            logs.update(values)

    def measure(self, when="now"):
        """Measure now; returns the per-block head means that go into the logs."""
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
        return values


def block_diagnostics(model, inputs, warmup_inputs=None):
    """Per keras_tse block of `model`: a dict of per-head NumPy arrays `entropy` (on `inputs`, mean
    over the batch and query rows) and the QK spectrum moments `mean`, `second_moment`, `variance`,
    `xi`. The model's state (a Transformer-XL memory) is left as found."""
    from keras_tse.layers import TransformerBlock

    blocks = [layer for layer in model.layers if isinstance(layer, TransformerBlock)]
    if not blocks:
        raise ValueError(f"No keras_tse Transformer blocks among the layers of model {model.name!r}.")
    batch = keras.tree.flatten(inputs)[0].shape[0]
    block_inputs = keras.Model(model.input, [block.input for block in blocks])
    initial = snapshot_state(model)
    if warmup_inputs is not None:
        block_inputs.predict(warmup_inputs, batch_size=batch, verbose=0)
    warmed = snapshot_state(model)
    xs = block_inputs.predict(inputs, batch_size=batch, verbose=0)
    xs = xs if isinstance(xs, (list, tuple)) else [xs]
    restore_state(warmed)  # each block sees the memory the probe would see
    results = []
    for block, x in zip(blocks, xs):
        _, scores = block(x, return_attention_scores=True)
        stats = {
            k: ops.convert_to_numpy(v)
            for k, v in qk_spectrum(*query_key_kernels(block.self_attention), num_heads=block.num_heads).items()
        }
        results.append({"entropy": np.mean(ops.convert_to_numpy(attention_entropy(scores)), axis=0), **stats})
    restore_state(initial)
    return results


def query_key_kernels(attention):
    """`(W_Q, W_K)`, each `[d, heads * head_dim]`, of a SelfAttention or RelativeAttention layer."""
    if hasattr(attention, "qkv_dense"):  # RelativeAttention: one fused [d, 3 * inner] kernel
        kernel = attention.qkv_dense.kernel
        inner = kernel.shape[-1] // 3
        return kernel[:, :inner], kernel[:, inner : 2 * inner]
    return attention.query_dense.kernel, attention.key_dense.kernel
