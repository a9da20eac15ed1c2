"""The published depth-enabling methods the depth study compares with de-escalation.

Shared by the ViT blocks (DeepNormBlock, ReZeroBlock, LayerScaleBlock) and TransformerXLBlock, so
each method's constants and weights are defined once:

- DeepNorm (Wang et al. 2022, "DeepNet: Scaling Transformers to 1,000 Layers", Sec. 3 and Fig. 2):
  post-norm `x_{l+1} = LN(alpha * x_l + G(x_l))`; the value, output and FFN kernels are initialised
  Xavier-normal with gain `beta`, query and key kernels with gain 1.
- ReZero (Bachlechner et al. 2021, "ReZero is All You Need", eq. 3 and their Transformer code):
  `x_{l+1} = x_l + a_l * F(x_l)` with one scalar `a_l = 0` at initialisation per layer, shared by
  the attention and FFN residuals of the layer as in their `RZTXEncoderLayer`, and no LayerNorm.
- LayerScale (Touvron et al. 2021, "Going deeper with Image Transformers" (CaiT), eq. 5 and Sec. 3):
  pre-norm with a learned per-channel diagonal on each branch,
  `x' = x + diag(l_1) SA(LN(x))`, `x'' = x' + diag(l_2) FFN(LN(x'))`, every `l` initialised at eps.
"""

import math

import keras

from keras_tse import _checks


def deepnorm_constants(num_layers):
    """(alpha, beta) of DeepNet's Fig. 2 / Table 1 for an encoder-only or a decoder-only stack of N
    layers (the ViT, Transformer-XL): alpha = (2N)^(1/4), beta = (8N)^(-1/4)."""
    n = _checks.positive_int("num_layers", num_layers)
    return (2 * n) ** 0.25, (8 * n) ** -0.25


def xavier_normal(gain):
    """`torch.nn.init.xavier_normal_(w, gain)`: N(0, gain^2 * 2 / (fan_in + fan_out))."""
    return keras.initializers.VarianceScaling(scale=gain**2, mode="fan_avg", distribution="untruncated_normal")


def deepnorm_initialize(block, beta):
    """Re-draw a built block's kernels as DeepNet's Fig. 2: value/output/FFN gain beta, query/key gain 1."""
    attention = block.self_attention
    shape = tuple(attention.query_key_value_kernels()[0].shape)  # the fans of one projection
    attention.assign_query_key_value_kernels(*(xavier_normal(gain)(shape) for gain in (1.0, 1.0, beta)))
    for dense in (attention.output_dense, block.ffn_inner, block.ffn_outer):
        dense.kernel.assign(xavier_normal(beta)(dense.kernel.shape))


def cait_layer_scale_init(depth):
    """CaiT's eps (Sec. 3): 0.1 up to depth 18, 1e-5 up to 24, 1e-6 deeper."""
    if depth <= 18:
        return 0.1
    return 1e-5 if depth <= 24 else 1e-6


def add_layer_scales(layer, hidden, initial):
    """LayerScale's two per-channel diagonals `l_1` (attention branch), `l_2` (FFN branch)."""
    return tuple(
        layer.add_weight(name=name, shape=(hidden,), initializer=keras.initializers.Constant(initial))
        for name in ("attention_scale", "ffn_scale")
    )


def add_rezero_weight(layer):
    """ReZero's residual weight `a_l`, one scalar per layer, 0 at initialisation."""
    return layer.add_weight(name="resweight", shape=(), initializer="zeros")


def check_layer_scale_init(value):
    if not _checks.is_real(value) or not value > 0 or math.isinf(value):
        raise ValueError(f"`layer_scale_init` must be a positive number. Received: layer_scale_init={value!r}")
    return float(value)
