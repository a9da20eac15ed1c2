"""The Transformer block of every keras_tse model: signature, sublayers, config and the two bodies,
laid out by a residual layout (`keras_tse.layouts`).

A block is an attention sublayer, an FFN and, where its layout has them, two LayerNorms. Its layout
(`norm`) says which of the two bodies runs, `_post_norm_steps` (Algorithm 1) or `_pre_norm_steps`
(eq. 19), and fills them in: the residual factor of a post-norm add (DeepNet's alpha), the scales a
pre-norm branch joins with (LayerScale's `diag(l)`, ReZero's `a`), kernels redrawn at other gains,
and eq. (21) at `deescalate_at`. The ViT and the GPT decoder stack this block; Transformer-XL's
block is this one with relative attention over a memory (`_make_attention`).
"""

import functools

import keras

from keras_tse import _checks
from keras_tse.layers import initializers
from keras_tse.layers._residual import residual_stream
from keras_tse.layers._sequence_layer import SequenceLayer
from keras_tse.layers.de_escalation import DeEscalation
from keras_tse.layers.quantization import config_dtype
from keras_tse.layers.self_attention import SelfAttention, resolve_head_dim
from keras_tse.layers.stochastic_depth import StochasticDepth
from keras_tse.layouts.layout import get_layout, split_options
from keras_tse.norms import DEESCALATE_AT


@keras.saving.register_keras_serializable(package="keras_tse")
class TransformerBlock(SequenceLayer):
    """A Transformer block of any residual layout: self-attention and an FFN on `[batch, tokens, hidden]`.

    With `norm="post"` it is Algorithm 1 step for step: `Y1 = X + alpha P X W`, `Y2 = LN(Y1)`,
    `Y3 = Y2 + phi(Y2 W_1) W_2`, `Y4 = LN(Y3)`; with `norm="pre"` eq. (19); with
    `norm="deescalate"` Algorithm 1 plus `DeEscalation(tau)` (eq. 21) at `deescalate_at`; and the
    published depth-enabling layouts `"deepnorm"`, `"rezero"`, `"layerscale"` (`keras_tse.layouts`
    has each, with its reference). `PostNormBlock`, `PreNormBlock`, `DeepNormBlock`, `ReZeroBlock`
    and `LayerScaleBlock` are this block with their layout fixed.

    Args:
        num_heads: int, number of attention heads.
        ffn_dim: int, inner width `q` of the FFN (`W_1` is `hidden x q`).
        head_dim: int, width of each head. Defaults to `None`, meaning `hidden // num_heads`.
        norm: the residual layout, a name of `keras_tse.layouts.layout_names()` or a
            `keras_tse.layouts.Layout`. Defaults to `"post"`.
        alpha: positive float scaling the self-attention branch (step 1). Defaults to `1.0`.
        activation: FFN activation `phi`, one of `"relu"`, `"gelu"`, `"silu"`, `"tanh"`.
            Defaults to `"relu"`, the paper's choice.
        dropout: float in [0, 1), on each branch output and on the FFN hidden layer. Defaults to `0.0`.
        attention_dropout: float in [0, 1), dropout on P. Defaults to `0.0`.
        drop_path: float in [0, 1), the probability each branch is dropped for an example while
            training (`StochasticDepth`, stochastic depth). Defaults to `0.0`.
        causal: bool, causal (decoder) attention, and a causal de-escalation. Defaults to `False`.
        layer_norm_epsilon: float, LayerNorm epsilon. Defaults to `1e-5`.
        initializer: weight scheme of the attention and FFN, `"glorot"`, `"torch"` (PyTorch's
            `nn.Linear` default, kernels and biases: the paper's code), `"normal"` (N(0, 1/d),
            Sec. 2.4) or `"transformer_xl"`. Defaults to `"glorot"` (Keras' convention).
        kernel_initializer: optional Keras initializer overriding the scheme's kernels.
        deescalate_at: `"output"` (after step 4, Sec. 3.3) or `"pre_ffn"` (the FFN input, Sec. 3.4),
            where a de-escalating layout applies eq. (21). Defaults to `"output"`.
        **kwargs: the layout's options (`tau` and `trainable_tau` of `"deescalate"`,
            `residual_scale` and `init_gain` of `"deepnorm"`, `layer_scale_init` of
            `"layerscale"`), then base layer keyword arguments such as `name` and `dtype`.

    Call arguments:
        inputs: tensor `[batch, tokens, hidden]`.
        mask: optional boolean `[batch, tokens]`, `True` for real tokens.
        training: bool, whether dropout is active.
        return_attention_scores: bool, also return the per-head attention matrices P
            `[batch, heads, tokens, tokens]` (explicit softmax: the probe path). Defaults to
            `False` (fused attention).

    Returns:
        `[batch, tokens, hidden]`, or `(outputs, P)`.

    Example:

    >>> block = keras_tse.layers.TransformerBlock(8, 384, norm="deescalate", tau=0.5)
    >>> block(np.random.randn(2, 65, 192).astype("float32")).shape  # (2, 65, 192)

    Reference:
        Yu & Zhang, Algorithm 1, eqs. (19) and (21), Secs. 3.3-3.4.
    """

    def __init__(
        self,
        num_heads,
        ffn_dim,
        head_dim=None,
        norm="post",
        alpha=1.0,
        activation="relu",
        dropout=0.0,
        attention_dropout=0.0,
        causal=False,
        layer_norm_epsilon=1e-5,
        initializer="glorot",
        kernel_initializer=None,
        deescalate_at="output",
        drop_path=0.0,
        **kwargs,
    ):
        layout = get_layout(norm)  # a name, or the `Layout` a builder resolved
        options, kwargs = split_options(layout, kwargs)
        super().__init__(**kwargs)
        self.norm, self.layout, self.layout_options = layout.name, layout, options
        for key, value in options.items():  # `block.tau`, `block.residual_scale`
            setattr(self, key, value)
        self.num_heads = _checks.positive_int("num_heads", num_heads)
        self.ffn_dim = _checks.positive_int("ffn_dim", ffn_dim)
        self.head_dim = _checks.positive_int("head_dim", head_dim, allow_none=True)
        self.alpha = _checks.positive_float("alpha", alpha)
        self.activation = _checks.one_of("activation", activation, _checks.ACTIVATIONS)
        self.dropout = _checks.dropout_rate("dropout", dropout)
        self.attention_dropout = _checks.dropout_rate("attention_dropout", attention_dropout)
        self.causal = bool(causal)
        self.layer_norm_epsilon = _checks.positive_float("layer_norm_epsilon", layer_norm_epsilon)
        self.initializer = initializers.check(initializer)
        self.kernel_initializer = initializers.resolve(initializer, kernel_initializer)
        self.deescalate_at = _checks.one_of("deescalate_at", deescalate_at, DEESCALATE_AT)
        self.drop_path = _checks.dropout_rate("drop_path", drop_path)
        if self.layout.deescalates and not self.layout.causal_mean and not self.causal:
            raise ValueError(f"norm={self.norm!r} measures a causal model's leak. Received: causal={causal!r}")
        if self.causal and not self.layout.causal:
            raise ValueError(
                f"norm={self.norm!r} reads every position, later ones included, which a causal block may not. "
                f"Received: norm={self.norm!r}, causal=True"
            )

    @property
    def uses_layer_norm(self):
        return self.layout.layer_norm

    def build(self, input_shape):
        _checks.rank3(self, input_shape)
        hidden = input_shape[-1]
        self._hidden = hidden
        self._head_dim = resolve_head_dim(hidden, self.num_heads, self.head_dim)  # fails here, naming the block
        policy = self.dtype_policy
        self.self_attention = self._make_attention()
        self.attention_norm = self.ffn_norm = None
        if self.uses_layer_norm:
            self.attention_norm = keras.layers.LayerNormalization(
                epsilon=self.layer_norm_epsilon, dtype=policy, name="attention_norm"
            )
            self.ffn_norm = keras.layers.LayerNormalization(
                epsilon=self.layer_norm_epsilon, dtype=policy, name="ffn_norm"
            )
        scheme = dict(
            initializer=self.initializer, kernel=self.kernel_initializer, sigma_reparam=self.layout.sigma_reparam,
            dtype=policy,
        )  # fmt: skip
        self.ffn_inner = initializers.dense(
            self.ffn_dim, "ffn_inner", activation=self.activation, fan_in=hidden, **scheme
        )
        self.ffn_outer = initializers.dense(hidden, "ffn_outer", fan_in=self.ffn_dim, **scheme)
        self.attention_output_dropout = keras.layers.Dropout(self.dropout, dtype=policy)
        self.ffn_inner_dropout = keras.layers.Dropout(self.dropout, dtype=policy)
        self.ffn_output_dropout = keras.layers.Dropout(self.dropout, dtype=policy)
        self.drop_branch = StochasticDepth(self.drop_path, dtype=policy, name="drop_path") if self.drop_path else None
        self.attention_branch_norm = self.ffn_branch_norm = None
        if self.layout.branch_norm:  # a LayerNorm on each branch's output (the layout's hook: sandwich norm)
            self.attention_branch_norm, self.ffn_branch_norm = (
                keras.layers.LayerNormalization(epsilon=self.layer_norm_epsilon, dtype=policy, name=name)
                for name in ("attention_branch_norm", "ffn_branch_norm")
            )
        branch_norms = (self.attention_branch_norm, self.ffn_branch_norm)
        for layer in (self.self_attention, self.attention_norm, self.ffn_inner, self.ffn_norm, *branch_norms):
            if layer is not None:
                layer.build(input_shape)
        self.ffn_outer.build((*input_shape[:-1], self.ffn_dim))
        self.ffn_sub_norm = None
        if self.layout.sub_norm:  # Sub-LN's LayerNorm before W_2 (its attention's is the attention layer's)
            self.ffn_sub_norm = keras.layers.LayerNormalization(
                epsilon=self.layer_norm_epsilon, dtype=policy, name="ffn_sub_norm"
            )
            self.ffn_sub_norm.build((*input_shape[:-1], self.ffn_dim))
        self.de_escalation = None
        if self.layout.deescalates:
            self.de_escalation = DeEscalation(
                self.layout_options["tau"],
                trainable_tau=self.layout_options["trainable_tau"],
                causal=self.causal and self.layout.causal_mean,
                dtype=policy,
                name="de_escalation",
            )
            self.de_escalation.build(input_shape)
        self.placed = self.layout.placed_layer(self.layout_options, policy) if self.layout.places else None
        if self.placed is not None:  # the layout's own transform at eq. (21)'s place (`Layout.placed_layer`)
            self.placed.build(input_shape)
        self._redraw_kernels(self.layout.kernel_gains(self.layout_options))
        self.layout_state = self.layout.add_weights(self, hidden, self.layout_options)
        self._residual_factor = self.layout.residual_factor(self.layout_options)
        self.built = True

    def _redraw_kernels(self, gains):
        """Draw the named kernels again, Xavier-normal at the layout's gains (DeepNet's Fig. 2 init):
        `torch.nn.init.xavier_normal_(w, gain)`, N(0, gain^2 * 2 / (fan_in + fan_out))."""
        if gains is None:
            return
        attention = self.self_attention
        shape = tuple(attention.query_key_value_kernels()[0].shape)  # the fans of one projection
        attention.assign_query_key_value_kernels(*(_xavier_normal(gains[k])(shape) for k in ("query", "key", "value")))
        for key, dense in (
            ("output", attention.output_dense),
            ("ffn_inner", self.ffn_inner),
            ("ffn_outer", self.ffn_outer),
        ):
            dense.kernel.assign(_xavier_normal(gains[key])(dense.kernel.shape))

    def _residual(self, x):
        """A post-norm add's residual input: `x`, or the layout's multiple of it (DeepNet's `alpha x`)."""
        return x if self._residual_factor == 1.0 else self._residual_factor * x

    def _branch(self, branch, x, training):
        """Branch 0 (attention) or 1 (FFN) as it joins the residual: normalised if the layout says so
        (`Layout.branch_norm`), times the layout's scale if it has one (LayerScale's per-channel
        `diag(l_b)`, CaiT eq. 5; ReZero's scalar `a`), then dropped for some examples while training if
        `drop_path` says so (stochastic depth)."""
        x = self._normalize((self.attention_branch_norm, self.ffn_branch_norm)[branch], x)
        scale = self.layout.branch_scale(self.layout_state, branch)
        x = x if scale is None else keras.ops.cast(scale, x.dtype) * x
        return x if self.drop_branch is None else self.drop_branch(x, training=training)

    def _normalize(self, norm, x):
        """`norm(x)`, or `x` in a block without LayerNorm (ReZero)."""
        return x if norm is None else norm(x)

    def rematerialized_call(self, layer_call, *args, **kwargs):
        """Keras's recomputation (`keras.RematScope`) of this block, its flags bound outside it: JAX's
        checkpoint traces every argument it is given, and `training` steers Python branches here."""
        recompute = super().rematerialized_call

        def call(inputs, *rest, **flags):
            return recompute(lambda x: layer_call(x, *rest, **flags), inputs)(inputs)

        return call

    def call(self, inputs, mask=None, training=None, return_attention_scores=False):
        steps = self.steps(inputs, mask=mask, training=training, return_attention_scores=return_attention_scores)
        return (steps["outputs"], steps["scores"]) if return_attention_scores else steps["outputs"]

    @property
    def decodes(self):
        """Whether `decode` can run this block: causal, and eq. (21)'s mean (if any) over earlier positions."""
        return self.causal and (self.de_escalation is None or self.layout.causal_mean)

    def decode(self, inputs, cache):
        """The block on the next positions of a sequence whose earlier positions `cache` (a
        `DecodingCache`) holds, in inference: the same outputs as the whole sequence through `call`, for
        one position's work per new token (`keras_tse.zoo.generate`). Eq. (21)'s causal mean runs over
        the earlier positions' rows too (`DeEscalation`'s memory); a layout whose mean reads later
        positions (leaky) cannot decode so."""
        if not self.decodes:
            raise ValueError(
                "Decoding position by position needs a causal block, with a causal mean in eq. (21). "
                f"Received: norm={self.norm!r}, causal={self.causal}"
            )
        deescalate = None
        if self.de_escalation is not None:

            def deescalate(x):
                if cache.eq21_inputs is None:
                    shape = (keras.ops.shape(x)[0], cache.capacity, keras.ops.shape(x)[2])
                    cache.eq21_inputs = keras.ops.zeros(shape, x.dtype)
                written = keras.ops.arange(cache.capacity) < cache.filled
                outputs = self.de_escalation(x, memory=cache.eq21_inputs, memory_mask=written)
                cache.eq21_inputs = keras.ops.slice_update(cache.eq21_inputs, (0, cache.filled, 0), x)
                return outputs

        outputs = self._body_steps(inputs, False, False, deescalate, cache=cache)["outputs"]
        cache.filled = (
            cache.filled + keras.ops.shape(inputs)[1]
        )  # a new value: PyTorch's += would change a shared tensor
        return outputs

    def steps(self, inputs, mask=None, training=None, return_attention_scores=False):
        """The block's body step by step (Fig. 2 and Fig. 4 read it): Algorithm 1's `y1` ... `y4` or
        eq. (19)'s `x_hat`, `attention_branch`, `y`; with `ffn_input`, `outputs`, `scores` and
        `eq21_inputs` in both. De-escalated where the layout says, at `deescalate_at`."""
        if self.placed is not None and mask is not None:  # its softmax would weigh the padding's tokens
            raise ValueError(f"norm={self.norm!r} reads every token and takes no padding mask. Received: a mask")
        deescalate = self.placed if self.de_escalation is None else functools.partial(self.de_escalation, mask=mask)
        return self._body_steps(inputs, training, return_attention_scores, deescalate, mask=mask)

    def _body_steps(self, inputs, training, return_attention_scores, deescalate, **attend):
        """The layout's body, eq. (21) (`deescalate`, or `None`) at `deescalate_at`."""
        placed = {self.deescalate_at: deescalate} if deescalate is not None else {}
        body = self._post_norm_steps if self.layout.body == "post" else self._pre_norm_steps
        return body(
            inputs,
            training,
            return_attention_scores,
            ffn_input=placed.get("pre_ffn"),  # eq. (21) at the FFN input (Sec. 3.4)
            output=placed.get("output"),  # eq. (21) at the block output (Sec. 3.3)
            **attend,
        )

    def _post_norm_steps(self, inputs, training, return_attention_scores, ffn_input=None, output=None, **attend):
        """Algorithm 1 step by step: a dict of `y1` ... `y4`, the FFN's input (`ffn_input`: `y2`, or
        eq. (21) of it), the block's `outputs` (`y4`, or eq. (21) of it), `scores` (P, or `None`
        unless asked) and `eq21_inputs` (what eq. (21) reads at each place); `attend` goes to the
        attention sublayer."""
        attended, scores = self._attention(inputs, training, return_attention_scores, **attend)
        y1 = self._residual(inputs) + self._branch(0, attended, training)  # step 1: X + alpha * P X W
        y2 = self.attention_norm(y1)  # step 2
        ffn_in = y2 if ffn_input is None else ffn_input(y2)
        y3 = self._residual(ffn_in) + self._branch(1, self._feed_forward(ffn_in, training), training)  # step 3
        y4 = self.ffn_norm(y3)  # step 4
        outputs = y4 if output is None else output(y4)
        eq21_inputs = {"pre_ffn": y2, "output": y4}
        return dict(
            y1=y1, y2=y2, ffn_input=ffn_in, y3=y3, y4=y4, outputs=outputs, scores=scores, eq21_inputs=eq21_inputs
        )

    def _pre_norm_steps(self, inputs, training, return_attention_scores, ffn_input=None, output=None, **attend):
        """Eq. (19) step by step: a dict of `x_hat` (LN X), `attention_branch` (P(X_hat) X_hat W as it
        joins the stream), `y`, the FFN's input (`LN Y`, or eq. (21) of it), the block's `outputs`
        (Z, or eq. (21) of it), `scores` and `eq21_inputs`; `attend` goes to the attention sublayer."""
        inputs = residual_stream(inputs)  # XLA:CPU differentiates the stream in linear time (_residual.py)
        x_hat = self._normalize(self.attention_norm, inputs)
        attended, scores = self._attention(x_hat, training, return_attention_scores, **attend)
        branch = self._branch(0, attended, training)
        y = inputs + branch  # eq. (19): Y = X + P(X_hat) X_hat W
        y_hat = self._normalize(self.ffn_norm, y)
        ffn_in = y_hat if ffn_input is None else ffn_input(y_hat)
        z = y + self._branch(1, self._feed_forward(ffn_in, training), training)  # Z = Y + phi(LN(Y) W_1) W_2
        outputs = z if output is None else output(z)
        eq21_inputs = {"pre_ffn": y_hat, "output": z}
        return {
            "x_hat": x_hat,
            "attention_branch": branch,
            "y": y,
            "ffn_input": ffn_in,
            "outputs": outputs,
            "scores": scores,
            "eq21_inputs": eq21_inputs,
        }

    def _make_attention(self):
        """The attention sublayer; Transformer-XL's block swaps in relative attention."""
        return SelfAttention(
            self.num_heads,
            head_dim=self._head_dim,
            attention_dropout=self.attention_dropout,
            causal=self.causal,
            initializer=self.initializer,
            kernel_initializer=initializers.clone(self.kernel_initializer),
            centred=self.layout.centred_attention,
            sub_norm=self.layout.sub_norm,
            layer_norm_epsilon=self.layer_norm_epsilon,
            sigma_reparam=self.layout.sigma_reparam,
            dtype=self.dtype_policy,
            name="self_attention",
        )

    def _attention(self, x, training, return_attention_scores, **attention_kwargs):
        """The self-attention branch `alpha * P X W` (Algorithm 1, step 1), and P if asked.

        `attention_kwargs` go to the attention sublayer: `mask` for SelfAttention, `memory` and
        `memory_length` for Transformer-XL's RelativeAttention.
        """
        outputs = self.self_attention(
            x, training=training, return_attention_scores=return_attention_scores, **attention_kwargs
        )
        outputs, scores = outputs if return_attention_scores else (outputs, None)
        return self.alpha * self.attention_output_dropout(outputs, training=training), scores

    def _feed_forward(self, x, training):
        """The FFN branch `phi(X W_1) W_2` (Algorithm 1, step 3), dropout as in vit-pytorch; Sub-LN's
        `LN(phi(X W_1)) W_2` where the layout says."""
        hidden = self._normalize(self.ffn_sub_norm, self.ffn_inner_dropout(self.ffn_inner(x), training=training))
        return self.ffn_output_dropout(self.ffn_outer(hidden), training=training)

    def get_config(self):
        return {
            **super().get_config(),
            "dtype": config_dtype(self, self._flatten_layers(include_self=False)),  # its quantized sublayers'
            "num_heads": self.num_heads,
            "ffn_dim": self.ffn_dim,
            "head_dim": self.head_dim,
            "norm": self.norm,
            "alpha": self.alpha,
            "activation": self.activation,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "causal": self.causal,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "initializer": self.initializer,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "deescalate_at": self.deescalate_at,
            "drop_path": self.drop_path,
            **self.layout_options,
        }


def _xavier_normal(gain):
    return keras.initializers.VarianceScaling(scale=gain**2, mode="fan_avg", distribution="untruncated_normal")
