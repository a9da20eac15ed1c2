"""keras_tse: deep post-norm Transformers that train (Yu & Zhang's token similarity escalation).

The library: `layers`, `layouts`, `zoo`, `callbacks`, `data`, `losses`, `analysis` (similarity, spectral
quantities, gradients, the probe) and `run_files`. Training (`keras_tse.training`) and the
`keras-tse` command (`keras_tse.cli`) build on it and are imported
only by whoever uses them: `import keras_tse` loads neither (tests/test_layout.py).

`import keras_tse` is cheap: the subpackages load on first use (PEP 562), so `keras-tse --help`
starts without Keras and its backend (measured: 10 of its 12-15 s were that import on TensorFlow).
What must not wait is the registration of the serializable classes, which `keras.saving.load_model`
needs before it reads a `.keras` file: it happens as soon as Keras is imported, whichever of the two
comes first (`_register_with_keras`).

The words, one for each thing:

- layout: where a block's LayerNorms sit and what scales its residuals (`keras_tse.layouts`), named by
  the `norm=` keyword of every block and builder and by `--norm`; de-escalation (eq. 21) is a layout.
- layout options: a layout's own keywords (DeepNet's `residual_scale`, LayerScale's `layer_scale_init`),
  `layout_options={...}` on a builder, `--layout-option KEY=VALUE` on `keras-tse train`.
- family, preset: a model builder by name (`vit`, `transformer_xl`, `gpt`), and a family with settings and
  metadata (`vit80_cifar10_deescalate`); `zoo.create_model` builds either.
- task: what a family's models or a data set are for, `images` (classification) or `text` (language
  modelling); `keras-tse train vit` and `keras-tse train lm` train them.
- variant: one layout's run in a training command, one run folder each (`runs/<task>/<norm>/`).
- study, arm, cell: a study of the lab (`keras-tse study`) compares arms (a layout with the flags it ran
  with, `post_warmup`); a cell is one run of an arm at a learning rate and a seed, one row of the study.
"""

import importlib
import sys

from keras_tse._lazy import after_import, lazy_exports, load_all

__version__ = "0.1.0"

SUBPACKAGES = ("analysis", "callbacks", "data", "layers", "layouts", "losses", "schedules", "zoo")
__all__ = [*SUBPACKAGES, "compile_blocks", "deescalate", "__version__"]
# compile_blocks: the PyTorch backend's per-block torch.compile, for a user's own model; deescalate: eq. (21)
# in every block of a model someone else built (KerasHub's encoders and decoders)
__getattr__, __dir__ = lazy_exports(
    __name__,
    {f"{__name__}.training.block_compile": ["compile_blocks"], f"{__name__}.zoo.deescalate": ["deescalate"]},
    SUBPACKAGES,
)


def _register():
    """Import the modules that register keras_tse's classes with Keras: the whole library, the names
    of the lazy subpackages (`keras_tse._lazy`) included."""
    for name in SUBPACKAGES:
        load_all(importlib.import_module(f"{__name__}.{name}"))


def _register_with_keras():
    if "keras" in sys.modules:
        _register()  # Keras is already paid for: register now, as an eager package would
    else:  # once Keras is imported, and no keras_tse module is half-initialised (Keras imported by one)
        after_import("keras", _register, inside=__name__)


_register_with_keras()


def _make_keras_hub_classes():
    importlib.import_module(f"{__name__}.zoo.keras_hub_classes").make_all()


if "keras_hub" not in sys.modules:
    after_import("keras_hub", _make_keras_hub_classes)  # `keras_tse.zoo.keras_hub_classes` says why
