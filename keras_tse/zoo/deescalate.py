"""The paper's fix on a model someone else wrote: `deescalate(model)` applies eq. (21) after every
bidirectional Transformer block of a known kind, every weight kept."""

import keras

from keras_tse.analysis.similarity import is_block
from keras_tse.layers.deescalated_block import DeEscalatedBlock
from keras_tse.layouts.layout import eq21_options
from keras_tse.zoo.preprocessing import replayed


def deescalate(model, tau=1.0, trainable_tau=False):
    """A copy of functional `model` in which every bidirectional Transformer block of a known kind (KerasHub's
    `TransformerEncoder` and ViT encoder blocks, keras_tse's blocks that are not causal) is followed by
    eq. (21), `Y = (I - tau 11^T/n) X`, on its output, where the paper puts it for an encoder (Sec. 3.3): each
    becomes a `DeEscalatedBlock` holding it; the token mean runs over the real tokens where the block is given
    a `padding_mask`. Every other layer of `model` is the copy's own and each block is held by its wrapper (no
    weight copied: the copy trains the same weights), its inputs and outputs as they were.

    A causal block (a decoder: the paper puts its running mean before the FFN, inside the block) and a model
    with no block of a known kind are refused in one line naming them.

    Args:
        model: a functional `keras.Model` (a KerasHub backbone, a zoo model).
        tau: float in [0, 1], eq. (21)'s fraction. Defaults to `1.0`.
        trainable_tau: bool, learn each block's tau, clipped into [0, 1]. Defaults to `False`.

    Returns:
        A functional `keras.Model` named `f"{model.name}_deescalated"`.
    """
    options = eq21_options(tau, trainable_tau)
    blocks = [layer for layer in model.layers if is_block(layer)]
    if not blocks:
        raise ValueError(
            f"`deescalate` rewrites Transformer blocks of a known kind, and model {model.name!r} has none. "
            f"Received: layers {[type(layer).__name__ for layer in model.layers][:12]}"
        )
    causal = [layer.name for layer in blocks if _is_causal(layer)]
    if causal:
        raise ValueError(
            "`deescalate` puts eq. (21) at a bidirectional block's output; a causal block's running mean goes "
            f"before its FFN, inside the block, which it cannot rewrite. Received: causal blocks {causal[:4]} "
            f"({type(blocks[0]).__name__})"
        )

    def wrapped(layer):
        if not any(layer is block for block in blocks):
            return layer
        return DeEscalatedBlock(layer, **options, name=f"{layer.name}_deescalated")

    inputs = keras.tree.map_structure(
        lambda x: keras.Input(batch_shape=x.shape, dtype=x.dtype, name=x.name), model.input
    )
    copy = replayed(model, inputs, layers=wrapped)
    return keras.Model(copy.input, copy.output, name=f"{model.name}_deescalated")  # their structure kept (a dict)


def _is_causal(layer):
    """A decoder block: KerasHub's `TransformerDecoder` (causal by construction), or a block saying so."""
    return type(layer).__name__ == "TransformerDecoder" or bool(getattr(layer, "causal", False))
