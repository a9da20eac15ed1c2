"""`norm="layerscale"`: LayerScale (Touvron et al. 2021, "Going deeper with Image Transformers"
(CaiT), eq. 5 and Sec. 3): pre-norm with a learned per-channel diagonal on each branch,
`x' = x + diag(l_1) SA(LN x)`, `x'' = x' + diag(l_2) FFN(LN x')`, every `l` initialised at eps."""

import math

from keras_tse import _checks
from keras_tse.layouts.layout import Layout, register_layout


def cait_layer_scale_init(depth):
    """CaiT's eps (Sec. 3): 0.1 up to depth 18, 1e-5 up to 24, 1e-6 deeper."""
    if depth <= 18:
        return 0.1
    return 1e-5 if depth <= 24 else 1e-6


@register_layout
class LayerScale(Layout):
    name = "layerscale"
    rank = 5
    body = "pre"
    defaults = {"layer_scale_init": 0.1}

    def for_depth(self, depth):
        return {"layer_scale_init": cait_layer_scale_init(depth)}

    def check(self, options):
        value = options["layer_scale_init"]
        if not _checks.is_real(value) or not value > 0 or math.isinf(value):
            raise ValueError(f"`layer_scale_init` must be a positive number. Received: layer_scale_init={value!r}")
        return {"layer_scale_init": float(value)}

    def add_weights(self, block, hidden, options):
        constant = {"class_name": "Constant", "config": {"value": options["layer_scale_init"]}}
        return tuple(
            block.add_weight(name=name, shape=(hidden,), initializer=constant)
            for name in ("attention_scale", "ffn_scale")
        )

    def branch_scale(self, state, index):
        return state[index]
