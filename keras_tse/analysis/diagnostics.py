"""Per block and head: attention entropy and the eigenvalue moments of `W_Q W_K^T` (Bao, Hataya &
Karakida, ICML 2024), what `AttentionDiagnostics` tracks during `fit` and `keras-tse probe` prints. The blocks
are found by kind (`keras_tse.analysis.similarity.is_block`): keras_tse's own, and KerasHub's encoder and
decoder blocks, bare or de-escalated."""

import keras
import numpy as np
from keras import ops

from keras_tse.analysis.similarity import (
    KERAS_HUB_DEBERTA_BLOCK,
    KERAS_HUB_DECODER,
    KERAS_HUB_VIT_BLOCK,
    as_graph,
    block_calls,
    blocks_of,
    of_kind,
    restore_state,
    snapshot_state,
)
from keras_tse.analysis.spectral import attention_entropy, qk_spectrum
from keras_tse.layers import ScannedBlocks, TransformerBlock, WrappedBlock


def block_diagnostics(model, inputs, warmup_inputs=None):
    """Per Transformer block of `model` (one of a known kind; a scanned stack is not looked into): a dict of
    per-head NumPy arrays `entropy` (on `inputs`, mean over the batch and query rows) and the QK spectrum
    moments `mean`, `second_moment`, `variance`, `xi`. The model's state (a Transformer-XL memory) is left
    as found."""
    model = as_graph(model)
    blocks = [block for block in blocks_of(model) if not isinstance(block, ScannedBlocks)]
    if not blocks:
        raise ValueError(f"No Transformer blocks of a known kind among the layers of model {model.name!r}.")
    unread = [block.name for block in blocks if not reads_attention(block)]
    if unread:
        raise ValueError(
            "The attention diagnostics read eq. (2)'s softmax(Q K^T / sqrt(d)); DeBERTa's disentangled attention adds "
            f"relative-position terms they do not model. Received: blocks {unread[:4]} of model {model.name!r}"
        )
    batch = keras.tree.flatten(inputs)[0].shape[0]
    calls = block_calls(model, blocks)
    block_inputs = keras.Model(calls.inputs, [x for _, x in calls.block_inputs])
    initial = snapshot_state(model)
    if warmup_inputs is not None:
        block_inputs.predict(warmup_inputs, batch_size=batch, verbose=0)
    warmed = snapshot_state(model)
    xs = block_inputs.predict(inputs, batch_size=batch, verbose=0)
    xs = xs if isinstance(xs, (list, tuple)) else [xs]
    restore_state(warmed)  # each block sees the memory the probe would see
    results = []
    for (block, _), x in zip(calls.block_inputs, xs, strict=True):
        scores, w_q, w_k, heads = _attention_of(block.block if isinstance(block, WrappedBlock) else block, x)
        stats = {k: ops.convert_to_numpy(v) for k, v in qk_spectrum(w_q, w_k, num_heads=heads).items()}
        results.append({"entropy": np.mean(ops.convert_to_numpy(attention_entropy(scores)), axis=0), **stats})
    restore_state(initial)
    return results


def _attention_of(block, x):
    """(P `[batch, heads, n, n]`, W_Q, W_K `[hidden, heads * head_dim]`, heads) of `block` on its input `x`."""
    if isinstance(block, TransformerBlock):
        _, scores = block(x, return_attention_scores=True)
        w_q, w_k, _ = block.self_attention.query_key_value_kernels()
        return scores, w_q, w_k, block.num_heads
    return keras_hub_attention(block, x)


def reads_attention(block):
    """Whether the diagnostics read `block`'s attention: eq. (2)'s `softmax(Q K^T / sqrt(d))`, which DeBERTa's
    disentangled attention is not."""
    inner = block.block if isinstance(block, WrappedBlock) else block
    return not of_kind(inner, {KERAS_HUB_DEBERTA_BLOCK})


def keras_hub_attention(block, x):
    """The same for KerasHub's `TransformerEncoder` / `TransformerDecoder` and ViT's `ViTEncoderBlock`, from the
    block's weights (its sublayers are private to it): the input normalised first where the block is pre-norm,
    eq. (2)'s `softmax(Q K^T / sqrt(head_dim))` per head, the decoder's causal mask; no padding (a probe of whole
    sequences)."""
    config, weight, x = block.get_config(), _weights_by_suffix(block), ops.convert_to_tensor(x)
    norm = _first_norm(block)
    if norm is not None:
        mean = ops.mean(x, axis=-1, keepdims=True)
        variance = ops.var(x, axis=-1, keepdims=True)
        normalised = (x - mean) / ops.sqrt(variance + config["layer_norm_epsilon"])
        x = normalised * weight(f"{norm}/gamma") + weight(f"{norm}/beta")
    w_q, w_k = weight("query/kernel"), weight("key/kernel")  # [hidden, heads, head_dim]
    q = ops.einsum("btd,dhk->bhtk", x, w_q) + ops.expand_dims(weight("query/bias", 0.0), 1)
    k = ops.einsum("btd,dhk->bhtk", x, w_k) + ops.expand_dims(weight("key/bias", 0.0), 1)
    logits = ops.einsum("bhqk,bhtk->bhqt", q, k) / float(w_q.shape[-1]) ** 0.5
    if of_kind(block, {KERAS_HUB_DECODER}):
        n = x.shape[1]
        logits = ops.where(ops.tril(ops.ones((n, n), "bool")), logits, -1e9)
    heads = w_q.shape[1]
    flat = (w_q.shape[0], heads * w_q.shape[2])
    return ops.softmax(logits, axis=-1), ops.reshape(w_q, flat), ops.reshape(w_k, flat), heads


def _first_norm(block):
    """The name of the norm a KerasHub block applies before its attention, or None where it is post-norm: ViT's
    blocks are pre-norm (`ln_1`), an encoder or decoder where built with `normalize_first`."""
    if of_kind(block, {KERAS_HUB_VIT_BLOCK}):
        return "ln_1"
    return "self_attention_layer_norm" if block.get_config()["normalize_first"] else None


def _weights_by_suffix(block):
    """`weight(suffix, default)`: the block's one self-attention weight whose path ends so (never the
    cross-attention's); `default` where it has none (a bias a block built without biases lacks)."""
    own = [w for w in block.weights if "cross_attention" not in w.path]
    missing = object()

    def weight(suffix, default=missing):
        found = [w for w in own if w.path.endswith("/" + suffix)]
        if not found and default is not missing:
            return default
        (one,) = found
        return one

    return weight
