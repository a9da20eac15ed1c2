"""`norm="pre"`: the pre-norm block of eq. (19), `Y = X + SA(LN X)`, `Z = Y + FFN(LN Y)`. Its stream
is never normalised, so attention's share shrinks with depth (eq. 20), which hides TSE (Sec. 3.1)."""

from keras_tse.layouts.layout import Layout, register_layout


@register_layout
class Pre(Layout):
    name = "pre"
    rank = 1
    body = "pre"
