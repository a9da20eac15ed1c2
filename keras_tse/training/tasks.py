"""The two tasks a zoo model trains for, each owning its loss, metrics and summary, and the one place
where keras_tse compiles a model for training (`Task.compile`). A data set's task (`DatasetSpec.task`)
picks one: `"images"` is image classification (the ViT, Fig. 6), `"text"` language modelling (the
Transformer-XL and the GPT decoder, Fig. 7)."""

import dataclasses

import keras

from keras_tse.losses import LogProbabilityCrossentropy, SparseCategoricalCrossentropyWithSmoothing, accuracy
from keras_tse.training import block_compile

# The metric that also reads soft targets, for a run whose training batches are mixed (MixUp, CutMix)
SOFT_TARGET_METRICS = {"accuracy": accuracy}


@dataclasses.dataclass(frozen=True)
class Task:
    """What training for one task needs besides the model, the data and the optimizer.

    Args:
        name: the task in words.
        loss: a function making the loss (a new one per compile).
        metrics: the metrics `fit` logs besides the loss.
        summary: what a run's `summary.json` reports besides the common fields: summary key ->
            (history.csv column, which value: `"last"`, or a function of the column, such as `max`).
    """

    name: str
    loss: object
    metrics: tuple
    summary: dict

    def compile(self, model, optimizer="rmsprop", jit_compile="auto", soft_targets=False, **loss_options):
        """`model` compiled for this task (Keras's default optimizer where none is given: evaluation
        only); `jit_compile` as `Model.compile`'s, but True on PyTorch compiles each block
        (`block_compile`) and `"whole_model"` is Keras's torch.compile of the whole step;
        `loss_options` go to the loss (an image classifier's `label_smoothing`); with
        `soft_targets` (mixed training batches) the loss and metrics read soft targets and class ids."""
        loss = self.loss(**loss_options, **({"soft_targets": True} if soft_targets else {}))
        metrics = [SOFT_TARGET_METRICS.get(m, m) if soft_targets else m for m in self.metrics]
        keras_jit_compile, per_block = block_compile.keras_jit_compile(jit_compile)
        model.compile(optimizer=optimizer, loss=loss, metrics=metrics, jit_compile=keras_jit_compile)
        return block_compile.compile_blocks(model) if per_block else model


def _classification_loss(label_smoothing=0.0, soft_targets=False):
    """Cross-entropy of the heads' float32 logits; smoothed labels where asked (Keras smooths one-hot
    labels only, so `SparseCategoricalCrossentropyWithSmoothing` one-hots them), and mixed soft
    targets as they come."""
    if label_smoothing or soft_targets:
        return SparseCategoricalCrossentropyWithSmoothing(label_smoothing)
    return keras.losses.SparseCategoricalCrossentropy(from_logits=True)


IMAGE_CLASSIFICATION = Task(
    "image classification",
    _classification_loss,
    ("accuracy",),
    {
        "train_accuracy": ("accuracy", "last"),
        "test_loss": ("val_loss", "last"),
        "test_accuracy": ("val_accuracy", "last"),
        "best_test_accuracy": ("val_accuracy", max),
    },
)
# The same task validated on a split held out of the training data: the epochs' numbers are the validation
# split's, the test split's are added once, at the end (`runner.fit_variant`).
VALIDATED_IMAGE_CLASSIFICATION = dataclasses.replace(
    IMAGE_CLASSIFICATION,
    summary={
        "train_accuracy": ("accuracy", "last"),
        "valid_loss": ("val_loss", "last"),
        "valid_accuracy": ("val_accuracy", "last"),
        "best_valid_accuracy": ("val_accuracy", max),
    },
)
LANGUAGE_MODELLING = Task(
    "language modelling",
    LogProbabilityCrossentropy,  # the models give float32 log-probabilities (tied adaptive softmax)
    (),
    {
        "valid_loss": ("val_loss", "last"),
        "valid_perplexity": ("val_perplexity", "last"),
        "best_valid_perplexity": ("val_perplexity", min),
    },
)
TASKS = {"images": IMAGE_CLASSIFICATION, "text": LANGUAGE_MODELLING}  # by the data registry's task names
