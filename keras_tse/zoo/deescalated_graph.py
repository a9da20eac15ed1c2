"""The graph rewrite under `keras_tse.deescalate`: each Transformer block of a known kind replaced by its
de-escalated form, every other layer kept."""

import keras

from keras_tse._weights import assign_copy
from keras_tse.analysis.similarity import (
    KERAS_HUB_DECODER,
    blocks_of,
    is_block,
    is_graph,
    kind_name,
    of_kind,
    run_stack,
    stacked_blocks,
)
from keras_tse.layers.deescalated_block import DeEscalatedBlock
from keras_tse.zoo.deescalated_decoder import deescalated_decoder_class
from keras_tse.zoo.preprocessing import replayed


def deescalated_graph(model, options, nested=None):
    """(a functional model calling functional `model`'s layers, its blocks rewritten, {id(block): its rewrite});
    one line if none is known. With `nested` (`keras_tse.deescalate` passes its rewrite), a functional model nested
    in `model` that holds blocks (a KerasHub task's backbone, a model wrapping a backbone) is rewritten whole by
    `nested(layer, **options)`."""
    blocks = [block for layer in model.layers for block in ([layer] if is_block(layer) else stacked_blocks(layer))]
    holding = [layer for layer in model.layers if not is_block(layer) and is_graph(layer) and blocks_of(layer)]
    graphs = holding if nested else []
    if not blocks and not graphs:
        raise ValueError(
            f"`deescalate` rewrites Transformer blocks of a known kind, and model {model.name!r} has none. "
            f"Received: layers {[type(layer).__name__ for layer in model.layers][:12]}"
        )
    twice = [layer for layer in blocks if applies_eq21(layer)]
    if twice:  # a second projection compounds: (I - tau 11^T/n)^2 removes 1 - (1 - tau)^2 of the mean, not tau
        raise ValueError(
            f"`deescalate` would apply eq. (21) twice: blocks of model {model.name!r} already apply it; pass the "
            f"model as it was before, or build it with another `norm`. Received: blocks {_named(twice)}"
        )
    causal = [layer for layer in blocks if getattr(layer, "causal", False)]
    if causal:
        raise ValueError(
            "`deescalate` rewrites KerasHub's decoders; a causal keras_tse block is built de-escalated "
            f"(`norm='deescalate'`). Received: causal blocks {_named(causal)}"
        )
    derived = [b for b in blocks if of_kind(b, {KERAS_HUB_DECODER}) and kind_name(type(b)) != KERAS_HUB_DECODER]
    if derived:  # the rewrite rebuilds KerasHub's own decoder from the block's configuration
        raise ValueError(
            "`deescalate` rebuilds KerasHub's `TransformerDecoder` itself, and a subclass of it (Whisper's, "
            f"Moonshine's) changes its inside, which the rebuilt block would lose. Received: blocks {_named(derived)}"
        )
    rewritten = {id(block): _rewritten(block, options) for block in blocks}
    rewritten.update({id(graph): nested(graph, **options) for graph in graphs})
    inputs = keras.tree.map_structure(
        lambda x: keras.Input(batch_shape=x.shape, dtype=x.dtype, name=x.name), model.input
    )

    def call(layer, *args, **kwargs):  # a known stack runs block by block, each block's rewrite in its place
        if stacked_blocks(layer):
            return run_stack(layer, *args, call=call)
        return rewritten.get(id(layer), layer)(*args, **kwargs)

    return replayed(model, inputs, call, layers=lambda layer: rewritten.get(id(layer), layer)), rewritten


def _named(blocks):
    """The first few blocks of a refusal, each as name (class)."""
    return ", ".join(f"{block.name} ({type(block).__name__})" for block in blocks[:4])


def applies_eq21(block):
    """Whether `block` already de-escalates: a rewrite of `deescalate`'s, or a keras_tse block (or a scanned stack
    of them) of a de-escalating layout."""
    block = getattr(block, "template", block)  # `ScannedBlocks`: its blocks' configuration
    layout = getattr(block, "layout", None)
    return getattr(block, "de_escalation", None) is not None or bool(getattr(layout, "deescalates", False))


def _rewritten(block, options):
    if not of_kind(block, {KERAS_HUB_DECODER}):
        return DeEscalatedBlock(block, **options, name=f"{block.name}_deescalated")
    decoder = deescalated_decoder_class().from_config({**block.get_config(), **options})
    if not decoder.built:  # KerasHub's config carries the shapes it was built at, and builds from them
        decoder.build_from_config(block.get_build_config())
    ours = {id(w) for w in decoder.de_escalation.weights}
    targets = [w for w in decoder.weights if id(w) not in ours]
    for target, value in zip(targets, block.weights, strict=True):
        assign_copy(target, value)
    return decoder
