import keras

from keras_tse.layers.transformer_block import TransformerBlock


@keras.saving.register_keras_serializable(package="keras_tse")
class DeepNormBlock(TransformerBlock):
    """DeepNorm's post-norm block (DeepNet, Wang et al. 2022): `LN(alpha * x + G(x))` with beta-scaled init.

    Algorithm 1 with each residual multiplied by `residual_scale` (DeepNet's alpha) before the add:
    `Y2 = LN(alpha * X + P X W)`, `Y4 = LN(alpha * Y2 + FFN(Y2))`; the value, attention-output and
    FFN kernels are drawn Xavier-normal with gain `init_gain` (beta), query and key kernels with
    gain 1 (DeepNet, Fig. 2). `keras_tse.layers.deepnorm_constants(depth)` gives the paper's
    (alpha, beta): `((2N)^(1/4), (8N)^(-1/4))` for an N-layer encoder, which is what
    `zoo.vit(norm="deepnorm")` passes.

    Args:
        num_heads, ffn_dim, ...: as `PostNormBlock`.
        residual_scale: float > 0, DeepNet's alpha. Defaults to `1.0`.
        init_gain: float > 0, DeepNet's beta. Defaults to `1.0`.

    Example:

    >>> alpha, beta = keras_tse.layers.deepnorm_constants(80)  # (3.56, 0.18)
    >>> block = keras_tse.layers.DeepNormBlock(8, 384, residual_scale=alpha, init_gain=beta)

    Reference:
        Wang et al. 2022, DeepNet: Scaling Transformers to 1,000 Layers, Sec. 3, Fig. 2.
    """

    def __init__(self, *args, residual_scale=1.0, init_gain=1.0, deescalate=None, **kwargs):
        if deescalate is not None:
            raise ValueError(f"A DeepNormBlock does not de-escalate. Received: deescalate={deescalate!r}")
        super().__init__(*args, norm="deepnorm", residual_scale=residual_scale, init_gain=init_gain, **kwargs)

    def get_config(self):
        config = super().get_config()
        for key in ("norm", "deescalate_at"):
            config.pop(key)
        return config
