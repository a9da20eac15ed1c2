"""The paper's fix on a model someone else wrote: `deescalate(model)` applies eq. (21) in every Transformer
block of a known kind where the paper puts it, every weight kept."""

import keras

from keras_tse.analysis.similarity import KERAS_HUB_DECODER, is_block, of_kind
from keras_tse.layers.deescalated_block import DeEscalatedBlock
from keras_tse.layouts.layout import eq21_options
from keras_tse.zoo.deescalated_decoder import deescalated_decoder_class  # registers its loader too
from keras_tse.zoo.preprocessing import replayed


def deescalate(model, tau=1.0, trainable_tau=False):
    """A copy of functional `model` in which every Transformer block of a known kind applies eq. (21),
    `Y = (I - tau 11^T/n) X`, where the paper puts it:

    - a bidirectional block (KerasHub's `TransformerEncoder` and ViT encoder blocks, keras_tse's blocks that
      are not causal): on its output (Sec. 3.3), the block held by a `DeEscalatedBlock` (its weights shared
      with `model`); the token mean over the real tokens where the block is given a `padding_mask`;
    - a causal KerasHub `TransformerDecoder` (GPT-2's): the running mean before its FFN (Sec. 3.4), in a
      `DeEscalatedDecoder` of the same configuration holding a copy of its weights (the block itself changes
      inside, so `model`'s own stays as it was).

    Every other layer is `model`'s own, inputs and outputs as they were. A model with no block of a known kind,
    or a causal block of keras_tse's (build it with `norm="deescalate"`), is refused in one line.

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
    causal = [layer.name for layer in blocks if getattr(layer, "causal", False)]
    if causal:
        raise ValueError(
            "`deescalate` rewrites KerasHub's decoders; a causal keras_tse block is built de-escalated "
            f"(`norm='deescalate'`). Received: causal blocks {causal[:4]} ({type(blocks[0]).__name__})"
        )
    rewritten = {id(block): _rewritten(block, options) for block in blocks}
    inputs = keras.tree.map_structure(
        lambda x: keras.Input(batch_shape=x.shape, dtype=x.dtype, name=x.name), model.input
    )
    copy = replayed(model, inputs, layers=lambda layer: rewritten.get(id(layer), layer))
    return keras.Model(copy.input, copy.output, name=f"{model.name}_deescalated")  # their structure kept (a dict)


def _rewritten(block, options):
    if not of_kind(block, {KERAS_HUB_DECODER}):
        return DeEscalatedBlock(block, **options, name=f"{block.name}_deescalated")
    decoder = deescalated_decoder_class().from_config({**block.get_config(), **options})
    if not decoder.built:  # KerasHub's config carries the shapes it was built at, and builds from them
        decoder.build_from_config(block.get_build_config())
    ours = {id(w) for w in decoder.de_escalation.weights}
    targets = [w for w in decoder.weights if id(w) not in ours]
    for target, value in zip(targets, block.weights, strict=True):
        target.assign(value)
    return decoder
