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
    flash or memory-efficient kernel itself where the inputs allow. JAX and TensorFlow keep Keras'
    choice (on JAX that is the cuDNN kernel on a GPU).
    """
    if keras.backend.backend() == "torch":
        kwargs["flash_attention"] = False
    return ops.dot_product_attention(query, key, value, **kwargs)


def fused_attention_takes(dtype):
    """Whether `fused_attention` compiles for inputs of `dtype` here. Under JAX on CPUs alone it does not for
    float16: JAX's attention asks for float32 accumulation of float16 inputs, a dot XLA's CPU compiler
    refuses; the layers then compute eq. (2) with their explicit softmax, its logits in float32."""
    return not (keras.backend.standardize_dtype(dtype) == "float16" and xla_cpu())
