"""Training a Transformer-XL language model into a run folder (the WikiText-103 recipe, Sec. 3.4).

Transformer-XL counts training in optimizer steps over an ordered stream that wraps around at the
corpus end, and evaluates every `eval_interval` steps. Here a Keras epoch is one evaluation
interval of a `keras_tse.data.SegmentStream` (epoch `e`, batch `i` reads the stream at step
`e * eval_interval + i`, so a resumed run reads on where it stopped), validation perplexity (with
memory) is measured at each epoch end, and the memory is reset at each epoch start and before each
validation (`TransformerXL.fit`): one segment of context lost per evaluation interval. Besides the
run folder of `keras_tse.training.runner`, `steps.csv` holds the mean training loss of every
`log_interval` steps (the curve of Fig. 7) and `history.csv` adds `perplexity` and `val_perplexity`.
"""

import math
import os

import keras
import numpy as np

from keras_tse import run_files
from keras_tse._weights import assign_copy
from keras_tse.callbacks.reset_memory import reset_memory
from keras_tse.data.text import SegmentStream, lm_segments
from keras_tse.processes import process
from keras_tse.training import optimizers
from keras_tse.training.runner import summarize, train_run
from keras_tse.training.tasks import LANGUAGE_MODELLING
from keras_tse.zoo.families.transformer_xl import check_token_ids


def make_lm_optimizer(config, model=None):
    """Adam with cosine decay from `learning_rate` to `min_learning_rate` over `steps`, no warm-up,
    by default (Sec. 3.4); the kit's settings otherwise (`keras_tse.training.optimizers`)."""
    return optimizers.make_optimizer(config, config.steps, model)


def fit_language_model(
    model, train_ids, valid_ids, run_dir, config, extra_config=None, test_ids=None, causal_twin=None, test_words=None,
    **options,
):  # fmt: skip
    """Train language model `model` (a Transformer-XL, a GPT) on the token stream `train_ids` into
    `run_dir`; return its summary.

    The model's `segment_len` and `config.batch_size` (the model's own where it has one: Transformer-XL's
    memory fixes it) cut the streams (`lm_segments`). A resumed run
    continues the training stream where its last finished epoch left it. Returns the stored
    summary without training if the folder holds a finished run.

    `causal_twin`, a function building a model with the same weights' shapes (a leaky model's causal
    counterpart), adds `test_perplexity_causal`: the trained weights evaluated in that model. `test_words`, the
    test split's words where its tokens are subwords, adds `test_perplexity_per_word` (`per_word`). `options`:
    `runner.train_in_folder`'s (`checkpoints`, `verbose`, `checked`).
    """
    batch, segment = model.input.shape[0] or config.batch_size, model.input.shape[1]
    vocab_size = model.output.shape[-1]
    for name, ids in (("train_ids", train_ids), ("valid_ids", valid_ids), ("test_ids", test_ids)):
        if ids is not None:
            check_token_ids(name, np.asarray(ids), vocab_size)
    if batch != config.batch_size:
        raise ValueError(f"The model was built for batch size {batch}. Received: config.batch_size={config.batch_size}")
    # several processes training together: each feeds its part of every batch (its streams)
    shard, local = process(), batch // process()[1]
    stream = SegmentStream.from_ids(train_ids, batch, segment, config.eval_interval, shard)  # the ids, not a copy
    x_valid, y_valid = lm_segments(valid_ids, batch, segment, shard)
    x_probe = lm_segments(valid_ids, batch, segment)[0]  # whole batches: the probe runs on this process alone
    LANGUAGE_MODELLING.compile(model, make_lm_optimizer(config, model), config.jit_compile)
    fit_kwargs = dict(
        x=stream, epochs=config.epochs, validation_data=(x_valid, y_valid), validation_batch_size=local, shuffle=False
    )
    callbacks = [
        *optimizers.ema_callbacks(config),
        PerplexityLogs(),
        IntervalLoss(os.path.join(run_dir, "steps.csv"), config.log_interval, config.eval_interval),
    ]
    # The probe: the second validation segment, after the first has filled the memory, as every
    # training segment but the first of each epoch sees it.

    def summarize_with_test(history, similarity, seconds):
        summary = summarize(history, similarity, seconds, LANGUAGE_MODELLING.summary)
        summary["best_chosen_on"] = "validation"  # the corpus's own valid split (`run_files.chosen_checkpoint`)
        if test_ids is not None:  # once, at the end, with the memory: the number a paper reports
            summary["test_loss"] = evaluate_stream(model, test_ids, batch)
            summary["test_perplexity"] = math.exp(min(summary["test_loss"], 700.0))
        if test_ids is not None and test_words is not None:
            summary.update(per_word(summary["test_loss"], len(test_ids), test_words))
        if test_ids is not None and causal_twin is not None:
            summary["test_loss_causal"] = evaluate_stream(_with_weights_of(model, causal_twin()), test_ids, batch)
            summary["test_perplexity_causal"] = math.exp(min(summary["test_loss_causal"], 700.0))
        return summary

    probe, warmup = x_probe[batch : 2 * batch], x_probe[:batch]
    return train_run(
        model, run_dir, config, extra_config, fit_kwargs, probe, summarize_with_test, probe_warmup=warmup,
        extra_callbacks=callbacks, **options,
    )  # fmt: skip


def per_word(token_loss, tokens, words):
    """A subword model's test perplexity per word: its mean loss a token times the split's tokens a word, so
    `exp(loss * tokens / words)`, the same total log-likelihood spread over the words (each line's end counted
    as one, as word-level runs count `<eos>`); the ratio is the whole split's, the loss the evaluated streams'."""
    return {
        "test_tokens": tokens, "test_words": words,
        "test_perplexity_per_word": math.exp(min(token_loss * tokens / words, 700.0)),
    }  # fmt: skip


def _with_weights_of(model, twin):
    """`twin`, compiled, holding `model`'s trained weights (the same list of shapes, in order)."""
    if [tuple(w.shape) for w in model.trainable_weights] != [tuple(w.shape) for w in twin.trainable_weights]:
        raise ValueError(f"{twin.name} does not have {model.name}'s weights; it cannot evaluate them.")
    for source, target in zip(model.trainable_weights, twin.trainable_weights):
        assign_copy(target, source)
    return LANGUAGE_MODELLING.compile(twin)


def evaluate_stream(model, ids, batch_size=None):
    """Mean next-token loss (nats) over the ordered stream `ids`, memory reset first and carried throughout.

    As Transformer-XL evaluates: the corpus cut into the model's `batch_size` streams, read in
    segments in order, each segment attending to the memory of the ones before it.
    """
    batch, segment = model.input.shape[0] or batch_size, model.input.shape[1]
    x, y = lm_segments(ids, batch, segment, process())  # this process's streams, when several train together
    reset_memory(model)
    loss = model.evaluate(x, y, batch_size=batch // process()[1], verbose=0, return_dict=True)["loss"]
    reset_memory(model)
    return float(loss)


class IntervalLoss(keras.callbacks.Callback):
    """Appends the mean training loss of every `every` steps to a CSV (`step, loss`), as it goes.

    Keras reports the running mean of the epoch so far; the mean of steps `j+1..k` is
    `(k * mean_k - j * mean_j) / (k - j)`.
    """

    def __init__(self, path, every, steps_per_epoch):
        super().__init__()
        self.path, self.every, self.steps_per_epoch = path, every, steps_per_epoch
        self._epoch, self._last = 0, (0, 0.0)

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch, self._last = epoch, (0, 0.0)

    def on_train_batch_end(self, batch, logs=None):
        seen = batch + 1
        if seen % self.every or not logs or "loss" not in logs:
            return
        mean = float(logs["loss"])
        last_seen, last_mean = self._last
        interval = (seen * mean - last_seen * last_mean) / (seen - last_seen)
        self._last = (seen, mean)
        step = self._epoch * self.steps_per_epoch + seen
        # epoch: RunBackup drops a killed epoch's rows
        run_files.append_row(self.path, {"step": step, "loss": f"{interval:.6f}", "epoch": self._epoch})


class PerplexityLogs(keras.callbacks.Callback):
    """Adds `perplexity = exp(loss)` and `val_perplexity` to the epoch logs (list it before CSVLogger)."""

    def on_epoch_end(self, epoch, logs=None):
        if logs is None:
            return
        for key in ("loss", "val_loss"):
            if key in logs:
                logs[key.replace("loss", "perplexity")] = math.exp(min(float(logs[key]), 700.0))


def summary_line(variant, s):
    return (
        f"{variant:>11}: {s['epochs']} evaluations, train loss {s['train_loss']:.4f}, valid loss "
        f"{s['valid_loss']:.4f}, valid ppl {s['valid_perplexity']:.2f} (best {s['best_valid_perplexity']:.2f}), "
        + (f"test ppl {s['test_perplexity']:.2f}, " if "test_perplexity" in s else "")
        + (f"{s['test_perplexity_per_word']:.2f} a word, " if "test_perplexity_per_word" in s else "")
        + (f"read causally {s['test_perplexity_causal']:.2f}, " if "test_perplexity_causal" in s else "")
        + f"t_sim last block {s['last_block_similarity_start']:.3f} -> {s['last_block_similarity_end']:.3f}"
    )
