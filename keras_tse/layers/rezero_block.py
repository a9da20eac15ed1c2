import keras

from keras_tse.layers.pre_norm_block import PreNormBlock


@keras.saving.register_keras_serializable(package="keras_tse")
class ReZeroBlock(PreNormBlock):
    """ReZero's block (Bachlechner et al. 2021): `x + a * F(x)`, one scalar `a` = 0 at init, no LayerNorm.

    On `X` `[batch, tokens, hidden]`, with the layer's residual weight `a` (weight `resweight`):

        Y = X + a * P(X) X W,   Z = Y + a * phi(Y W_1) W_2.

    At initialisation `a = 0`, so the block is the identity and a deep stack of them passes its
    input through unchanged: signal propagation starts at dynamical isometry (their Sec. 3). One
    `a` serves both sublayers, as in their `RZTXEncoderLayer`. It is eq. (19) without its LayerNorms
    and with `a` on both branches, so it is `PreNormBlock` with those two hooks filled.

    Args:
        num_heads, ffn_dim, ...: as `PostNormBlock` (`layer_norm_epsilon` is unused: no LayerNorm).

    Reference:
        Bachlechner et al. 2021, ReZero is All You Need: Fast Convergence at Large Depth, eq. (3).
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, norm="rezero", **kwargs)
