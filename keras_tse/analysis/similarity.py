"""Token similarity measures of Yu & Zhang: Definition 1, eq. (1) and Definition 2.

Each function takes one token matrix `X` `[tokens, dim]` (and returns a scalar) or a batch
`[batch, tokens, dim]` (and returns one value per example). Inputs may be NumPy arrays or backend
tensors; results are backend tensors (`keras.ops.convert_to_numpy` turns them into NumPy) computed
in float32 whatever the input precision.

`Pi_1 = 11^T/n` projects onto span{1}; `Pi_1 X = 1 m^T` with `m` the token mean, so
`||Pi_1 X||_F^2 = n ||m||^2` needs no n x n matrix.

`token_similarity_profile(model, inputs)` applies Definition 1 after every Transformer block of a
model, the per-block curve of the paper's Figs. 1, 2 and 5.
"""

import collections
import weakref

import keras
import numpy as np
from keras import ops

from keras_tse.processes import process, this_process_only


def token_similarity(x):
    """`t_sim(X) = ||Pi_1 X||_F^2 / ||X||_F^2` in [0, 1] (Definition 1).

    1 exactly when all tokens (rows) are equal; the quantity whose escalation
    block after block makes deep post-norm Transformers fail.
    """
    x = _as_tokens(x, "token_similarity")
    mean = ops.mean(x, axis=-2)
    similar = x.shape[-2] * ops.sum(ops.square(mean), axis=-1)
    return similar / _squared_norm(x, "token_similarity")


def token_diversity(x):
    """`t_div(X) = ||Pi_1^perp X||_F^2 / ||X||_F^2 = 1 - t_sim(X)` (Definition 1).

    Computed from the centred tokens themselves, not as `1 - t_sim`, so the
    identity `t_sim + t_div = 1` is a check and not a definition.
    """
    x = _as_tokens(x, "token_diversity")
    centred = x - ops.mean(x, axis=-2, keepdims=True)
    return ops.sum(ops.square(centred), axis=(-2, -1)) / _squared_norm(x, "token_diversity")


def cosine_similarity(x):
    """`t_cos(X)`, the mean cosine over all pairs of distinct tokens (eq. 1).

    With unit rows `u_i`, `||sum_i u_i||^2 = n + 2 sum_{i<j} cos(x_i, x_j)`, so
    the pair mean costs O(n d) instead of O(n^2 d).
    """
    x = _as_tokens(x, "cosine_similarity")
    n = x.shape[-2]
    if n is not None and n < 2:
        raise ValueError(f"cosine_similarity needs at least 2 tokens. Received: x.shape={tuple(x.shape)}")
    row_norms = ops.sqrt(ops.sum(ops.square(x), axis=-1, keepdims=True))
    _raise_if_zero(row_norms, "cosine_similarity", "a token (row) of x is all zeros; its cosine is undefined")
    total = ops.sum(x / row_norms, axis=-2)
    return (ops.sum(ops.square(total), axis=-1) - n) / (n * n - n)


def escalation_rate(x, y):
    """`r(X, Y) = t_div(X) / t_div(Y)` (Definition 2), > 1 when Y is more similar than X.

    By Proposition 3, `r(X, Y) = 1 + (xi_1/xi_2 - 1) t_sim(X)`.
    """
    x, y = _as_tokens(x, "escalation_rate"), _as_tokens(y, "escalation_rate")
    if tuple(x.shape) != tuple(y.shape):
        raise ValueError(
            f"escalation_rate needs x and y of one shape. Received: x.shape={tuple(x.shape)}, y.shape={tuple(y.shape)}"
        )
    return token_diversity(x) / token_diversity(y)


# KerasHub's Transformer blocks, by the module and name of their class (a subclass counts): found without
# importing KerasHub, which a model built from them has already imported.
KERAS_HUB_DECODER = "keras_hub.src.layers.modeling.transformer_decoder:TransformerDecoder"
KERAS_HUB_VIT_BLOCK = "keras_hub.src.models.vit.vit_layers:ViTEncoderBlock"
# DeBERTa's post-norm encoder block: bidirectional, its attention disentangled (content and relative position)
KERAS_HUB_DEBERTA_BLOCK = "keras_hub.src.models.deberta_v3.disentangled_attention_encoder:DisentangledAttentionEncoder"
KERAS_HUB_BLOCKS = {
    "keras_hub.src.layers.modeling.transformer_encoder:TransformerEncoder",
    KERAS_HUB_DECODER,
    KERAS_HUB_VIT_BLOCK,
    KERAS_HUB_DEBERTA_BLOCK,
}


def is_block(layer):
    """Whether `layer` is a Transformer block of a known kind: keras_tse's (`TransformerBlock` and its
    layouts, `ScannedBlocks`, a block `keras_tse.deescalate` wrapped: `DeEscalatedBlock`, `ContraNormBlock`) or
    KerasHub's (`KERAS_HUB_BLOCKS`)."""
    from keras_tse.layers import ScannedBlocks, TransformerBlock, WrappedBlock

    if isinstance(layer, (TransformerBlock, ScannedBlocks, WrappedBlock)):
        return True
    return of_kind(layer, KERAS_HUB_BLOCKS)


# KerasHub's ViT backbone holds its blocks inside one layer, `ViTEncoder`, that calls them in a loop of its own.
KERAS_HUB_VIT_ENCODER = "keras_hub.src.models.vit.vit_layers:ViTEncoder"


def stacked_blocks(layer):
    """The blocks a stack of a known kind (KerasHub's `ViTEncoder`) calls in its own loop; `[]` for any other
    layer. Such a stack is run block by block (`run_stack`) wherever its blocks are measured or rewritten."""
    return list(layer.encoder_layers) if of_kind(layer, {KERAS_HUB_VIT_ENCODER}) and layer.built else []


def run_stack(stack, inputs, call):
    """A known stack's own call, layer by layer through `call(layer, x)`, so that each block is a node of the
    graph being built: `ViTEncoder`'s dropout, its blocks in order, its final norm (its `call` as written)."""
    x = call(stack.dropout, inputs)
    for block in stack.encoder_layers:
        x = call(block, x)
    return call(stack.layer_norm, x)


def of_kind(layer, kinds):
    """Whether `layer`'s class or a base is one of `kinds` ("module:QualName"), its package not imported to look."""
    return any(kind_name(kind) in kinds for kind in type(layer).__mro__)


def kind_name(cls):
    """ "module:QualName" of a class, as the kinds above are named."""
    return f"{cls.__module__}:{cls.__qualname__}"


def block_outputs_model(model, layers=None, with_output=False):
    """A `keras.Model` from `model`'s inputs to the outputs of its Transformer blocks (with `with_output=True`,
    `[model's output, [the blocks' outputs]]`, the output in the model's own structure: timm's
    `forward_intermediates`).

    Args:
        model: a functional or Sequential `keras.Model` (`as_graph`).
        layers: `None` to find the blocks of a known kind (`blocks_of`: keras_tse's, a `ScannedBlocks` giving
            one output per block it runs, and KerasHub's `TransformerEncoder`, `TransformerDecoder`, ViT and
            DeBERTa blocks, also inside a functional model nested in `model`, so neither a KerasHub `BertBackbone` nor
            a task built on one needs a list), or a list of layer names / layers of any functional model. A
            layer called at several depths (ALBERT's shared block) gives one output per call.
    """
    model = as_graph(model)
    if layers is None:
        chosen = blocks_of(model)
        if not chosen:
            raise ValueError(
                f"No Transformer blocks of a known kind (keras_tse's, {', '.join(sorted(KERAS_HUB_BLOCKS))}) among "
                f"the layers of model {model.name!r}; name the block layers with `layers=`. Received: layers=None, "
                f"model layers {[layer.name for layer in model.layers][:12]}"
            )
    else:
        chosen = [model.get_layer(layer) if isinstance(layer, str) else layer for layer in layers]
    calls = block_calls(model, chosen)
    outputs = [calls.output, calls.block_outputs] if with_output else calls.block_outputs
    probe = keras.Model(calls.inputs, outputs, name=f"{model.name}_blocks")
    _SOURCES[probe] = (model, layers, with_output)  # to rebuild it on one process's devices
    return probe


def blocks_of(model):
    """`model`'s Transformer blocks of a known kind (`is_block`), in order, those of a functional model nested
    in it included (a KerasHub task, `BertMaskedLM` or a classifier, holds its backbone as one layer), and those a
    known stack runs (`stacked_blocks`: KerasHub's ViT backbone holds its blocks in one `ViTEncoder`)."""
    found = []
    for layer in model.layers:
        if is_block(layer):
            found.append(layer)
        elif is_graph(layer):
            found.extend(blocks_of(layer))
        else:
            found.extend(stacked_blocks(layer))
    return found


def is_graph(layer):
    """Whether `layer` is a functional model, whose graph `clone_model` can call again layer by layer."""
    return isinstance(layer, keras.Model) and hasattr(layer, "_run_through_graph")


def as_graph(model):
    """`model` as a functional model, whose blocks the probes and `deescalate` find and call again: itself, or
    for a Sequential the same layers (none copied) called in order on a `keras.Input` of its input's shape.
    Anything else (a subclassed model, whose `call` hides its graph; a lone layer) is refused in one line."""
    if is_graph(model):
        return model
    if isinstance(model, keras.Sequential):
        try:
            (given,) = model.inputs
        except AttributeError:
            raise ValueError(
                f"Sequential model {model.name!r} has no input yet: start it with a `keras.Input` (or call it once) "
                "so that its blocks' inputs have a shape"
            ) from None
        x = y = keras.Input(batch_shape=(None, *given.shape[1:]), dtype=given.dtype)
        for layer in model.layers:
            y = layer(y)
        return keras.Model(x, y, name=model.name)
    raise ValueError(
        "keras_tse finds Transformer blocks in a model's graph: a functional or Sequential `keras.Model` (a KerasHub "
        "backbone or task, a zoo model); a subclassed model's `call` hides its graph. Received: model of type "
        f"{type(model).__name__}" + (f" named {model.name!r}" if isinstance(model, keras.layers.Layer) else "")
    )


# A block's tokens passed by name: KerasHub's encoder's and decoder's first arguments (BART passes them so).
TOKENS_BY_NAME = ("inputs", "decoder_sequence")
BlockCalls = collections.namedtuple("BlockCalls", "inputs output block_inputs block_outputs")


def block_calls(model, chosen):
    """The calls of the `chosen` layers as tensors of `model`'s inputs, a `BlockCalls`: the graph's `inputs` and
    `output` (in the model's structure: a dict for KerasHub's BERT); `block_outputs`, each chosen call's output
    in call order (one per block for most models, one per depth for a `ScannedBlocks` and for a block whose
    weights are shared across depth: ALBERT calls one layer at every depth); `block_inputs`, `(layer, its
    input)` of each chosen call but a scanned stack's. Keras' `clone_model` re-runs the graph with the same layer
    objects (`clone_function` returns each layer itself, so no weight is copied) and `call_function` records each
    chosen call; a nested functional model holding a chosen block, and a known stack (`run_stack`), are run the
    same way, their layers called in the outer graph, so that their blocks' inputs and outputs are tensors of
    `model`'s inputs."""
    from keras_tse.layers import ScannedBlocks

    wanted, called = {id(layer) for layer in chosen}, set()
    block_inputs, outputs = [], []

    def call(layer, *args, **kwargs):
        called.add(id(layer))
        if id(layer) in wanted and isinstance(layer, ScannedBlocks):  # one layer, `depth` blocks
            every = layer(*args, return_block_outputs=True, **kwargs)
            outputs.extend(every[i] for i in range(layer.depth))
            return every[-1]
        if len(args) == 1 and not kwargs and any(id(block) in wanted for block in stacked_blocks(layer)):
            return run_stack(layer, args[0], call)
        masks = keras.tree.flatten(kwargs.get("mask"))
        if is_graph(layer) and len(args) == 1 and kwargs.keys() <= {"mask"} and all(m is None for m in masks):
            if any(id(block) in wanted for block in blocks_of(layer)):
                return replay(layer, args[0]).output
        result = layer(*args, **kwargs)
        if id(layer) in wanted:  # its tokens: the first argument (a mask comes as a keyword: `padding_mask=`)
            tokens = args[0] if args else kwargs[next(name for name in TOKENS_BY_NAME if name in kwargs)]
            block_inputs.append((layer, keras.tree.flatten(tokens)[0]))
            outputs.append(result[0] if isinstance(result, (tuple, list)) else result)
        return result

    def replay(graph, inputs):
        same = lambda layer: layer  # noqa: E731 - every layer itself: no weight copied
        return keras.models.clone_model(graph, input_tensors=inputs, clone_function=same, call_function=call)

    clone = replay(model, None)
    missed = [layer.name for layer in chosen if id(layer) not in called]
    if missed:  # inside a nested model called with a mask or other arguments, which its replay would drop
        raise ValueError(
            f"Blocks {missed[:4]} of model {model.name!r} are not called by its graph (nor by a functional model "
            "in it called on its inputs alone); name blocks that its graph calls with `layers=`"
        )
    return BlockCalls(clone.inputs, clone.output, block_inputs, outputs)


def measure_blocks(probe, inputs, measures=(token_similarity,), warmup_inputs=None):
    """Run a `block_outputs_model` on `inputs`; per measure, a NumPy `[num_blocks]` of its batch mean.

    `warmup_inputs`, if given, run first and unmeasured: for a model with memory (Transformer-XL)
    they are the preceding segment, so `inputs` are measured with a filled memory, as in training.
    The model's state is left as found: a Transformer-XL block writes its memory on every call, and
    a probe in the middle of `fit` must not replace the training stream's memory with the probe's.
    """
    if process()[1] > 1:
        return _measure_on_this_process(probe, inputs, measures, warmup_inputs)
    return _measure(probe, inputs, measures, warmup_inputs)


def _measure(probe, inputs, measures, warmup_inputs):
    batch = keras.tree.flatten(inputs)[0].shape[0]
    state = snapshot_state(probe)
    if warmup_inputs is not None:
        probe.predict(warmup_inputs, batch_size=batch, verbose=0)
    outputs = probe.predict(inputs, batch_size=batch, verbose=0)
    restore_state(state)
    outputs = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    return [np.array([float(np.mean(ops.convert_to_numpy(m(out)))) for out in outputs]) for m in measures]


# probe -> (model, layers, with_output) it was made from; probe -> (a copy of the model on this
# process's devices, the copy's probe). Weak: a probe's entries go with it.
_SOURCES = weakref.WeakKeyDictionary()
_LOCAL_COPIES = weakref.WeakKeyDictionary()


def _measure_on_this_process(probe, inputs, measures, warmup_inputs):
    """`measure_blocks` when several processes train together: Keras's `predict` cannot gather outputs
    that span processes, so each process measures on a copy of the probe's model on its own devices,
    rebuilt from its config once, its weights read from the replicated ones (the same everywhere)."""
    model, layers, with_output = _SOURCES[probe]
    with this_process_only():
        if probe not in _LOCAL_COPIES:
            copy = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(model))
            _LOCAL_COPIES[probe] = (copy, block_outputs_model(copy, layers, with_output))
        copy, local_probe = _LOCAL_COPIES[probe]
        copy.set_weights(model.get_weights())
        return _measure(local_probe, inputs, measures, warmup_inputs)


def snapshot_state(model):
    """Copies of `model`'s non-trainable variables (a Transformer-XL memory), for `restore_state`."""
    return [(v, ops.copy(v.value)) for v in model.non_trainable_variables]


def restore_state(state):
    for variable, value in state:
        variable.assign(value)


def token_similarity_profile(model, inputs, layers=None):
    """Token similarity after each Transformer block of `model` on `inputs`, mean over the batch.

    Returns a NumPy array `[num_blocks]`, first block first. Blocks are found automatically in
    keras_tse models; `layers=` names them in any other functional model (see
    `block_outputs_model`).
    """
    return measure_blocks(block_outputs_model(model, layers), inputs)[0]


def _as_tokens(x, name):
    x = ops.cast(ops.convert_to_tensor(x), "float32")
    if len(x.shape) not in (2, 3):
        raise ValueError(f"{name} expects [tokens, dim] or [batch, tokens, dim]. Received: x.shape={tuple(x.shape)}")
    return x


def _squared_norm(x, name):
    squared = ops.sum(ops.square(x), axis=(-2, -1))
    _raise_if_zero(squared, name, "x is all zeros; its similarity is undefined (Definition 1 needs X != 0)")
    return squared


def _raise_if_zero(values, name, why):
    """Raise when a denominator is zero, where its value is known (eagerly).

    Inside a traced function (jit, tf.function, a symbolic call) there is no
    concrete value to check: the division then yields inf/NaN as IEEE says.
    """
    try:
        concrete = ops.convert_to_numpy(values)
    except Exception:  # tracer or symbolic tensor: nothing to check before run time
        return
    if (concrete == 0).any():
        raise ValueError(f"{name}: {why}. Received: x with zero norm (shape {tuple(values.shape)} of norms)")


__all__ = [
    "block_outputs_model",
    "cosine_similarity",
    "escalation_rate",
    "is_block",
    "measure_blocks",
    "restore_state",
    "snapshot_state",
    "token_diversity",
    "token_similarity",
    "token_similarity_profile",
]
