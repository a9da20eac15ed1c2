"""Weight initialisation by name: the schemes the paper's experiments and analysis used.

Every layer with kernels takes `initializer=` one of `INITIALIZERS` and records it in its config,
so a `.keras` file says how its weights were first drawn:

- `"torch"`: PyTorch's `nn.Linear` / `nn.Conv2d` default, kernels *and biases* from
  `U(-1/sqrt(fan_in), 1/sqrt(fan_in))` (kaiming-uniform with a = sqrt(5) gives exactly that bound).
  The paper's experiments ran in PyTorch on vit-pytorch (Sec. 3.3), and eq. (2)'s
  `W_q, W_k ~ U(-1, 1)/sqrt(d)` is this distribution.
- `"glorot"`: Xavier-uniform kernels, zero biases (Keras' default; the paper's analysis, Sec. 2.1).
  On a square `d x d` kernel its bound sqrt(6 / 2d) is sqrt(3) = 1.73x the torch bound.
- `"normal"`: `N(0, 1/fan_in)` kernels, zero biases (Sec. 2.4's `W ~ N(0, I/d)`).
- `"transformer_xl"`: `N(0, 0.02)` kernels, zero biases (Dai et al.'s reference code, `init_std`).

The vit-pytorch class token and position embeddings are `N(0, 1)` (`torch.randn`); `PatchEmbedding`
takes that as `embedding_initializer="vit_pytorch"` beside timm's / KerasHub's std-0.02 default.
"""

import math

import keras

from keras_tse import _checks
from keras_tse.layers.sigma_reparam_dense import SigmaReparamDense
from keras_tse.norms import EMBEDDING_INITIALIZERS, INITIALIZERS


def check(name):
    return _checks.one_of("initializer", name, INITIALIZERS)


def kernel_initializer(name):
    """A fresh Keras initializer for the kernels of scheme `name` (fans are read from each shape)."""
    check(name)
    if name == "torch":
        # Var U(-b, b) = b^2 / 3 with b = 1 / sqrt(fan_in): VarianceScaling's uniform limit is sqrt(3 s / fan_in).
        return keras.initializers.VarianceScaling(scale=1.0 / 3.0, mode="fan_in", distribution="uniform")
    if name == "glorot":
        return keras.initializers.GlorotUniform()
    if name == "normal":
        return keras.initializers.VarianceScaling(scale=1.0, mode="fan_in", distribution="untruncated_normal")
    return keras.initializers.RandomNormal(0.0, 0.02)


def bias_initializer(name, fan_in):
    """Biases of scheme `name` for a layer with `fan_in` inputs per output: torch draws them, others zero."""
    check(name)
    if name == "torch":
        bound = 1.0 / math.sqrt(fan_in)
        return keras.initializers.RandomUniform(-bound, bound)
    return "zeros"


def resolve(name, kernel_override=None):
    """The kernel initializer of a layer: an explicit `kernel_initializer` wins over the scheme `name`."""
    check(name)
    if kernel_override is None:
        return kernel_initializer(name)
    return keras.initializers.get(kernel_override)


def clone(initializer):
    """A fresh instance per kernel, so no two kernels share one initializer object (and one seed)."""
    return initializer.__class__.from_config(initializer.get_config())


def dense_class(sigma_reparam=False):
    """The class of a block's linear maps: Keras's Dense, or its sigma-reparametrised kin."""
    return SigmaReparamDense if sigma_reparam else keras.layers.Dense


def dense(units, name, *, initializer, kernel, fan_in, use_bias=True, sigma_reparam=False, **kwargs):
    """A Dense layer whose kernel is a clone of `kernel` and whose bias follows scheme `initializer`
    (sigma-reparametrised where `sigma_reparam`)."""
    return dense_class(sigma_reparam)(
        units,
        use_bias=use_bias,
        kernel_initializer=clone(kernel),
        bias_initializer=bias_initializer(initializer, fan_in) if use_bias else "zeros",
        name=name,
        **kwargs,
    )


def embeddings(name):
    """(class token, position) initializers: timm's std 0.02, or vit-pytorch's `torch.randn`, N(0, 1)."""
    _checks.one_of("embedding_initializer", name, EMBEDDING_INITIALIZERS)
    if name == "vit_pytorch":
        return keras.initializers.RandomNormal(stddev=1.0), keras.initializers.RandomNormal(stddev=1.0)
    return keras.initializers.RandomNormal(stddev=0.02), keras.initializers.TruncatedNormal(stddev=0.02)


def embedding_table(name):
    """Token embedding tables: N(0, 0.02) (Transformer-XL's), N(0, 1) (`nn.Embedding`'s), Glorot, or N(0, 1/width)."""
    check(name)
    if name == "torch":
        return keras.initializers.RandomNormal(0.0, 1.0)
    if name == "glorot":
        return keras.initializers.GlorotUniform()
    if name == "normal":
        return keras.initializers.VarianceScaling(scale=1.0, mode="fan_out", distribution="untruncated_normal")
    return keras.initializers.RandomNormal(0.0, 0.02)


def projection(name):
    """Adaptive-embedding projections: N(0, 0.01) under Transformer-XL's scheme (`proj_init_std`), else kernels."""
    return keras.initializers.RandomNormal(0.0, 0.01) if check(name) == "transformer_xl" else kernel_initializer(name)
