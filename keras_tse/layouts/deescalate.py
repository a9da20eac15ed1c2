"""`norm="deescalate"`: Algorithm 1 plus de-escalation, eq. (21), `Y = (I - tau 11^T/n) X`, at the
block's `deescalate_at`: `"output"` (the ViT, Sec. 3.3) or `"pre_ffn"` (Transformer-XL, Sec. 3.4).
In a causal block the mean runs over positions <= t, so no position reads a later token."""

from keras_tse.layouts.layout import EQ21_DEFAULTS, Layout, register_layout


@register_layout
class Deescalate(Layout):
    name = "deescalate"
    rank = 2
    deescalates = True
    without_deescalation = "post"
    defaults = dict(EQ21_DEFAULTS)  # checked by `eq21_options`, as every de-escalating layout's
