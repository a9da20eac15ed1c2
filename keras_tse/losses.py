"""Losses: for models whose outputs are already log-probabilities (Transformer-XL's adaptive softmax),
and for classifiers trained on smoothed or mixed targets, with the accuracy that reads mixed targets."""

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


def is_soft_target(y_true, y_pred):
    """Whether `y_true` is a distribution over the classes (as wide as the logits), not class ids."""
    return len(y_true.shape) == len(y_pred.shape) and y_true.shape[-1] == y_pred.shape[-1] and y_pred.shape[-1] != 1


@keras.saving.register_keras_serializable(package="keras_tse")
def accuracy(y_true, y_pred):
    """Top-1 accuracy against class ids, or against the largest class of soft targets (MixUp, CutMix):
    training batches may be mixed while the test set keeps its ids, and one metric serves both."""
    if is_soft_target(y_true, y_pred):
        y_true = ops.argmax(y_true, axis=-1)
    return keras.metrics.sparse_categorical_accuracy(y_true, y_pred)


@keras.saving.register_keras_serializable(package="keras_tse")
class SparseCategoricalCrossentropyWithSmoothing(keras.losses.Loss):
    """Cross-entropy of logits against integer labels smoothed as Szegedy et al. 2016 (Sec. 7) do:
    the target puts `1 - label_smoothing` on the label and spreads `label_smoothing` evenly over every
    class. Keras smooths one-hot targets only (`CategoricalCrossentropy(label_smoothing=)`); this
    one-hots integer labels and hands them to it, so the pipelines keep their integer labels. Soft
    targets (a MixUp or CutMix batch: `y_true` as wide as the logits) are taken as they are.

    Args:
        label_smoothing: float in [0, 1). `0` is `SparseCategoricalCrossentropy(from_logits=True)`.
    """

    def __init__(
        self, label_smoothing=0.0, name="sparse_categorical_crossentropy", reduction="sum_over_batch_size", dtype=None
    ):
        super().__init__(name=name, reduction=reduction, dtype=dtype)
        if not 0.0 <= label_smoothing < 1.0:
            raise ValueError(f"`label_smoothing` must be in [0, 1). Received: label_smoothing={label_smoothing!r}")
        self.label_smoothing = float(label_smoothing)

    def call(self, y_true, y_pred):
        labels = (
            y_true
            if is_soft_target(y_true, y_pred)
            else ops.one_hot(ops.reshape(ops.cast(y_true, "int32"), ops.shape(y_pred)[:-1]), ops.shape(y_pred)[-1])
        )
        return keras.losses.categorical_crossentropy(
            labels, y_pred, from_logits=True, label_smoothing=self.label_smoothing
        )

    def get_config(self):
        return {"label_smoothing": self.label_smoothing, "name": self.name, "reduction": self.reduction}
