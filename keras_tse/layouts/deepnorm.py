"""`norm="deepnorm"`: DeepNet (Wang et al. 2022, "DeepNet: Scaling Transformers to 1,000 Layers",
Sec. 3 and Fig. 2): post-norm `x_{l+1} = LN(alpha x_l + G(x_l))`, the value, output and FFN kernels
drawn Xavier-normal with gain beta, query and key with gain 1."""

from keras_tse import _checks
from keras_tse.layouts.layout import Layout, register_layout


def deepnorm_constants(num_layers):
    """(alpha, beta) of DeepNet's Fig. 2 / Table 1 for an encoder-only or a decoder-only stack of N
    layers (the ViT, Transformer-XL, GPT): alpha = (2N)^(1/4), beta = (8N)^(-1/4)."""
    n = _checks.positive_int("num_layers", num_layers)
    return (2 * n) ** 0.25, (8 * n) ** -0.25


@register_layout
class DeepNorm(Layout):
    name = "deepnorm"
    rank = 3
    defaults = {"residual_scale": 1.0, "init_gain": 1.0}

    def for_depth(self, depth):
        alpha, beta = deepnorm_constants(depth)
        return {"residual_scale": alpha, "init_gain": beta}

    def check(self, options):
        return {key: _checks.positive_float(key, options[key]) for key in self.defaults}

    def residual_factor(self, options):
        return options["residual_scale"]

    def kernel_gains(self, options):
        beta = options["init_gain"]
        return {"query": 1.0, "key": 1.0, "value": beta, "output": beta, "ffn_inner": beta, "ffn_outer": beta}
