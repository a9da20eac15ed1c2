"""`norm="subln"`: Sub-LN (Wang et al. 2022, "Foundation Transformers" (Magneto), Sec. 2): the pre-norm body of
eq. (19) with a second LayerNorm inside each branch, before its last projection,
`x + LN(Attn(LN x)) W_O` and `x + LN(phi(LN(x) W_1)) W_2`, and its initialisation: the value, output and FFN
kernels scaled by `gamma = sqrt(log 2N)` for an encoder-only or decoder-only stack of N layers.

Choice where the reference differs: torchscale multiplies its own initial weights by gamma (Xavier-uniform at
gain 1/sqrt(2) for the query, key and value projections, PyTorch's default for the FFN); here the kernels are
drawn Xavier-normal at gain gamma (query and key at 1), the one redraw every layout with gains uses (DeepNorm's).
"""

import math

from keras_tse import _checks
from keras_tse.layouts.layout import Layout, register_layout


def subln_gain(num_layers):
    """Magneto's gamma for an encoder-only or decoder-only stack of N layers: sqrt(log 2N)."""
    return math.sqrt(math.log(2 * _checks.positive_int("num_layers", num_layers)))


@register_layout
class SubLN(Layout):
    name = "subln"
    rank = 9
    body = "pre"
    sub_norm = True
    defaults = {"subln_gain": 1.0}

    def for_depth(self, depth):
        return {"subln_gain": subln_gain(depth)}

    def check(self, options):
        return {"subln_gain": _checks.positive_float("subln_gain", options["subln_gain"])}

    def kernel_gains(self, options):
        gamma = options["subln_gain"]
        return {"query": 1.0, "key": 1.0, "value": gamma, "output": gamma, "ffn_inner": gamma, "ffn_outer": gamma}
