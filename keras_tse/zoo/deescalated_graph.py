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
from keras_tse.layers import CentredAttentionBlock, ContraNormBlock, DeEscalatedBlock, WrappedBlock
from keras_tse.layers.centred_attention_block import centrable_attentions
from keras_tse.layouts import check_layout_options, get_layout
from keras_tse.layouts.layout import EQ21_DEFAULTS, eq21_options
from keras_tse.norms import SURGERY_NORMS
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
    twice = [layer for layer in blocks if applies_eq21(layer) or isinstance(layer, WrappedBlock)]
    if twice:  # a second projection compounds: (I - tau 11^T/n)^2 removes 1 - (1 - tau)^2 of the mean, not tau
        raise ValueError(
            f"`deescalate` would apply a fix twice: blocks of model {model.name!r} already carry one (eq. (21), "
            f"ContraNorm or centred attention); pass the model as it was before, or build it with another `norm`. "
            f"Received: blocks {_named(twice)}"
        )
    decoders = [layer for layer in blocks if of_kind(layer, {KERAS_HUB_DECODER})]
    if decoders and options["norm"] != "deescalate":  # KerasHub's decoder is rebuilt for eq. (21) alone
        raise ValueError(
            f"`deescalate(..., norm={options['norm']!r})` rewrites bidirectional blocks; a causal decoder (its "
            f"cache, its later positions) takes norm='deescalate'. Received: decoder blocks {_named(decoders)}"
        )
    if options["norm"] == "centred_attention":
        plain = [layer for layer in blocks if not centrable_attentions(layer)]
        if plain:  # DeBERTa's disentangled attention is not Keras's
            raise ValueError(
                "`deescalate(..., norm='centred_attention')` centres Keras's `MultiHeadAttention`, which these "
                f"blocks do not use. Received: blocks {_named(plain)}"
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


def surgery_options(norm, tau=1.0, trainable_tau=False, layout_options=None):
    """`deescalate`'s options checked, as the rewrite and a rewritten backbone's configuration carry them."""
    if norm not in SURGERY_NORMS:
        raise ValueError(
            f"`deescalate` changes each block by one of the fixes: norm must be one of {SURGERY_NORMS}. "
            f"Received: norm={norm!r}"
        )
    given = check_layout_options(norm, layout_options)  # an unknown key or a bad value: one line
    twice = sorted(set(given) & set(EQ21_DEFAULTS))
    if twice:
        raise ValueError(f"`deescalate` takes {', '.join(twice)} as keywords. Received: layout_options={given!r}")
    layout = get_layout(norm)
    own = layout.checked({**layout.defaults, **given})
    own = {key: value for key, value in own.items() if key not in EQ21_DEFAULTS}
    return {"norm": norm, **eq21_options(tau, trainable_tau), "layout_options": own}


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
    eq21 = {"tau": options["tau"], "trainable_tau": options["trainable_tau"]}
    if options["norm"] == "centred_attention":
        return CentredAttentionBlock(block, name=f"{block.name}_centred_attention")
    if options["norm"] == "contranorm":
        contra = options["layout_options"]
        scale, temperature = contra["contranorm_scale"], contra["contranorm_temperature"]
        return ContraNormBlock(block, scale=scale, temperature=temperature, name=f"{block.name}_contranorm")
    if not of_kind(block, {KERAS_HUB_DECODER}):
        return DeEscalatedBlock(block, **eq21, name=f"{block.name}_deescalated")
    decoder = deescalated_decoder_class().from_config({**block.get_config(), **eq21})
    if not decoder.built:  # KerasHub's config carries the shapes it was built at, and builds from them
        decoder.build_from_config(block.get_build_config())
    ours = {id(w) for w in decoder.de_escalation.weights}
    targets = [w for w in decoder.weights if id(w) not in ours]
    for target, value in zip(targets, block.weights, strict=True):
        assign_copy(target, value)
    return decoder
