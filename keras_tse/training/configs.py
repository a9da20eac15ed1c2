"""The optimisation settings of the two runs, kept apart from the runners so that a recipe's
constants and `--help` need no Keras: `TrainConfig` (the classifier, Fig. 6) and `LMTrainConfig`
(the language models, Fig. 7). Both carry the training kit (warmup, schedule, weight decay,
clipping, EMA, accumulation), built by `keras_tse.training.optimizers`; at its defaults, the paper's
settings. A run's config.json records every field; a run folder made before a field existed lacks it,
and is compared as if it held the field's default (`defaults_of`), so it resumes: no list of the fields
added since has to be kept."""

import dataclasses
import math

from keras_tse import _checks
from keras_tse.data.registry import AUGMENTATIONS

SCHEDULES = ("step", "cosine", "constant")  # keras_tse.training.optimizers builds them
WEIGHT_DECAY_RULES = ("timm", "all")  # keras_tse.training.optimizers.no_decay_variables


@dataclasses.dataclass
class TrainConfig:
    """Optimisation settings; the defaults are the paper's ViT/CIFAR-10 run (Sec. 3.3)."""

    epochs: int = 150
    batch_size: int = 128
    learning_rate: float = 1e-4  # the paper: 1e-4 for pre-norm and de-escalated, 5e-5 for post-norm
    weight_decay: float = 0.1
    beta_1: float = 0.9
    beta_2: float = 0.999
    decay_at: tuple = (0.7, 0.9)  # multi-step schedule: x decay_factor at 70% and 90% of training
    decay_factor: float = 0.2
    similarity_every_n_batches: int = None  # None: token similarity at train begin and epoch ends
    # the kit; defaults: the paper's Sec. 3.3 (no warmup, the step decay, Keras's Adam epsilon)
    warmup_steps: int = 0
    schedule: str = "step"
    min_learning_rate: float = 0.0  # the cosine schedule's floor
    epsilon: float = 1e-7
    clipnorm: float = None
    global_clipnorm: float = None
    ema: float = None  # EMA momentum of the weights; None: off
    label_smoothing: float = 0.0
    grad_accum: int = 1
    # weight decay spares, by the timm rule, every 1-D weight (biases, LayerNorm, tau, LayerScale's and
    # ReZero's gains) and the position and class embeddings; "all" decays every weight but a learned tau,
    # as runs made before this field did (the paper's text is silent)
    weight_decay_rule: str = dataclasses.field(default="timm", metadata={"before": "all"})
    mixup: float = 0.0  # MixUp's alpha (Zhang et al. 2018); 0: off
    cutmix: float = 0.0  # CutMix's alpha (Yun et al. 2019); 0: off
    # the training images' augmentation (keras_tse.data.AUGMENTATIONS); None: the data set's own
    # (`DatasetSpec.augment`), which the recipe puts here. A run made before this field trained with
    # RandAugment on CIFAR-10 and nothing elsewhere: the recipe passes that as its `before`
    augment: str = dataclasses.field(default=None, metadata={"before": None})
    # Keras's default "auto": XLA on JAX (and TF on a GPU), eager PyTorch; True: XLA, or on PyTorch
    # torch.compile per block (`training.block_compile`); "whole_model": Keras's torch.compile of the step
    jit_compile: object = "auto"

    def __post_init__(self):
        _checks.config_fields(self, positive_ints=("epochs", "batch_size"), positive_floats=("learning_rate",))
        check_kit(self)
        if not 0.0 <= self.label_smoothing < 1.0:
            raise ValueError(f"`label_smoothing` must be in [0, 1). Received: label_smoothing={self.label_smoothing!r}")
        for name in ("mixup", "cutmix"):
            if not (_checks.is_real(getattr(self, name)) and getattr(self, name) >= 0):
                raise ValueError(f"`{name}` must be a non-negative alpha. Received: {name}={getattr(self, name)!r}")


@dataclasses.dataclass
class LMTrainConfig:
    """Optimisation settings; the defaults are Transformer-XL's WikiText-103 base run as Sec. 3.4 keeps it."""

    steps: int = 50000  # Fig. 7's 50,000 iterations (the base run: 200,000)
    eval_interval: int = 5000  # steps per Keras epoch; validation after each (the reference: 4000)
    batch_size: int = 40  # Sec. 3.4 (the base run: 60)
    learning_rate: float = 2.5e-4
    min_learning_rate: float = 0.0  # cosine decay to this over `steps` (the reference's eta_min)
    beta_1: float = 0.9
    beta_2: float = 0.999
    epsilon: float = 1e-8  # PyTorch's Adam default, which the reference uses
    clipnorm: float = None  # Sec. 3.4 disables gradient clipping (the base run: 0.25)
    log_interval: int = 200  # steps per row of steps.csv (the reference's log interval)
    # the kit; defaults: Sec. 3.4's (no warmup, cosine decay, no weight decay, no clipping)
    warmup_steps: int = 0
    schedule: str = "cosine"
    decay_at: tuple = (0.7, 0.9)  # the step schedule's drops, as the classifier's
    decay_factor: float = 0.2
    weight_decay: float = 0.0  # > 0: AdamW
    global_clipnorm: float = None
    ema: float = None
    grad_accum: int = 1
    # weight decay spares, by the timm rule, every 1-D weight (biases, LayerNorm, tau, LayerScale's and
    # ReZero's gains) and the position and class embeddings; "all" decays every weight but a learned tau,
    # as runs made before this field did (the paper's text is silent)
    weight_decay_rule: str = dataclasses.field(default="timm", metadata={"before": "all"})
    similarity_every_n_batches: int = None
    # Keras's default "auto": XLA on JAX (and TF on a GPU), eager PyTorch; True: XLA, or on PyTorch
    # torch.compile per block (`training.block_compile`); "whole_model": Keras's torch.compile of the step
    jit_compile: object = "auto"

    def __post_init__(self):
        _checks.config_fields(
            self,
            positive_ints=("steps", "eval_interval", "batch_size", "log_interval"),
            positive_floats=("learning_rate",),
        )
        check_kit(self)

    @property
    def epochs(self):
        return math.ceil(self.steps / self.eval_interval)


def check_kit(config):
    """The kit's settings, each in its range: a ValueError names the first that is not."""
    _checks.one_of("schedule", config.schedule, SCHEDULES)
    _checks.one_of("weight_decay_rule", config.weight_decay_rule, WEIGHT_DECAY_RULES)
    if getattr(config, "augment", None) is not None:
        _checks.one_of("augment", config.augment, AUGMENTATIONS)
    config.warmup_steps = _checks.non_negative_int("warmup_steps", config.warmup_steps)
    config.grad_accum = _checks.positive_int("grad_accum", config.grad_accum)
    for name in ("clipnorm", "global_clipnorm"):
        if getattr(config, name) is not None:
            setattr(config, name, _checks.positive_float(name, getattr(config, name)))
    if getattr(config, "clipnorm", None) is not None and config.global_clipnorm is not None:  # Keras takes one
        raise ValueError(
            f"`clipnorm` and `global_clipnorm`: one or the other. Received: clipnorm={config.clipnorm!r}, "
            f"global_clipnorm={config.global_clipnorm!r}"
        )
    if config.ema is not None and not 0.0 < config.ema < 1.0:
        raise ValueError(f"`ema` (a momentum) must be in (0, 1). Received: ema={config.ema!r}")
    if not config.weight_decay >= 0.0:
        raise ValueError(f"`weight_decay` must be >= 0. Received: weight_decay={config.weight_decay!r}")


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
