import keras

from keras_tse.layers.transformer_block import TransformerBlock


@keras.saving.register_keras_serializable(package="keras_tse")
class PreNormBlock(TransformerBlock):
    """The pre-norm Transformer block of eq. (19).

    On `X` `[batch, tokens, hidden]`:

        X_hat = LN(X),  Y = X + alpha * P(X_hat) X_hat W,  Z = Y + phi(LN(Y) W_1) W_2.

    The residual stream is never normalised, so its norm grows with depth
    while the attention input stays at the norm of `LN(X)` (eq. 20): the role
    of self-attention shrinks block after block, which is how pre-norm hides
    token similarity escalation (Sec. 3.1). A model built from these blocks
    usually ends with one final LayerNorm; that belongs to the model, not here.

    Args:
        num_heads: int, number of attention heads.
        ffn_dim: int, inner width of the FFN.
        head_dim: int, width of each head. Defaults to `None`, meaning
            `hidden // num_heads`.
        alpha: positive float scaling the self-attention branch. Defaults to
            `1.0`.
        activation: FFN activation, one of `"relu"`, `"gelu"`, `"silu"`,
            `"tanh"`. Defaults to `"relu"`.
        dropout: float in [0, 1), dropout on each branch output and on the FFN
            hidden layer. Defaults to `0.0`.
        attention_dropout: float in [0, 1), dropout on P. Defaults to `0.0`.
        causal: bool, causal (decoder) attention. Defaults to `False`.
        layer_norm_epsilon: float, LayerNorm epsilon. Defaults to `1e-5`.
        initializer: weight scheme of the attention and FFN, one of
            `keras_tse.layers.initializers.INITIALIZERS` (see `PostNormBlock`).
            Defaults to `"glorot"`.
        kernel_initializer: optional Keras initializer overriding the scheme's
            kernels. Defaults to `None`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: tensor `[batch, tokens, hidden]`.
        mask: optional boolean `[batch, tokens]`, `True` for real tokens.
        training: bool, whether dropout is active.
        return_attention_scores: bool, whether to also return the per-head
            attention matrices P (explicit softmax: the probe path).
            Defaults to `False`.

    Returns:
        `[batch, tokens, hidden]`, or `(outputs, P)`.

    Example:

    >>> block = keras_tse.layers.PreNormBlock(num_heads=8, ffn_dim=384)
    >>> block(np.random.randn(2, 65, 192).astype("float32")).shape  # (2, 65, 192)

    Reference:
        Yu & Zhang, Sec. 3.1, eqs. (19)-(20); Xiong et al. 2020.
    """

    def __init__(self, *args, **kwargs):
        super().__init__(*args, norm=kwargs.pop("norm", "pre"), **kwargs)

    def get_config(self):
        config = super().get_config()
        for key in ("norm", "deescalate_at"):
            config.pop(key)
        return config
