"""Losses for models whose outputs are already log-probabilities (Transformer-XL's adaptive softmax)."""

import keras
from keras import ops


@keras.saving.register_keras_serializable(package="keras_tse")
class LogProbabilityCrossentropy(keras.losses.Loss):
    """Mean negative log-likelihood `-log p(target)` read from log-probabilities `[..., vocab]`.

    `SparseCategoricalCrossentropy(from_logits=True)` would give the same value
    (a log-softmax of log-probabilities changes nothing) after one more pass
    over the `[batch, T, vocab]` tensor; this gathers the targets' entries only.
    `exp` of its mean over a text is the perplexity.
    """

    def __init__(self, name="log_probability_crossentropy", reduction="sum_over_batch_size", dtype=None):
        super().__init__(name=name, reduction=reduction, dtype=dtype)

    def call(self, y_true, y_pred):
        targets = ops.cast(y_true, "int32")[..., None]
        return -ops.take_along_axis(ops.cast(y_pred, "float32"), targets, axis=-1)[..., 0]

    def get_config(self):
        return {"name": self.name, "reduction": self.reduction}
