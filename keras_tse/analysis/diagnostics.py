"""Per block and head: attention entropy and the eigenvalue moments of `W_Q W_K^T` (Bao, Hataya &
Karakida, ICML 2024), what `AttentionDiagnostics` tracks during `fit` and `keras-tse probe` prints."""

import keras
import numpy as np
from keras import ops

from keras_tse.analysis.similarity import restore_state, snapshot_state
from keras_tse.analysis.spectral import attention_entropy, qk_spectrum
from keras_tse.layers import TransformerBlock


def block_diagnostics(model, inputs, warmup_inputs=None):
    """Per keras_tse block of `model`: a dict of per-head NumPy arrays `entropy` (on `inputs`, mean
    over the batch and query rows) and the QK spectrum moments `mean`, `second_moment`, `variance`,
    `xi`. The model's state (a Transformer-XL memory) is left as found."""
    blocks = [layer for layer in model.layers if isinstance(layer, TransformerBlock)]
    if not blocks:
        raise ValueError(f"No keras_tse Transformer blocks among the layers of model {model.name!r}.")
    batch = keras.tree.flatten(inputs)[0].shape[0]
    block_inputs = keras.Model(model.input, [block.input for block in blocks])
    initial = snapshot_state(model)
    if warmup_inputs is not None:
        block_inputs.predict(warmup_inputs, batch_size=batch, verbose=0)
    warmed = snapshot_state(model)
    xs = block_inputs.predict(inputs, batch_size=batch, verbose=0)
    xs = xs if isinstance(xs, (list, tuple)) else [xs]
    restore_state(warmed)  # each block sees the memory the probe would see
    results = []
    for block, x in zip(blocks, xs):
        _, scores = block(x, return_attention_scores=True)
        w_q, w_k, _ = block.self_attention.query_key_value_kernels()
        stats = {k: ops.convert_to_numpy(v) for k, v in qk_spectrum(w_q, w_k, num_heads=block.num_heads).items()}
        results.append({"entropy": np.mean(ops.convert_to_numpy(attention_entropy(scores)), axis=0), **stats})
    restore_state(initial)
    return results
