"""`keras.ops.dot_product_attention` as the attention layers call it (eq. 2's softmax(QK^T/sqrt(d)) V)."""

import keras
from keras import ops

from keras_tse.layers._residual import xla_cpu


def fused_attention(query, key, value, **kwargs):
    """The fused attention kernel, `[B, T, N, H]` inputs, with the kernel choice left to the backend.

    On PyTorch, Keras' own check for the flash kernel (`flash_attention=None`) builds a
    `torch.backends.cuda.SDPAParams`, a C++ object `torch.compile` cannot trace: every block's
    attention then breaks the graph and dynamo recompiles per block until its recompile limit.
    `flash_attention=False` skips that check only: `scaled_dot_product_attention` still picks the
    flash or memory-efficient kernel itself where the inputs allow.

    On JAX, Keras asks whether cuDNN's kernel takes the inputs for inference only; its gradient refuses an
    odd query or key length (a ViT's 65 tokens: "Unsupported sequence length Q 65, KV 65"). Unrolled, the
    refusal comes while Keras still tries its fallback (a logged traceback a block); inside `scan` it comes
    when the loop is differentiated, past that fallback, and training stops. So an odd length takes XLA's
    attention from the start. TensorFlow keeps Keras' choice.
    """
    backend = keras.backend.backend()
    if backend == "torch" or (backend == "jax" and not cudnn_trains(query, key)):
        kwargs["flash_attention"] = False
    return ops.dot_product_attention(query, key, value, **kwargs)


def cudnn_trains(query, key):
    """Whether cuDNN's fused attention can also differentiate `[B, T, N, H]` query and key of these lengths:
    both even (a length unknown while tracing counts as odd)."""
    return all(length is not None and length % 2 == 0 for length in (query.shape[1], key.shape[1]))


def fused_attention_takes(dtype):
    """Whether `fused_attention` compiles for inputs of `dtype` here. Under JAX on CPUs alone it does not for
    float16: JAX's attention asks for float32 accumulation of float16 inputs, a dot XLA's CPU compiler
    refuses; the layers then compute eq. (2) with their explicit softmax, its logits in float32."""
    return not (keras.backend.standardize_dtype(dtype) == "float16" and xla_cpu())


def centred_context(context, values, allowed=None):
    """`(P - U) V` from `P V` (`context`, `[B, T, N, H]`) and `V` (`values`, `[B, S, N, H]`): each head's attention
    matrix without its leading eigenspace ("Mind the Gap", Naderi, Nait Saada and Tanner 2024): `P 1 = 1`, so
    subtracting `U`, the uniform distribution over the keys each query may read (`allowed`, boolean, broadcastable
    to `[B, 1, T, S]`; `None`: all `S`), removes the eigenvalue 1 and the spectral gap behind eq. (8). A causal
    query reads the mean of the values at positions `<= t`, so no position reads a later one."""
    if allowed is None:
        return context - ops.mean(values, axis=1, keepdims=True)
    batch, tokens, heads = ops.shape(context)[0], ops.shape(context)[1], ops.shape(context)[2]
    weights = ops.cast(allowed, values.dtype)
    weights = weights / ops.maximum(ops.sum(weights, axis=-1, keepdims=True), 1)
    weights = ops.broadcast_to(weights, (batch, heads, tokens, ops.shape(values)[1]))
    return context - ops.einsum("bnts,bsnh->btnh", weights, values)


def sub_layer_norm(attention, shape):
    """Sub-LN's LayerNorm before the output projection of `attention` (built for `shape`), or `None` where its
    `sub_norm` is off: the attention layers' one place for it."""
    if not attention.sub_norm:
        return None
    norm = keras.layers.LayerNormalization(
        epsilon=attention.layer_norm_epsilon, dtype=attention.dtype_policy, name="sub_norm"
    )
    norm.build(shape)
    return norm
