"""The residual layouts: where a Transformer block's LayerNorms sit, what multiplies its residuals
and branches, and whether it de-escalates (eq. 21). Each layout is one module of this package, named
as the layout (`post.py` is `norm="post"`), so the names are known without importing Keras; every
block (`keras_tse.layers.TransformerBlock` for the ViT and GPT, `TransformerXLBlock`) reads its
layout from here. A layout from elsewhere joins with `register_layout`, or by an entry point of the
group `keras_tse.layouts` (then on the command line too).
"""

from keras_tse.layouts.layout import (
    Layout,
    check_layout_options,
    eq21_options,
    get_layout,
    layout_names,
    register_layout,
)

__all__ = ["Layout", "check_layout_options", "eq21_options", "get_layout", "layout_names", "register_layout"]
