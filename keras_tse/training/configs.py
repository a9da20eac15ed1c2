"""The optimisation settings of the two runs, kept apart from the runners so that a recipe's
constants and `--help` need no Keras: `TrainConfig` (the classifier, Fig. 6) and `LMTrainConfig`
(the Transformer-XL language model, Fig. 7)."""

import dataclasses
import math

from keras_tse import _checks


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
    jit_compile: object = (
        "auto"  # Keras's default: XLA on JAX (and TF on a GPU), eager PyTorch; True: torch.compile too
    )

    def __post_init__(self):
        _checks.config_fields(self, positive_ints=("epochs", "batch_size"), positive_floats=("learning_rate",))


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
    similarity_every_n_batches: int = None
    jit_compile: object = (
        "auto"  # Keras's default: XLA on JAX (and TF on a GPU), eager PyTorch; True: torch.compile too
    )

    def __post_init__(self):
        _checks.config_fields(
            self,
            positive_ints=("steps", "eval_interval", "batch_size", "log_interval"),
            positive_floats=("learning_rate",),
        )

    @property
    def epochs(self):
        return math.ceil(self.steps / self.eval_interval)
