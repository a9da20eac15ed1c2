import os

import keras
import numpy as np

from keras_tse import run_files
from keras_tse.analysis.similarity import (
    block_outputs_model,
    cosine_similarity,
    measure_blocks,
    token_similarity,
)
from keras_tse.callbacks._probe_logs import ProbeSchedule
from keras_tse.run_files import append_row


# Not registered for serialization: `.keras` files hold no callbacks, and a probe batch is data,
# not configuration.
class TokenSimilarityMetric(ProbeSchedule):
    """Per-block token similarity of a fixed probe batch, tracked during `fit`.

    At train begin, at each epoch end and, with `every_n_batches`, every N
    training batches, runs the model's blocks on `probe_inputs` and measures
    token similarity (Definition 1) and cosine similarity (eq. 1) after each
    block, averaged over the probe batch, named `tsim_00, tsim_01, ...` and
    `tcos_00, ...` (block index). Every measurement is appended, as it is
    made, to `csv_path` (one row per measurement: epoch, step, when, then the
    values), so an interrupted run keeps all of them; with `tensorboard_dir`,
    each value is also a TensorBoard scalar (`tsim/block_07`) at the
    optimizer's step. fit's logs, and so its progress line, `History` and
    `CSVLogger`, get the last block's values only (`tsim_last`, `tcos_last`)
    unless `logs="all"`: a depth-80 model has 160 values per measurement. List
    this callback *before* `CSVLogger`, which writes the logs as it receives
    them. With `plot_dir`, train end writes `token_similarity_heatmap.png`
    (block x measurement) and `token_similarity_curves.png` (one curve per
    block).

    Under JAX, `fit` keeps the weights out of the model between epoch ends;
    Keras writes them back (`jax_state_sync`) whenever a callback reads
    `self.model`, which every measurement does, so a mid-epoch measurement
    sees the current weights (`tests/test_callbacks.py` pins this).

    Its cost is one forward pass of the probe batch per measurement;
    `overhead` holds the seconds spent measuring over the seconds of training
    seen so far.

    Args:
        probe_inputs: a batch the model accepts (NumPy array or dict of them).
        every_n_batches: int or `None`, also measure every N training batches.
            Defaults to `None` (train begin and epoch ends only).
        layers: `None` to find the blocks by kind (keras_tse's, KerasHub's
            encoders, decoders and ViT blocks, in tasks and backbones alike),
            or block layer names for other functional models. Defaults to
            `None`.
        plot_dir: directory for the PNG plots, or `None`. Defaults to `None`.
        csv_path: file to append each measurement to, or `None`. Defaults to
            `None`.
        warmup_inputs: a batch run before each measurement and not measured,
            or `None`. For Transformer-XL, the segment before `probe_inputs`,
            so that the probe runs with a filled memory as in training (the
            model's state is restored after each measurement). Defaults to
            `None`.
        logs: what goes into fit's logs: `"last"` (the last block's values,
            `tsim_last` and `tcos_last`), `"all"` (every block's) or
            `"none"`. Defaults to `"last"`.
        tensorboard_dir: folder for TensorBoard event files of every value,
            or `None`. Needs the `tensorboard` package, not TensorFlow.
            Defaults to `None`.

    Example:

    >>> probe = x_train[:64]
    >>> metric = TokenSimilarityMetric(probe, csv_path="similarity.csv", tensorboard_dir="tb")
    >>> model.fit(x_train, y_train, callbacks=[metric, keras.callbacks.CSVLogger("h.csv")])
    """

    def __init__(
        self,
        probe_inputs,
        every_n_batches=None,
        layers=None,
        plot_dir=None,
        csv_path=None,
        warmup_inputs=None,
        logs="last",
        tensorboard_dir=None,
    ):
        super().__init__(every_n_batches, logs, tensorboard_dir)
        self.probe_inputs = probe_inputs
        self.layers = layers
        self.plot_dir = plot_dir
        self.csv_path = csv_path
        self.warmup_inputs = warmup_inputs
        self.records = []  # one dict per measurement: epoch, step, when, tsim_*, tcos_*
        self._probe = None

    def _start(self):
        for where, expected, received in self._fed_shapes():
            if len(expected) != len(received[1:]) or any(e not in (None, r) for e, r in zip(expected, received[1:])):
                raise ValueError(
                    f"TokenSimilarityMetric's probe does not fit the model: the model takes inputs{where} "
                    f"[batch, *{expected}]. Received: probe_inputs{where}.shape={received}"
                )
        self._probe = block_outputs_model(self.model, self.layers)

    def _fed_shapes(self):
        """`(where, the model's input shape past the batch, the probe's shape)` of each input the probe feeds: the
        first for an array, each by name for a dict (a KerasHub model's `token_ids`, `padding_mask`, ...)."""
        specs = getattr(self.model, "inputs", None) or []
        if not isinstance(self.probe_inputs, dict):
            return [("", tuple(s.shape[1:]), np.shape(self.probe_inputs)) for s in specs[:1]]
        return [(f"[{s.name!r}]", tuple(s.shape[1:]), np.shape(self.probe_inputs.get(s.name))) for s in specs]

    def on_train_end(self, logs=None):
        if self.plot_dir and self.records:
            self.plot(self.plot_dir)

    def _measure(self, when):
        step = self._global_step()  # reads self.model first: under JAX that syncs the weights in
        tsim, tcos = measure_blocks(
            self._probe, self.probe_inputs, (token_similarity, cosine_similarity), self.warmup_inputs
        )
        width = len(str(len(tsim) - 1))
        values = {f"tsim_{i:0{width}d}": float(v) for i, v in enumerate(tsim)}
        values.update({f"tcos_{i:0{width}d}": float(v) for i, v in enumerate(tcos)})
        epoch = "" if when == "train_begin" else self._epoch
        record = {"epoch": epoch, "step": step, "when": when, **values}
        self.records.append(record)
        if self.csv_path:
            append_row(self.csv_path, record)
        return step, values

    def _global_step(self):
        """The optimizer's step count (right after a resume too); batches seen here otherwise."""
        optimizer = getattr(self.model, "optimizer", None)
        if optimizer is None or not optimizer.built:
            return self._step
        return int(keras.ops.convert_to_numpy(optimizer.iterations))

    def similarity_matrix(self):
        """NumPy `[num_blocks, num_measurements]` of token similarity, the heatmap's data."""
        keys = sorted(k for k in self.records[0] if k.startswith("tsim_"))
        return np.array([[r[k] for r in self.records] for k in keys])

    def plot(self, plot_dir):
        """Write the heatmap and per-block curves of the measurements so far into `plot_dir`."""
        import matplotlib
        import matplotlib.ticker

        matrix = self.similarity_matrix()
        labels = [{"train_begin": "start", "epoch_end": f"ep {r['epoch']}"}.get(r["when"], "") for r in self.records]
        fig, (ax,) = run_files.new_figure((max(6, 0.25 * matrix.shape[1]), max(4, 0.08 * matrix.shape[0])))
        image = ax.imshow(matrix, aspect="auto", origin="lower", vmin=0.0, vmax=1.0, cmap="viridis")
        ax.set(xlabel="measurement (train begin, batches, epoch ends)", ylabel="block", title="token similarity")
        ax.set_xticks(range(len(labels)), labels, fontsize=6, rotation=90)
        ax.yaxis.set_major_locator(matplotlib.ticker.MaxNLocator(integer=True))
        fig.colorbar(image, ax=ax)
        run_files.save_figure(fig, os.path.join(plot_dir, "token_similarity_heatmap.png"))

        fig, (ax,) = run_files.new_figure((7, 4))
        steps = [r["step"] for r in self.records]
        colours = matplotlib.colormaps["viridis"](np.linspace(0, 1, matrix.shape[0]))
        for block, (row, colour) in enumerate(zip(matrix, colours)):
            ax.plot(steps, row, color=colour, label=f"block {block}" if block in (0, matrix.shape[0] - 1) else None)
        ax.set(xlabel="training step", ylabel="token similarity", ylim=(0, 1.02), title="token similarity per block")
        ax.legend()
        run_files.save_figure(fig, os.path.join(plot_dir, "token_similarity_curves.png"))
