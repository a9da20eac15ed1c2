"""The graph rewrite under `keras_tse.deescalate`: each Transformer block of a known kind replaced by its
de-escalated form, every other layer kept."""

import keras

from keras_tse.analysis.similarity import KERAS_HUB_DECODER, blocks_of, is_block, is_graph, of_kind
from keras_tse.layers.deescalated_block import DeEscalatedBlock
from keras_tse.zoo.deescalated_decoder import deescalated_decoder_class
from keras_tse.zoo.preprocessing import replayed


def deescalated_graph(model, options, nested=None):
    """(functional copy of `model` with its blocks rewritten, {id(block): its rewrite}); one line if none is known.
    With `nested` (`keras_tse.deescalate` passes itself), a functional model nested in `model` that holds blocks
    (a KerasHub task's backbone, a model wrapping a backbone) is rewritten whole by `nested(layer, **options)`."""
    blocks = [layer for layer in model.layers if is_block(layer)]
    holding = [layer for layer in model.layers if not is_block(layer) and is_graph(layer) and blocks_of(layer)]
    graphs = holding if nested else []
    if not blocks and not graphs:
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
    rewritten.update({id(graph): nested(graph, **options) for graph in graphs})
    inputs = keras.tree.map_structure(
        lambda x: keras.Input(batch_shape=x.shape, dtype=x.dtype, name=x.name), model.input
    )
    return replayed(model, inputs, layers=lambda layer: rewritten.get(id(layer), layer)), rewritten


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
