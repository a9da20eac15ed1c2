import math

import keras
from keras import ops

from keras_tse import _checks
from keras_tse.layers import initializers
from keras_tse.layers._fused_attention import centred_context, fused_attention, fused_attention_takes, sub_layer_norm


@keras.saving.register_keras_serializable(package="keras_tse")
class RelativeAttention(keras.layers.Layer):
    """Transformer-XL's causal multi-head attention with relative positions and memory.

    The queries are the segment's `T` positions; the keys and values are the
    `M` memory positions followed by the segment, `K = M + T` in all. For
    query `i` and key `j`, at relative distance `i + M - j`, each head scores
    (Dai et al. 2019, Sec. 3.3, terms (a)-(d) regrouped):

        A_ij = (q_i + u)^T k_j  +  (q_i + v)^T W_R R_{i+M-j},

    `u = r_w_bias` and `v = r_r_bias` the two learned biases, `R` the
    sinusoidal encoding of a distance, then `P = softmax(A / sqrt(head_dim))`
    over the keys `j <= i + M` (the causal mask over memory plus segment) and
    `P V`, projected back to the input width. The position term is computed
    against all `K` distances at once and aligned by the relative shift.

    Memory slots not yet filled (after a reset) are masked: `memory_length`
    says how many of the `M` slots, counted from the end, hold real states.
    Training uses `keras.ops.dot_product_attention` with the position term as
    its additive bias (float16 under JAX on a CPU, whose compiler refuses that
    kernel, takes the explicit softmax); `return_attention_scores=True` computes
    the softmax explicitly and also returns P.

    Projections follow the reference code: one fused query/key/value kernel
    and an output kernel, none with a bias; every weight is initialised
    `N(0, 0.02)`, the biases `u`, `v` too (`initializer="transformer_xl"`).

    Args:
        num_heads: int, number of heads.
        head_dim: int, width of each head (Transformer-XL base: 41 with 10
            heads of a 410-wide model).
        attention_dropout: float in [0, 1), dropout on P. Defaults to `0.0`.
        initializer: weight scheme of the kernels and of `u`, `v`, one of
            `keras_tse.layers.initializers.INITIALIZERS`. Defaults to
            `"transformer_xl"`, `N(0, 0.02)`, the reference's.
        kernel_initializer: optional Keras initializer overriding the
            scheme's. Defaults to `None`.
        centred: bool, `(P - U) V`, `U` uniform over the filled memory and
            segment positions a query reads (`SelfAttention`'s). Defaults to
            `False`.
        sub_norm: bool, Sub-LN's LayerNorm (epsilon `layer_norm_epsilon`) on
            the heads' output before `W_O` (`SelfAttention`'s). Defaults to
            `False`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: tensor `[batch, T, hidden]`, the segment.
        memory: optional tensor `[batch, M, hidden]`, the cached states
            (the caller stops their gradient).
        memory_length: optional int scalar tensor, how many trailing memory
            slots are filled. Defaults to all `M`.
        training: bool, whether dropout is active.
        return_attention_scores: bool, also return P `[batch, heads, T, K]`.

    Returns:
        `[batch, T, hidden]`, or `(outputs, P)`.

    Reference:
        Dai et al. 2019, "Transformer-XL", Sec. 3.3 and Appendix B (the
        relative shift).
    """

    def __init__(
        self,
        num_heads,
        head_dim,
        attention_dropout=0.0,
        initializer="transformer_xl",
        kernel_initializer=None,
        centred=False,
        sub_norm=False,
        layer_norm_epsilon=1e-5,
        sigma_reparam=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = _checks.positive_int("num_heads", num_heads)
        self.head_dim = _checks.positive_int("head_dim", head_dim)
        self.attention_dropout = _checks.dropout_rate("attention_dropout", attention_dropout)
        self.centred = bool(centred)  # `(P - U) V`, U uniform over the memory and segment a query reads
        self.sub_norm = bool(sub_norm)  # Sub-LN: a LayerNorm before W_O (`SelfAttention`'s)
        self.sigma_reparam = bool(sigma_reparam)  # the three kernels `SigmaReparamDense`'s (`SelfAttention`'s)
        self.layer_norm_epsilon = _checks.positive_float("layer_norm_epsilon", layer_norm_epsilon)
        self.initializer = initializers.check(initializer)
        self.kernel_initializer = initializers.resolve(initializer, kernel_initializer)

    def build(self, input_shape):
        _checks.rank3(self, input_shape)
        hidden, inner = input_shape[-1], self.num_heads * self.head_dim
        dense, linear = dict(use_bias=False, dtype=self.dtype_policy), initializers.dense_class(self.sigma_reparam)
        self.qkv_dense = linear(
            3 * inner, kernel_initializer=initializers.clone(self.kernel_initializer), name="qkv", **dense
        )
        self.position_dense = linear(  # W_R, applied to the encodings R
            inner, kernel_initializer=initializers.clone(self.kernel_initializer), name="position", **dense
        )
        self.output_dense = linear(
            hidden, kernel_initializer=initializers.clone(self.kernel_initializer), name="attention_output", **dense
        )
        self.qkv_dense.build(input_shape)
        self.position_dense.build((None, hidden))
        self.output_dense.build((*input_shape[:-1], inner))
        self.sub_layer_norm = sub_layer_norm(self, (*input_shape[:-1], inner))
        bias = dict(shape=(self.num_heads, self.head_dim), trainable=True)
        self.content_bias = self.add_weight(
            name="r_w_bias", initializer=initializers.clone(self.kernel_initializer), **bias
        )
        self.position_bias = self.add_weight(
            name="r_r_bias", initializer=initializers.clone(self.kernel_initializer), **bias
        )
        self.dropout = keras.layers.Dropout(self.attention_dropout, dtype=self.dtype_policy)
        self.built = True

    def query_key_value_kernels(self):
        """`(W_Q, W_K, W_V)`, each `[hidden, heads * head_dim]`: the three thirds of the fused kernel."""
        kernel = self.qkv_dense.effective_kernel() if self.sigma_reparam else self.qkv_dense.kernel
        inner = kernel.shape[-1] // 3
        return tuple(kernel[:, i * inner : (i + 1) * inner] for i in range(3))

    def assign_query_key_value_kernels(self, query, key, value):
        """Set `W_Q`, `W_K`, `W_V` (each `[hidden, heads * head_dim]`) in the fused kernel, q | k | v."""
        self.qkv_dense.kernel.assign(ops.concatenate([query, key, value], axis=1))

    def call(self, inputs, memory=None, memory_length=None, training=None, return_attention_scores=False):
        segment = inputs.shape[1]
        context = inputs if memory is None else ops.concatenate([ops.cast(memory, inputs.dtype), inputs], axis=1)
        memory_slots = context.shape[1] - segment
        q, k, v = ops.split(self._heads(self.qkv_dense(context)), 3, axis=2)  # each [B, K, N, H]
        q = q[:, memory_slots:]  # queries: the segment only
        positions = self._heads(
            self.position_dense(sinusoid_encoding(context.shape[1], inputs.shape[-1], self.compute_dtype)[None])
        )[0]
        position_scores = relative_shift(
            ops.einsum("btnh,knh->bntk", q + ops.cast(self.position_bias, q.dtype), positions)
        )
        allowed = relative_causal_mask(segment, memory_slots, memory_length)  # [T, K]
        scale = 1.0 / math.sqrt(self.head_dim)
        query = q + ops.cast(self.content_bias, q.dtype)
        # The position term and the mask enter the softmax as one additive bias (-1e9: masked).
        bias = ops.cast(position_scores, "float32") * scale
        bias = ops.where(allowed[None, None], bias, ops.full_like(bias, -1e9))
        explicit = return_attention_scores or (bool(training) and self.attention_dropout > 0)
        if explicit or not fused_attention_takes(q.dtype):
            logits = ops.einsum("btnh,bknh->bntk", ops.cast(query, "float32"), ops.cast(k, "float32"))
            scores = ops.softmax(logits * scale + bias, axis=-1)  # float32 also under mixed precision
            weights = self.dropout(ops.cast(scores, v.dtype), training=training)
            attended = ops.einsum("bntk,bknh->btnh", weights, v)
        else:
            scores = None
            attended = fused_attention(query, k, v, bias=ops.cast(bias, q.dtype), scale=scale)
        if self.centred:
            attended = centred_context(attended, v, allowed[None, None])
        batch = ops.shape(inputs)[0]
        heads = ops.reshape(attended, (batch, segment, self.num_heads * self.head_dim))
        outputs = self.output_dense(heads if self.sub_layer_norm is None else self.sub_layer_norm(heads))
        return (outputs, scores) if return_attention_scores else outputs

    def _heads(self, x):
        shape = ops.shape(x)
        return ops.reshape(x, (shape[0], shape[1], -1, self.head_dim))

    def compute_output_spec(
        self, inputs, memory=None, memory_length=None, training=None, return_attention_scores=False
    ):
        outputs = keras.KerasTensor(inputs.shape, dtype=self.compute_dtype)
        if not return_attention_scores:
            return outputs
        keys = inputs.shape[1] + (0 if memory is None else memory.shape[1])
        return outputs, keras.KerasTensor((inputs.shape[0], self.num_heads, inputs.shape[1], keys), "float32")

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "head_dim": self.head_dim,
            "attention_dropout": self.attention_dropout,
            "initializer": self.initializer,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
            "centred": self.centred,
            "sub_norm": self.sub_norm,
            "sigma_reparam": self.sigma_reparam,
            "layer_norm_epsilon": self.layer_norm_epsilon,
        }


def sinusoid_encoding(length, dim, dtype="float32"):
    """`R` for the distances `length - 1, ..., 1, 0` (that order), `[length, dim]`.

    Row `c` encodes distance `length - 1 - c` as `[sin(d w), cos(d w)]` with
    `w_k = 10000^(-2k/dim)`: Vaswani et al.'s encoding, as Transformer-XL uses it.
    """
    distances = ops.arange(length - 1, -1, -1, dtype="float32")
    frequencies = 1.0 / (10000.0 ** (ops.arange(0, dim, 2, dtype="float32") / dim))
    angles = distances[:, None] * frequencies[None, :]
    return ops.cast(ops.concatenate([ops.sin(angles), ops.cos(angles)], axis=-1)[:, :dim], dtype)


def relative_shift(x):
    """Align `x[..., i, c]` (distance `K - 1 - c`) so that column `j` holds distance `i + M - j`.

    `x` is `[batch, heads, T, K]` with `K = M + T`; the result's entry `(i, j)` is
    `x[..., i, j + T - 1 - i]` wherever `j <= i + M` (the causal keys; the rest is
    filler that the mask removes). Padding one zero column in front and reading
    the flat buffer with rows one longer shifts row `i` left by `T - 1 - i`
    without a gather (Dai et al., Appendix B).
    """
    batch, heads, queries, keys = ops.shape(x)
    padded = ops.pad(x, [[0, 0], [0, 0], [0, 0], [1, 0]])
    padded = ops.reshape(padded, (batch, heads, keys + 1, queries))
    return ops.reshape(padded[:, :, 1:], (batch, heads, queries, keys))


def relative_causal_mask(segment, memory_slots, memory_length=None):
    """Boolean `[T, M + T]`: query `i` sees key `j` if `j <= i + M` and slot `j` is filled."""
    query = ops.arange(segment)[:, None]
    key = ops.arange(memory_slots + segment)[None, :]
    allowed = key <= query + memory_slots
    if memory_length is not None and memory_slots:
        filled = ops.concatenate([filled_slots(memory_slots, memory_length), ops.ones((segment,), "bool")])
        allowed = ops.logical_and(allowed, filled[None, :])
    return allowed


def filled_slots(memory_slots, memory_length):
    """Boolean `[M]`: memory fills from the end, so with `L` states slots `M - L .. M - 1` are filled."""
    return ops.arange(memory_slots) >= memory_slots - ops.cast(memory_length, "int32")
