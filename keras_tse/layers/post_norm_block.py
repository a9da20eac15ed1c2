import keras

from keras_tse import _checks
from keras_tse.layers.transformer_block import TransformerBlock
from keras_tse.layouts.layout import eq21_options
from keras_tse.norms import DEESCALATE_AT


@keras.saving.register_keras_serializable(package="keras_tse")
class PostNormBlock(TransformerBlock):
    """The "classic" post-norm Transformer block, Algorithm 1, with optional de-escalation.

    Step for step, on `X` `[batch, tokens, hidden]`:

    0. `P = P(X)`, multi-head softmax attention (eq. 2);
    1. `Y1 = X + alpha * P X W` (self-attention plus residual);
    2. `Y2 = LN(Y1)`;
    3. `Y3 = Y2 + phi(Y2 W_1) W_2` (FFN plus residual);
    4. `Y4 = LN(Y3)`.

    Stacked deep, this block drives token similarity towards 1 (TSE, Sec. 2).
    `deescalate` inserts `DeEscalation(tau)`, eq. (21), at one of the paper's
    two places: `"output"` after step 4 (the ViT experiment, Sec. 3.3), or
    `"pre_ffn"` on the input of the FFN sub-block, i.e. on `Y2`, which then
    feeds both the FFN and its residual (the Transformer-XL experiment,
    Sec. 3.4). In a `causal` block the de-escalation is causal too (mean over
    positions `<= t`), so no position reads a later token.

    Args:
        num_heads: int, number of attention heads.
        ffn_dim: int, inner width `q` of the FFN (`W_1` is `hidden x q`).
        head_dim: int, width of each head. Defaults to `None`, meaning
            `hidden // num_heads`.
        alpha: positive float scaling the self-attention branch (step 1).
            Defaults to `1.0`.
        activation: FFN activation `phi`, one of `"relu"`, `"gelu"`, `"silu"`,
            `"tanh"`. Defaults to `"relu"`, the paper's choice.
        dropout: float in [0, 1), dropout on each branch output and on the FFN
            hidden layer. Defaults to `0.0`.
        attention_dropout: float in [0, 1), dropout on P. Defaults to `0.0`.
        causal: bool, causal (decoder) attention. Defaults to `False`.
        layer_norm_epsilon: float, LayerNorm epsilon. Defaults to `1e-5`.
        initializer: weight scheme of the attention and FFN, `"glorot"`,
            `"torch"` (PyTorch's `nn.Linear` default, kernels and biases: the
            paper's code), `"normal"` (N(0, 1/d), Sec. 2.4) or
            `"transformer_xl"`. Defaults to `"glorot"` (Keras' convention;
            `zoo.vit` defaults to `"torch"`).
        kernel_initializer: optional Keras initializer overriding the scheme's
            kernels. Defaults to `None`.
        deescalate: `None`, `"output"` or `"pre_ffn"`, where to apply eq. (21).
            Defaults to `None` (the plain post-norm block).
        tau: float in [0, 1], the de-escalation strength. Defaults to `1.0`.
        trainable_tau: bool, whether `tau` is learned. Defaults to `False`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: tensor `[batch, tokens, hidden]`.
        mask: optional boolean `[batch, tokens]`, `True` for real tokens.
        training: bool, whether dropout is active.
        return_attention_scores: bool, whether to also return the per-head
            attention matrices P `[batch, heads, tokens, tokens]` (explicit
            softmax: the probe path). Defaults to `False` (fused attention).

    Returns:
        `[batch, tokens, hidden]`, or `(outputs, P)`.

    Example:

    >>> block = keras_tse.layers.PostNormBlock(num_heads=8, ffn_dim=384, deescalate="output")
    >>> block(np.random.randn(2, 65, 192).astype("float32")).shape  # (2, 65, 192)

    Reference:
        Yu & Zhang, Algorithm 1, eq. (21), Secs. 3.3-3.4.
    """

    def __init__(self, *args, deescalate=None, tau=1.0, trainable_tau=False, **kwargs):
        _checks.one_of("deescalate", deescalate, (None, *DEESCALATE_AT))
        if deescalate is None:  # the plain block: tau is unused (a config saved before layouts holds it)
            super().__init__(*args, norm="post", **kwargs)
            options = eq21_options(tau, trainable_tau)
            self.tau, self.trainable_tau = options["tau"], options["trainable_tau"]
        else:
            super().__init__(
                *args, norm="deescalate", deescalate_at=deescalate, tau=tau, trainable_tau=trainable_tau, **kwargs
            )
        self.deescalate = deescalate

    def get_config(self):
        config = super().get_config()
        for key in ("norm", "deescalate_at"):
            config.pop(key)
        return {**config, "deescalate": self.deescalate, "tau": self.tau, "trainable_tau": self.trainable_tau}
