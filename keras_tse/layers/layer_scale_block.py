import keras

from keras_tse.layers.pre_norm_block import PreNormBlock


@keras.saving.register_keras_serializable(package="keras_tse")
class LayerScaleBlock(PreNormBlock):
    """LayerScale (CaiT, Touvron et al. 2021): pre-norm with a learned per-channel scale on each branch.

    On `X` `[batch, tokens, hidden]` (CaiT, eq. 5):

        Y = X + diag(l_1) SA(LN(X)),   Z = Y + diag(l_2) FFN(LN(Y)),

    with `l_1`, `l_2` (weights `attention_scale`, `ffn_scale`, shape `[hidden]`) initialised at
    `layer_scale_init`. CaiT's value depends on depth (`keras_tse.layers.cait_layer_scale_init`):
    0.1 up to 18 blocks, 1e-5 up to 24, 1e-6 deeper; `zoo.vit(norm="layerscale")` uses it.

    Args:
        num_heads, ffn_dim, ...: as `PreNormBlock`.
        layer_scale_init: float > 0, the initial value of every scale. Defaults to `0.1`.

    Reference:
        Touvron et al. 2021, Going deeper with Image Transformers, Sec. 3 (LayerScale), eq. (5).
    """

    def __init__(self, *args, layer_scale_init=0.1, **kwargs):
        super().__init__(*args, norm="layerscale", layer_scale_init=layer_scale_init, **kwargs)
