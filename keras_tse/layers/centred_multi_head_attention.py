import keras
from keras import ops

from keras_tse.layers._fused_attention import centred_context


@keras.saving.register_keras_serializable(package="keras_tse")
class CentredMultiHeadAttention(keras.layers.MultiHeadAttention):
    """Keras's `MultiHeadAttention` with each head's attention matrix centred, `(P - U) V` for `P V`, `U` the
    uniform distribution over the keys each query may read (its `attention_mask`, or the causal mask): the
    attention of `norm="centred_attention"` ("Mind the Gap", Naderi, Nait Saada and Tanner 2024), for a block
    someone else wrote. `P 1 = 1` makes `1` the leading eigenvector behind the paper's spectral gap; `(P - U) 1 = 0`.
    Same arguments, weights and configuration as `MultiHeadAttention`; where attention dropout is on, `P` is the
    dropped one (its rows then sum to about 1)."""

    def _compute_attention(
        self, query, key, value, attention_mask=None, training=None, return_attention_scores=False,
        use_causal_mask=False,
    ):  # fmt: skip
        context, scores = super()._compute_attention(
            query, key, value, attention_mask=attention_mask, training=training,
            return_attention_scores=return_attention_scores, use_causal_mask=use_causal_mask,
        )  # fmt: skip
        allowed = None if attention_mask is None else ops.cast(attention_mask, "bool")[:, None]
        if use_causal_mask and attention_mask is None:
            t, s = ops.shape(query)[1], ops.shape(key)[1]
            allowed = ops.arange(s)[None, :] <= ops.arange(t)[:, None] + (s - t)
        return centred_context(context, value, allowed), scores
