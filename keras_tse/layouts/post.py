"""`norm="post"`: the "classic" post-norm block of Algorithm 1, a LayerNorm after each residual add.
Stacked deep, it drives token similarity towards 1 (TSE, Sec. 2)."""

from keras_tse.layouts.layout import Layout, register_layout


@register_layout
class Post(Layout):
    name = "post"
    rank = 0
