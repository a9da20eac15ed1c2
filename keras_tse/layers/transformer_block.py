"""The base class of every keras_tse block: signature, sublayers, config, and the hooks of the baselines.

The blocks differ only in where the LayerNorms sit (Algorithm 1 versus eq. 19) and in which
attention they use (`_make_attention`), so each subclass writes its own `call` from the two
sublayer functions defined here. The published depth-enabling baselines change a block in three
places only, and both model families fill the same three hooks (`keras_tse.layers.baselines`):
`_residual` (DeepNet's `alpha * x` in a post-norm add), `_branch_scale` (LayerScale's `diag(l)`,
ReZero's `a`, on a branch joining a pre-norm stream) and `_normalize` (ReZero has no LayerNorm).
"""

import keras

from keras_tse import _checks
from keras_tse.layers import initializers
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
        resolve_head_dim(hidden, self.num_heads, self.head_dim)  # fail here, naming the block
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

    def _make_attention(self):
        """The attention sublayer; Transformer-XL's block swaps in relative attention."""
        return SelfAttention(
            self.num_heads,
            head_dim=self.head_dim,
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
