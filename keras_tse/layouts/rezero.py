"""`norm="rezero"`: ReZero (Bachlechner et al. 2021, "ReZero is All You Need", eq. 3 and their
Transformer code): `x_{l+1} = x_l + a_l F(x_l)`, one scalar `a_l` = 0 at initialisation shared by the
attention and FFN branches of the layer (their `RZTXEncoderLayer`), and no LayerNorm: each block
starts as the identity (dynamical isometry, their Sec. 3)."""

from keras_tse.layouts.layout import Layout, register_layout


@register_layout
class ReZero(Layout):
    name = "rezero"
    rank = 4
    body = "pre"
    layer_norm = False

    def add_weights(self, block, hidden, options):
        return block.add_weight(name="resweight", shape=(), initializer="zeros")

    def branch_scale(self, state, index):
        return state
