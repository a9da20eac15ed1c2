"""The optimisation settings of a run, kept apart from the runners so that a recipe's constants and
`--help` need no Keras: the training kit every task shares (`Kit`: the optimizer, the schedule, clipping,
EMA, accumulation), and each task's own settings beside it, `TrainConfig` (image classification, Fig. 6)
and `LMTrainConfig` (language modelling, Fig. 7). At its defaults, each is the paper's run.

An option of the kit is one field made by `option`: its default, its check and its help. The command line's
flags are generated from those fields (`keras_tse.cli.flags.add_training_kit`), the same check validates the
flag and the Python keyword, and a run's config.json records every field. A run folder made before a field
existed lacks it, and is compared as if it held the field's default (`defaults_of`), so it resumes: no list
of the fields added since has to be kept.
"""

import dataclasses
import math

from keras_tse import _checks
from keras_tse.data.registry import AUGMENTATIONS, PIPELINES

SCHEDULES = ("step", "cosine", "constant")  # keras_tse.training.optimizers builds them
WEIGHT_DECAY_RULES = ("timm", "all")  # keras_tse.training.optimizers.no_decay_variables


def option(default, check, help, shown=None, before=dataclasses.MISSING, choices=None):
    """A field of the settings with a command-line flag, `--` and its name with dashes: `check(name, value)`
    returns the value or raises a ValueError saying "`name` must be <what>." (None is always "off");
    `help` says what it does, `shown` the default in words where the value would not; `before`: what a run
    folder made before the field's default changed ran with (`as_started`); `choices`: the names it takes."""
    metadata = {"help": help, "check": check, "shown": shown, "choices": choices}
    given_before = {} if before is dataclasses.MISSING else {"before": before}
    return dataclasses.field(default=default, metadata={**metadata, **given_before})


def _one_of(choices):
    return lambda name, value: _checks.one_of(name, value, choices)


def _open_unit_interval(name, value):
    if not _checks.is_real(value) or not 0.0 < value < 1.0:
        raise ValueError(f"`{name}` must be a number in (0, 1). Received: {name}={value!r}")
    return float(value)


@dataclasses.dataclass
class Kit:
    """The training kit: the settings every task trains with, at the defaults of the paper's ViT run
    (Sec. 3.3: AdamW, the step decay, no warmup, Keras's Adam epsilon). A task's settings extend it."""

    batch_size: int = 128
    learning_rate: float = 1e-4  # the paper: 1e-4 for pre-norm and de-escalated, 5e-5 for post-norm
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-7
    decay_at: tuple = (0.7, 0.9)  # the step schedule: x decay_factor at 70% and 90% of training
    decay_factor: float = 0.2
    min_learning_rate: float = 0.0  # the cosine schedule's floor
    similarity_every_n_batches: int = None  # None: token similarity at train begin and epoch ends
    warmup_steps: int = option(0, _checks.non_negative_int, "linear learning-rate warmup over the first N batches")
    schedule: str = option(
        "step", _one_of(SCHEDULES), "the learning-rate schedule after warmup: step (x decay_factor at 70%% and "
        "90%%, the paper's ViT), cosine (to min_learning_rate, Transformer-XL's) or constant", choices=SCHEDULES,
    )  # fmt: skip
    weight_decay: float = option(0.1, _checks.non_negative_float, "AdamW's decoupled weight decay (0: Adam)")
    clipnorm: float = option(None, _checks.positive_float, "clip each gradient to this norm (Keras's clipnorm)")
    global_clipnorm: float = option(None, _checks.positive_float, "clip all gradients together to this norm")
    ema: float = option(
        None, _open_unit_interval, "keep an exponential moving average of the weights with this momentum; "
        "validation and checkpoints read it (Keras's use_ema, SwapEMAWeights)",
    )  # fmt: skip
    grad_accum: int = option(
        1, _checks.positive_int, "accumulate the gradients of N batches per update: the batch of N x --batch-size "
        "on the memory of one (Keras's gradient_accumulation_steps)", shown="off",
    )  # fmt: skip
    # weight decay spares, by the timm rule, every 1-D weight (biases, LayerNorm, tau, LayerScale's and
    # ReZero's gains) and the position and class embeddings; "all" decays every weight but a learned tau,
    # as runs made before this field did (the paper's text is silent)
    weight_decay_rule: str = option(
        "timm", _one_of(WEIGHT_DECAY_RULES), "what weight decay spares: timm (every 1-D weight and the position "
        "and class embeddings) or all (decay every weight but a learned tau)", before="all",
        choices=WEIGHT_DECAY_RULES,
    )  # fmt: skip
    # Keras's default "auto": XLA on JAX (and TF on a GPU), eager PyTorch; True: XLA, or on PyTorch
    # torch.compile per block (`training.block_compile`); "whole_model": Keras's torch.compile of the step
    jit_compile: object = "auto"

    def __post_init__(self):
        _checks.config_fields(self, positive_ints=("batch_size",), positive_floats=("learning_rate",))
        for field in options_of(self):
            value = getattr(self, field.name)
            if value is not None:
                setattr(self, field.name, field.metadata["check"](field.name, value))
        if self.clipnorm is not None and self.global_clipnorm is not None:  # Keras takes one
            raise ValueError(
                f"`clipnorm` and `global_clipnorm`: one or the other. Received: clipnorm={self.clipnorm!r}, "
                f"global_clipnorm={self.global_clipnorm!r}"
            )


def options_of(config):
    """The fields of `config` (a settings dataclass or its class) made by `option`: those with a flag."""
    return [field for field in dataclasses.fields(config) if "check" in field.metadata]


def _kit_default(name, default):
    """The kit's field `name` at a task's own `default`, its flag and check kept."""
    field = {f.name: f for f in dataclasses.fields(Kit)}[name]
    return dataclasses.field(default=default, metadata=field.metadata)


@dataclasses.dataclass
class TrainConfig(Kit):
    """Image classification's settings; the defaults are the paper's ViT/CIFAR-10 run (Sec. 3.3)."""

    epochs: int = 150
    label_smoothing: float = option(0.0, _checks.dropout_rate, "label smoothing of the classification loss")
    mixup: float = option(
        0.0, _checks.non_negative_float, "MixUp with this alpha on the training batches (Keras's MixUp; soft "
        "targets)", shown="off",
    )  # fmt: skip
    cutmix: float = option(
        0.0, _checks.non_negative_float, "CutMix with this alpha on the training batches (Keras's CutMix); with "
        "--mixup, each batch takes one of the two", shown="off",
    )  # fmt: skip
    # the training images' augmentation (keras_tse.data.AUGMENTATIONS); None: the data set's own
    # (`DatasetSpec.augment`), which the recipe puts here. A run made before this field trained with
    # RandAugment on CIFAR-10 and nothing elsewhere: the recipe passes that as its `before`
    augment: str = option(
        None, _one_of(AUGMENTATIONS), "the training images' augmentation: randaugment (the paper's), crop_flip (a "
        "random crop of the image padded by 4, then a horizontal flip) or none",
        shown="the data set's: randaugment for cifar10, none for digits and mnist, crop_flip for the rest",
        choices=AUGMENTATIONS, before=None,
    )  # fmt: skip

    # the share of the training images held out, class-balanced and seeded, as the validation split that each
    # epoch is scored on and that chooses the best checkpoint; the test split is then scored once, at the end.
    # 0: the test split is scored each epoch and chooses the checkpoint, as runs made before this field did
    validation_fraction: float = option(
        0.1, _checks.dropout_rate, "the share of the training images held out (class-balanced, seeded) to score "
        "each epoch and choose the best checkpoint; the test split is scored once, at the end (0: the test split "
        "each epoch, as before)", before=0.0,
    )  # fmt: skip

    # the input pipeline (keras_tse.data.image_dataset): the same batches either way where a run draws nothing
    # but its order, each its own augmentation draws otherwise, so a run records the one it trained with.
    # None: the recipe chooses (`keras_tse.training.image_runs.pipeline_of`). A run made before this field took
    # tf.data wherever TensorFlow was installed: the recipe passes that as its `before`
    data_pipeline: str = option(
        None, _one_of(PIPELINES), "the input pipeline: numpy (a Keras PyDataset) or tf (tf.data, TensorFlow "
        "needed; its augmentation runs in TensorFlow's graph, about 2.5x faster on a CPU for RandAugment)",
        shown="numpy without augmentation or mixing (the same numbers whatever is installed), else tf where "
        "TensorFlow is installed", choices=PIPELINES, before=None,
    )  # fmt: skip

    # where the images are normalised: inside the model, its first layer an `ImagePreprocessor` holding the
    # statistics and class names, so that the trained model takes raw images wherever it goes; or in the
    # input pipeline, as runs made before this field did (their checkpoints take normalised images)
    normalize_in_model: bool = dataclasses.field(default=True, metadata={"before": False})

    def __post_init__(self):
        super().__post_init__()
        self.epochs = _checks.positive_int("epochs", self.epochs)


@dataclasses.dataclass
class LMTrainConfig(Kit):
    """Language modelling's settings; the defaults are Transformer-XL's WikiText-103 base run as Sec. 3.4
    keeps it (Adam at 2.5e-4 with PyTorch's epsilon, cosine decay, no warmup, no weight decay, no clipping)."""

    batch_size: int = 40  # Sec. 3.4 (the base run: 60)
    learning_rate: float = 2.5e-4
    epsilon: float = 1e-8  # PyTorch's Adam default, which the reference uses
    schedule: str = _kit_default("schedule", "cosine")  # to min_learning_rate over `steps` (the reference's eta_min)
    weight_decay: float = _kit_default("weight_decay", 0.0)  # > 0: AdamW
    steps: int = 50000  # Fig. 7's 50,000 iterations (the base run: 200,000)
    eval_interval: int = 5000  # steps per Keras epoch; validation after each (the reference: 4000)
    log_interval: int = 200  # steps per row of steps.csv (the reference's log interval)

    def __post_init__(self):
        super().__post_init__()
        _checks.config_fields(self, positive_ints=("steps", "eval_interval", "log_interval"))

    @property
    def epochs(self):
        return math.ceil(self.steps / self.eval_interval)


def recorded(config):
    """`config` as a run's config.json holds it: every field."""
    return dataclasses.asdict(config)


def defaults_of(config, before=None):
    """What a run folder that lacks a field of `config`'s class ran with: the field's default (the field
    did not exist yet), or its `metadata["before"]` where the default changed what runs do, or what
    `before` ({field: value}) says where that depends on the run (the data set's augmentation).
    `keras_tse.training.check_run_folder` fills a stored config with these."""
    fields = {f.name: f.metadata["before"] for f in dataclasses.fields(config) if "before" in f.metadata}
    return {"train": {**recorded(type(config)()), **fields, **(before or {})}}
