"""`norm="contranorm"`: Algorithm 1 plus ContraNorm (Guo et al., ICLR 2023; `keras_tse.layers.ContraNorm`),
`LN(X - s softmax(X_hat X_hat^T / t) X)`, at the block's `deescalate_at`.

ContraNorm pushes each token away from the tokens it resembles; as `t` grows its weights become `1/n` and the
step is eq. (21) with `tau = s` before a LayerNorm. It sits where eq. (21) sits (`deescalate_at`: the ViT's
block output by default) so that the two are compared at one place; `deescalate_at="pre_ffn"` puts it after
the attention's Add & Norm. The authors' defaults: `s = 0.1`, `t = 1`. Its softmax reads every token, later
ones included, so a causal block (the GPT, Transformer-XL) refuses it.
"""

from keras_tse import _checks
from keras_tse.layouts.layout import Layout, register_layout


@register_layout
class ContraNormLayout(Layout):
    name = "contranorm"
    rank = 7
    places = True
    causal = False
    defaults = {"contranorm_scale": 0.1, "contranorm_temperature": 1.0}

    def check(self, options):
        scale, temperature = options["contranorm_scale"], options["contranorm_temperature"]
        return {
            "contranorm_scale": _checks.non_negative_float("contranorm_scale", scale),
            "contranorm_temperature": _checks.positive_float("contranorm_temperature", temperature),
        }

    def placed_layer(self, options, dtype):
        from keras_tse.layers.contra_norm import ContraNorm

        scale, temperature = options["contranorm_scale"], options["contranorm_temperature"]
        return ContraNorm(scale=scale, temperature=temperature, dtype=dtype, name="contra_norm")
