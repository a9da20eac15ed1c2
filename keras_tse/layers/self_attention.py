import math

import keras
from keras import ops

from keras_tse import _checks
from keras_tse.layers import initializers
from keras_tse.layers._fused_attention import centred_context, fused_attention, fused_attention_takes, sub_layer_norm
from keras_tse.layers._sequence_layer import SequenceLayer


@keras.saving.register_keras_serializable(package="keras_tse")
class SelfAttention(SequenceLayer):
    """Multi-head softmax self-attention, eq. (2), with a probe path that returns P.

    Each head `k` computes `P_k = softmax(X W_q,k (X W_k,k)^T / sqrt(head_dim))`
    (row-stochastic, eq. 2) and `P_k X W_v,k`; the heads are concatenated and
    projected back to the input width by `W_o`. This is the multi-head step
    `[P_1 X W_1 ... P_h X W_h]` of Prop. 9 with `W_k = W_v,k` followed by the
    output projection every ViT/Transformer-XL implementation carries.

    Training uses `keras.ops.dot_product_attention`, which takes the fused
    (cuDNN / flash) kernel where the backend has one (float16 under JAX on a
    CPU, whose compiler refuses that kernel, takes the explicit softmax).
    Passing `return_attention_scores=True` switches to an explicit softmax and also
    returns the per-head matrices P, for the analysis tools that need them;
    both paths compute the same function.

    Projections follow vit-pytorch, the code the paper's ViT experiments
    build on: query/key/value without bias, output projection with bias.
    Weights are drawn by the named scheme `initializer` (see
    `keras_tse.layers.initializers`): `"torch"` is the paper's code's.

    Args:
        num_heads: int, number of attention heads `h`.
        head_dim: int, width of each head. Defaults to `None`, meaning
            `hidden // num_heads` (the hidden size must then divide).
        attention_dropout: float in [0, 1), dropout on P during training
            (the explicit path is used when it is active). Defaults to `0.0`.
        causal: bool, whether position `t` attends to positions `<= t` only.
            Defaults to `False`.
        initializer: `"glorot"` (Keras' default), `"torch"` (PyTorch's
            `nn.Linear` default, kernels and bias, the paper's code), `"normal"`
            (N(0, 1/d), Sec. 2.4) or `"transformer_xl"` (N(0, 0.02)).
            Defaults to `"glorot"`.
        kernel_initializer: optional Keras initializer for the four kernels,
            overriding the scheme's kernels (the bias keeps the scheme's).
            Defaults to `None`.
        centred: bool, `(P - U) V` instead of `P V`, `U` uniform over the
            keys a query may read (`_fused_attention.centred_context`); the
            scores returned stay P. Defaults to `False`.
        sub_norm: bool, a LayerNorm (epsilon `layer_norm_epsilon`) on the
            heads' output before the output projection (Sub-LN, Wang et al.
            2022). Defaults to `False`.
        sigma_reparam: bool, the four kernels sigma-reparametrised
            (`SigmaReparamDense`, Zhai et al. 2023). Defaults to `False`.
        **kwargs: base layer keyword arguments, such as `name` and `dtype`.

    Call arguments:
        inputs: tensor `[batch, tokens, hidden]`.
        mask: optional boolean `[batch, tokens]`, `True` for real tokens;
            padded tokens are not attended to.
        training: bool, whether dropout is active.
        return_attention_scores: bool, whether to also return P
            `[batch, heads, tokens, tokens]` (float32). Defaults to `False`.
        cache: a `DecodingCache` for decoding (`keras_tse.zoo.generate`): `inputs`
            are the positions after those whose keys and values it holds; they
            attend to all of them and their own, and the cache takes their keys
            and values. No `mask`, no scores.

    Returns:
        `[batch, tokens, hidden]`, or `(outputs, P)` with
        `return_attention_scores=True`.

    Reference:
        Yu & Zhang, eq. (2) and Prop. 9; Vaswani et al. 2017.
    """

    def __init__(
        self,
        num_heads,
        head_dim=None,
        attention_dropout=0.0,
        causal=False,
        initializer="glorot",
        kernel_initializer=None,
        centred=False,
        sub_norm=False,
        layer_norm_epsilon=1e-5,
        sigma_reparam=False,
        **kwargs,
    ):
        super().__init__(**kwargs)
        self.num_heads = _checks.positive_int("num_heads", num_heads)
        self.head_dim = _checks.positive_int("head_dim", head_dim, allow_none=True)
        self.attention_dropout = _checks.dropout_rate("attention_dropout", attention_dropout)
        self.causal = bool(causal)
        self.centred = bool(centred)
        self.sub_norm = bool(sub_norm)
        self.sigma_reparam = bool(sigma_reparam)
        self.layer_norm_epsilon = _checks.positive_float("layer_norm_epsilon", layer_norm_epsilon)
        self.initializer = initializers.check(initializer)
        self.kernel_initializer = initializers.resolve(initializer, kernel_initializer)

    def build(self, input_shape):
        _checks.rank3(self, input_shape)
        hidden = input_shape[-1]
        self._head_dim = resolve_head_dim(hidden, self.num_heads, self.head_dim)
        inner = self.num_heads * self._head_dim
        scheme = dict(
            initializer=self.initializer, kernel=self.kernel_initializer, sigma_reparam=self.sigma_reparam,
            dtype=self.dtype_policy,
        )  # fmt: skip
        self.query_dense, self.key_dense, self.value_dense = (
            initializers.dense(inner, name, use_bias=False, fan_in=hidden, **scheme)
            for name in ("query", "key", "value")
        )
        self.output_dense = initializers.dense(hidden, "attention_output", fan_in=inner, **scheme)
        for dense in (self.query_dense, self.key_dense, self.value_dense):
            dense.build(input_shape)
        self.output_dense.build((*input_shape[:-1], inner))
        self.sub_layer_norm = sub_layer_norm(self, (*input_shape[:-1], inner))
        self.dropout = keras.layers.Dropout(self.attention_dropout, dtype=self.dtype_policy)
        self.built = True

    def query_key_value_kernels(self):
        """`(W_Q, W_K, W_V)`, each `[hidden, heads * head_dim]`: the kernels the spectral measures read (the
        reparametrised ones under `sigma_reparam`)."""
        denses = (self.query_dense, self.key_dense, self.value_dense)
        if self.sigma_reparam:
            return tuple(dense.effective_kernel() for dense in denses)
        return tuple(dense.kernel for dense in denses)

    def assign_query_key_value_kernels(self, query, key, value):
        """Set `W_Q`, `W_K`, `W_V` (each `[hidden, heads * head_dim]`), as DeepNet's initialisation does."""
        for dense, kernel in zip((self.query_dense, self.key_dense, self.value_dense), (query, key, value)):
            dense.kernel.assign(kernel)

    def call(self, inputs, mask=None, training=None, return_attention_scores=False, cache=None):
        _checks.token_mask(self, mask, inputs.shape)
        q, k, v = (self._split_heads(d(inputs)) for d in (self.query_dense, self.key_dense, self.value_dense))
        if cache is not None:
            return self._cached_attention(q, k, v, cache)
        key_mask = None if mask is None else ops.cast(mask, "bool")[:, None, None, :]  # [B, 1, 1, S]
        dropout_active = bool(training) and self.attention_dropout > 0
        if return_attention_scores or dropout_active or not fused_attention_takes(q.dtype):
            context, scores = self._explicit_attention(q, k, v, key_mask, training)
        else:
            context = fused_attention(q, k, v, mask=key_mask, is_causal=self.causal)
            scores = None
        if self.centred:
            context = centred_context(context, v, attention_mask(key_mask, ops.shape(q)[1], self.causal))
        batch, tokens = ops.shape(inputs)[0], ops.shape(inputs)[1]
        outputs = self._output(ops.reshape(context, (batch, tokens, self.num_heads * self._head_dim)))
        return (outputs, scores) if return_attention_scores else outputs

    def _split_heads(self, x):
        batch, tokens = ops.shape(x)[0], ops.shape(x)[1]
        return ops.reshape(x, (batch, tokens, self.num_heads, self._head_dim))  # [B, T, N, H]

    def _explicit_attention(self, q, k, v, key_mask, training):
        # eq. (2), per head: M = Q K^T / sqrt(head_dim), P = row-softmax(M); in float32 for a
        # probe that is exact under mixed precision.
        logits = ops.einsum("btnh,bsnh->bnts", ops.cast(q, "float32"), ops.cast(k, "float32"))
        logits = logits / math.sqrt(self._head_dim)
        allowed = attention_mask(key_mask, ops.shape(q)[1], self.causal)
        if allowed is not None:
            logits = ops.where(allowed, logits, ops.full_like(logits, -1e9))
        scores = ops.softmax(logits, axis=-1)  # [B, N, T, S], rows sum to 1
        weights = self.dropout(ops.cast(scores, v.dtype), training=training)
        return ops.einsum("bnts,bsnh->btnh", weights, v), scores

    def _cached_attention(self, q, k, v, cache):
        """Eq. (2) for the new positions only: their queries against the keys and values of every earlier
        position (the cache's) and their own, causal among themselves; one position's work a new token.
        The cache is `cache.capacity` positions long from the start, so every token's step has the same
        shapes (an eager backend reuses its kernels, a compiled one its program)."""
        batch, new = ops.shape(q)[0], ops.shape(q)[1]
        if cache.keys is None:
            shape = (batch, cache.capacity, self.num_heads, self._head_dim)
            cache.keys, cache.values = ops.zeros(shape, k.dtype), ops.zeros(shape, v.dtype)
        cache.keys = ops.slice_update(cache.keys, (0, cache.filled, 0, 0), k)
        cache.values = ops.slice_update(cache.values, (0, cache.filled, 0, 0), v)
        logits = ops.einsum("btnh,bsnh->bnts", ops.cast(q, "float32"), ops.cast(cache.keys, "float32"))
        logits = logits / math.sqrt(self._head_dim)
        # query t (position filled + t) reads the keys written so far up to its own position (a
        # bidirectional layer would read its later new positions too: decoding is for causal ones)
        allowed = ops.arange(cache.capacity)[None, :] <= cache.filled + ops.arange(new)[:, None]
        logits = ops.where(allowed[None, None], logits, ops.full_like(logits, -1e9))
        weights = ops.cast(ops.softmax(logits, axis=-1), cache.values.dtype)
        context = ops.einsum("bnts,bsnh->btnh", weights, cache.values)
        if self.centred:
            context = centred_context(context, cache.values, allowed[None, None])
        return self._output(ops.reshape(context, (batch, new, self.num_heads * self._head_dim)))

    def _output(self, heads):
        """`W_O` on the heads' concatenated output, after Sub-LN's LayerNorm where `sub_norm` asks for it."""
        return self.output_dense(heads if self.sub_layer_norm is None else self.sub_layer_norm(heads))

    def get_config(self):
        return {
            **super().get_config(),
            "num_heads": self.num_heads,
            "head_dim": self.head_dim,
            "attention_dropout": self.attention_dropout,
            "causal": self.causal,
            "centred": self.centred,
            "sub_norm": self.sub_norm,
            "sigma_reparam": self.sigma_reparam,
            "layer_norm_epsilon": self.layer_norm_epsilon,
            "initializer": self.initializer,
            "kernel_initializer": keras.initializers.serialize(self.kernel_initializer),
        }


class DecodingCache:
    """What one block keeps while a sequence is decoded token by token (`TransformerBlock.decode`):
    `capacity` positions of attention keys and values (`[batch, capacity, heads, head_dim]`, allocated at
    the first step unless given) and of the rows eq. (21)'s causal mean reads (`eq21_inputs`, for a block
    that de-escalates), of which the first `filled` are written."""

    def __init__(self, capacity, filled=0, keys=None, values=None, eq21_inputs=None):
        self.capacity = capacity
        self.filled = filled  # an int, or a tensor inside a compiled step
        self.keys, self.values, self.eq21_inputs = keys, values, eq21_inputs


def resolve_head_dim(hidden, num_heads, head_dim=None):
    """`head_dim` if given, else `hidden / num_heads`, which must then be an integer."""
    _checks.positive_int("num_heads", num_heads)
    if head_dim is not None:
        return _checks.positive_int("head_dim", head_dim)
    if hidden % num_heads:
        divisors = [h for h in range(1, hidden + 1) if hidden % h == 0]
        raise ValueError(
            f"The hidden size must be divisible by `num_heads` when `head_dim` is not given: "
            f"choose num_heads in {divisors}, or pass head_dim. "
            f"Received: hidden={hidden}, num_heads={num_heads}"
        )
    return hidden // num_heads


def attention_mask(key_mask, tokens, causal):
    """Boolean [B or 1, 1, T, S] of allowed (query, key) pairs, or None when all are allowed."""
    allowed = key_mask
    if causal:
        positions = ops.arange(tokens)
        lower = positions[:, None] >= positions[None, :]  # [T, S]: key s <= query t
        allowed = lower[None, None] if allowed is None else ops.logical_and(allowed, lower[None, None])
    return allowed
