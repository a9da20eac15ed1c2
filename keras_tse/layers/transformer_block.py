"""The base class of every keras_tse block: signature, sublayers, config, the two block bodies and
the hooks of the baselines.

The blocks differ only in where the LayerNorms sit and in which attention they use
(`_make_attention`). So the two bodies live here, once each: `_post_norm_steps` (Algorithm 1, with
eq. (21) optionally at the FFN input or the output) and `_pre_norm_steps` (eq. 19). The ViT blocks
run one of them; Transformer-XL's block runs the same two with relative attention and its memory.
The published depth-enabling baselines change a body in three places only, and both families fill
the same three hooks (`keras_tse.layers.baselines`): `_residual` (DeepNet's `alpha * x` in a
post-norm add), `_branch_scale` (LayerScale's `diag(l)`, ReZero's `a`, on a branch joining a
pre-norm stream) and `_normalize` (ReZero has no LayerNorm).
"""

import keras

from keras_tse import _checks
from keras_tse.layers import baselines, initializers
from keras_tse.layers._residual import residual_stream
from keras_tse.layers._sequence_layer import SequenceLayer
from keras_tse.layers.self_attention import SelfAttention, resolve_head_dim


class TransformerBlock(SequenceLayer):
    uses_layer_norm = True  # ReZero's block has none

    def __init__(
        self,
        num_heads,
        ffn_dim,
        head_dim=None,
        alpha=1.0,
        activation="relu",
        dropout=0.0,
        attention_dropout=0.0,
        causal=False,
        layer_norm_epsilon=1e-5,
        initializer="glorot",
        kernel_initializer=None,
        **kwargs,
    ):
        super().__init__(**kwargs)
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
        scheme = dict(initializer=self.initializer, kernel=self.kernel_initializer, dtype=policy)
        self.ffn_inner = initializers.dense(
            self.ffn_dim, "ffn_inner", activation=self.activation, fan_in=hidden, **scheme
        )
        self.ffn_outer = initializers.dense(hidden, "ffn_outer", fan_in=self.ffn_dim, **scheme)
        self.attention_output_dropout = keras.layers.Dropout(self.dropout, dtype=policy)
        self.ffn_inner_dropout = keras.layers.Dropout(self.dropout, dtype=policy)
        self.ffn_output_dropout = keras.layers.Dropout(self.dropout, dtype=policy)
        for layer in (self.self_attention, self.attention_norm, self.ffn_inner, self.ffn_norm):
            if layer is not None:
                layer.build(input_shape)
        self.ffn_outer.build((*input_shape[:-1], self.ffn_dim))
        self._residual_factor = 1.0  # DeepNet's alpha, set by a DeepNorm block
        self.branch_scales = None  # (attention, FFN) scales, set by a LayerScale or ReZero block
        self.built = True

    def _use_deepnorm(self, alpha, beta):
        """DeepNet (Wang et al. 2022, Fig. 2) on a built post-norm body: its init, then `LN(alpha x + G(x))`."""
        baselines.deepnorm_initialize(self, beta)
        self._residual_factor = alpha

    def _use_rezero(self):
        """ReZero (Bachlechner et al. 2021, eq. 3) on a pre-norm body without LayerNorm: one `a` = 0 on
        both branches, as in their `RZTXEncoderLayer`."""
        self.resweight = baselines.add_rezero_weight(self)
        self.branch_scales = (self.resweight, self.resweight)

    def _use_layer_scale(self, initial):
        """LayerScale (CaiT eq. 5) on a built pre-norm body: `diag(l_1)`, `diag(l_2)` at `initial`."""
        self.branch_scales = baselines.add_layer_scales(self, self._hidden, initial)

    def _residual(self, x):
        """A post-norm add's residual input: `x`, or DeepNet's `alpha * x` (`LN(alpha x + G(x))`)."""
        return x if self._residual_factor == 1.0 else self._residual_factor * x

    def _branch_scale(self, branch, x):
        """Branch 0 (attention) or 1 (FFN) as it joins a pre-norm stream: as is, LayerScale's
        per-channel `diag(l_b) x` (CaiT eq. 5) or ReZero's `a x` (one scalar for both branches)."""
        if self.branch_scales is None:
            return x
        return keras.ops.cast(self.branch_scales[branch], x.dtype) * x

    def _normalize(self, norm, x):
        """`norm(x)`, or `x` in a block without LayerNorm (ReZero)."""
        return x if norm is None else norm(x)

    def call(self, inputs, mask=None, training=None, return_attention_scores=False):
        steps = self.steps(inputs, mask=mask, training=training, return_attention_scores=return_attention_scores)
        return (steps["outputs"], steps["scores"]) if return_attention_scores else steps["outputs"]

    def _post_norm_steps(self, inputs, training, return_attention_scores, ffn_input=None, output=None, **attend):
        """Algorithm 1 step by step, the post-norm body of every block: a dict of `y1` ... `y4`, the FFN's
        input (`ffn_input`: `y2`, or eq. (21) of it), the block's `outputs` (`y4`, or eq. (21) of it)
        and `scores` (P, or `None` unless asked). `ffn_input` and `output` are the de-escalations
        (Sec. 3.4 and Sec. 3.3 placements) or `None`; `attend` goes to the attention sublayer."""
        attended, scores = self._attention(inputs, training, return_attention_scores, **attend)
        y1 = self._residual(inputs) + attended  # step 1: X + alpha * P X W
        y2 = self.attention_norm(y1)  # step 2
        ffn_in = y2 if ffn_input is None else ffn_input(y2)
        y3 = self._residual(ffn_in) + self._feed_forward(ffn_in, training)  # step 3
        y4 = self.ffn_norm(y3)  # step 4
        outputs = y4 if output is None else output(y4)
        return {"y1": y1, "y2": y2, "ffn_input": ffn_in, "y3": y3, "y4": y4, "outputs": outputs, "scores": scores}

    def _pre_norm_steps(self, inputs, training, return_attention_scores, **attend):
        """Eq. (19) step by step, the pre-norm body of every block: a dict of `x_hat` (LN X),
        `attention_branch` (P(X_hat) X_hat W as it joins the stream), `y`, the block's `outputs` (Z)
        and `scores` (P, or `None` unless asked); `attend` goes to the attention sublayer."""
        inputs = residual_stream(inputs)  # XLA:CPU differentiates the stream in linear time (_residual.py)
        x_hat = self._normalize(self.attention_norm, inputs)
        attended, scores = self._attention(x_hat, training, return_attention_scores, **attend)
        branch = self._branch_scale(0, attended)
        y = inputs + branch  # eq. (19): Y = X + P(X_hat) X_hat W
        # Z = Y + phi(LN(Y) W_1) W_2
        z = y + self._branch_scale(1, self._feed_forward(self._normalize(self.ffn_norm, y), training))
        return {"x_hat": x_hat, "attention_branch": branch, "y": y, "outputs": z, "scores": scores}

    def _make_attention(self):
        """The attention sublayer; Transformer-XL's block swaps in relative attention."""
        return SelfAttention(
            self.num_heads,
            head_dim=self._head_dim,
            attention_dropout=self.attention_dropout,
            causal=self.causal,
            initializer=self.initializer,
            kernel_initializer=initializers.clone(self.kernel_initializer),
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
        """The FFN branch `phi(X W_1) W_2` (Algorithm 1, step 3), dropout as in vit-pytorch."""
        hidden = self.ffn_inner_dropout(self.ffn_inner(x), training=training)
        return self.ffn_output_dropout(self.ffn_outer(hidden), training=training)

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "ffn_dim": self.ffn_dim,
            "head_dim": self.head_dim,
            "alpha": self.alpha,
            "activation": self.activation,
            "dropout": self.dropout,
            "attention_dropout": self.attention_dropout,
            "causal": self.causal,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "initializer": self.initializer,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }
