"""One cell of the `bert_ptb` study (`recipes/lab/bert_ptb_study.py`, which holds the plan and its reasons): an
arm's masked-word model trained into a run folder through the runner every recipe uses
(`keras_tse.training.runner.train_in_folder`), so a cell killed at any moment resumes from its last finished
`CHUNK` of steps (RunBackup) on the batches it would have trained on.

    KERAS_BACKEND=jax python -m recipes.lab.bert_ptb_cell OUT LAYOUT DEPTH LR SEED

The folder gets `summary.json` with the row's numbers (`steps`, `train_loss`, `valid_loss`, `test_loss`,
`test_accuracy`, `similarity_init`, `similarity_end`, `loss_curve`, `machine`); a loss that became non-finite
stops the cell with status 3 (a row read as diverged).
"""

import argparse
import json
import os
import sys

import keras
import numpy as np

from keras_tse import _checks
from recipes.lab.bert_ptb_study import (
    BATCH,
    EVAL_WINDOWS,
    FFN,
    HEADS,
    LAYOUTS,
    MASKED,
    STEPS,
    TOKENS,
    VOCABULARY,
    WIDTH,
)

CHUNK = 500  # steps an epoch: the cell is validated and backed up every CHUNK steps
CURVE_EVERY = 50  # steps a point of the loss curve
PROBE_WINDOWS = 64  # validation windows the token similarity is measured on


def capped(ids, unknown):
    """Each split's ids with every word past the `VOCABULARY` most frequent read as `unknown` (`<unk>`'s id):
    the vocabulary lists the training words by frequency, so the kept words are the first ids."""
    if unknown >= VOCABULARY:
        raise ValueError(f"`<unk>` must be among the {VOCABULARY} kept words. Received: its id {unknown}")
    return {split: np.where(split_ids < VOCABULARY, split_ids, unknown) for split, split_ids in ids.items()}


def windows(ids, count, rng):
    """`count` windows of `TOKENS` consecutive ids at random offsets."""
    starts = rng.integers(0, len(ids) - TOKENS, count)
    return ids[starts[:, None] + range(TOKENS)]


def masked(batch, mask_id, rng):
    """BERT's inputs and targets: `MASKED` positions a window replaced by the mask id."""
    positions = np.sort(np.argsort(rng.random(batch.shape), axis=1)[:, :MASKED], axis=1).astype("int32")
    targets = np.take_along_axis(batch, positions, axis=1)
    tokens = batch.copy()
    np.put_along_axis(tokens, positions, mask_id, axis=1)
    inputs = {
        "token_ids": tokens.astype("int32"),
        "segment_ids": np.zeros_like(tokens, dtype="int32"),
        "padding_mask": np.ones_like(tokens, dtype="int32"),
        "mask_positions": positions,
    }
    return inputs, targets.astype("int32")


class MaskedWindows(keras.utils.PyDataset):
    """`steps_per_epoch` batches an epoch of masked windows at random offsets. Batch `i` of epoch `e` is global
    step `g = e * steps_per_epoch + i` and is drawn from `(seed, g)` alone; the epoch comes from `fit`'s
    callback (`set_epoch`, called by the runner), so a resumed run trains on the batches it would have."""

    def __init__(self, ids, mask_id, seed, batch_size, steps_per_epoch):
        super().__init__()
        self.ids, self.mask_id, self.seed = ids, mask_id, seed
        self.batch_size, self.steps_per_epoch, self.epoch = batch_size, steps_per_epoch, 0

    def __len__(self):
        return self.steps_per_epoch

    def __getitem__(self, index):
        rng = np.random.default_rng([self.seed, self.epoch * self.steps_per_epoch + index])
        return masked(windows(self.ids, self.batch_size, rng), self.mask_id, rng)

    def set_epoch(self, epoch):
        self.epoch = epoch


def build(layout, depth, vocabulary_size):
    """The arm's masked-word model: KerasHub's BERT (`post`), `keras_tse.deescalate` of it, or its pre-norm twin."""
    import keras_hub

    import keras_tse
    from keras_tse.zoo.preprocessing import replayed

    bert = keras_hub.models.BertBackbone(
        vocabulary_size=vocabulary_size, num_layers=depth, num_heads=HEADS, hidden_dim=WIDTH,
        intermediate_dim=FFN, dropout=0.0, max_sequence_length=TOKENS,
    )  # fmt: skip
    if layout == "deescalate":
        backbone = keras_tse.deescalate(bert)
    elif layout == "pre":

        def pre_norm(layer):
            if isinstance(layer, keras_hub.layers.TransformerEncoder):
                return keras_hub.layers.TransformerEncoder.from_config({**layer.get_config(), "normalize_first": True})
            return layer

        inputs = {k: keras.Input(v.shape[1:], dtype=v.dtype, name=k) for k, v in bert.input.items()}
        backbone = replayed(bert, inputs, layers=pre_norm)
    else:
        backbone = bert
    inputs = {**{k: keras.Input((TOKENS,), dtype="int32", name=k) for k in bert.input},
              "mask_positions": keras.Input((MASKED,), dtype="int32", name="mask_positions")}  # fmt: skip
    head = keras_hub.layers.MaskedLMHead(  # tied to the arm's own input embedding (`deescalate` copies it)
        vocabulary_size=vocabulary_size, token_embedding=backbone.get_layer("token_embedding"),
        intermediate_activation="gelu", name="mlm_head",
    )  # fmt: skip
    features = backbone({k: inputs[k] for k in bert.input})["sequence_output"]
    return keras.Model(inputs, head(features, inputs["mask_positions"]), name=f"bert_{layout}_{depth}"), backbone


def corpus():
    """Penn Treebank's splits as ids with the `VOCABULARY` most frequent words kept, and the mask's id."""
    from keras_tse.data.ptb import load_ptb

    ids, vocab = load_ptb(download=False)
    return capped(ids, vocab.index["<unk>"]), VOCABULARY


def train_cell(out, layout, depth, learning_rate, seed):
    """Train one cell into run folder `out` (resuming one a kill interrupted); its summary (the row's numbers)."""
    from keras_tse.machine import machine_name
    from keras_tse.run_files import read_steps, similarity_start_end
    from keras_tse.training.language_model import IntervalLoss
    from keras_tse.training.runner import train_in_folder

    ids, mask_id = corpus()
    keras.utils.set_random_seed(seed)
    model, _ = build(layout, depth, mask_id + 1)
    held_out = np.random.default_rng(1234)  # one fixed draw of windows and positions for every cell
    valid = masked(windows(ids["valid"], EVAL_WINDOWS, held_out), mask_id, held_out)
    test = masked(windows(ids["test"], EVAL_WINDOWS, held_out), mask_id, held_out)
    schedule = keras.optimizers.schedules.CosineDecay(learning_rate, STEPS)
    optimizer = keras.optimizers.AdamW(schedule, weight_decay=0.01, clipnorm=1.0)
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    model.compile(optimizer, loss, metrics=["sparse_categorical_accuracy"])
    steps_csv = os.path.join(out, "steps.csv")

    def summarize(history, similarity, seconds):
        steps, losses = read_steps(steps_csv)
        test_loss, test_accuracy = model.evaluate(*test, batch_size=128, verbose=0)
        start, end = similarity_start_end(similarity.csv_path)
        return {
            "steps": int(steps[-1]), "train_loss": float(losses[-1]), "valid_loss": float(history["val_loss"][-1]),
            "test_loss": float(test_loss), "test_accuracy": float(test_accuracy),
            "similarity_init": start[-1], "similarity_end": end[-1],
            "loss_curve": ";".join(f"{v:.4g}" for v in losses), "machine": machine_name(),
        }  # fmt: skip

    cell = {"layout": layout, "depth": depth, "learning_rate": learning_rate, "seed": seed}
    settings = {"width": WIDTH, "heads": HEADS, "ffn": FFN, "tokens": TOKENS, "masked": MASKED, "steps": STEPS,
                "batch": BATCH, "vocabulary": VOCABULARY, "eval_windows": EVAL_WINDOWS, "chunk": CHUNK}  # fmt: skip
    return train_in_folder(
        model,
        out,
        {"model": model.name, "cell": cell, "study": settings, "backend": keras.backend.backend()},
        dict(
            x=MaskedWindows(ids["train"], mask_id, seed, BATCH, CHUNK),
            epochs=STEPS // CHUNK,
            validation_data=valid,
            shuffle=False,
        ),  # the batches in step order: a resumed run trains on the ones it would have
        {k: v[:PROBE_WINDOWS] for k, v in valid[0].items()},
        summarize,
        extra_callbacks=[IntervalLoss(steps_csv, CURVE_EVERY, CHUNK)],
        verbose=2,  # a line a chunk in the cell's log: its steps' time, where no cell finishes
    )


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m recipes.lab.bert_ptb_cell", description=__doc__.split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument("layout", choices=LAYOUTS)
    parser.add_argument("depth", type=int)
    parser.add_argument("learning_rate", type=float)
    parser.add_argument("seed", type=int)
    args = parser.parse_args(argv)
    summary = train_cell(args.out, args.layout, args.depth, args.learning_rate, args.seed)
    print(json.dumps({"cell": os.path.basename(args.out), "stopped": "stopped" in summary}))
    return _checks.STOPPED_STATUS if "stopped" in summary else 0  # a row read as diverged


if __name__ == "__main__":
    sys.exit(main())
