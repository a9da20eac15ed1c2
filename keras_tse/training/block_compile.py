"""`torch.compile` one Transformer block at a time: the PyTorch backend's `jit_compile`.

Keras compiles a PyTorch model by handing its whole train step to `torch.compile`. Dynamo then
traces Keras's trainer and every `Layer.__call__` of every block, and reads each layer's name on the
way in (its name scope), so each block is new to it: the compile time grows with depth (measured on
the 2-core CPU, Keras 3.15.1, torch 2.13: 233 s for a width-32 ViT-12, a ViT-48 not through its first
epoch after 400 s). Here, instead, the trainer stays eager and each block's `call` goes through one
compiled function per block class, shared by every block of the model: dynamo sees the block's math
once (the layer objects are its inputs, their weights its arguments) and compiles one graph per
mode (training, inference), whatever the depth. Name scopes matter only to variables being created,
which a built block's call never does, so they are skipped while a compiled block runs.

Measured (zoo/speed.md, from zoo/figures/torch_block_compile_{12,48}.json): a ViT-12, width 32, first
step 25.7 s against the whole-model compile's 163 s, ViT-48 26.6 s; later steps 0.80x and 0.74x eager's;
the same losses.

Only a block's plain forward is compiled: the probe's path (`return_attention_scores=True`) and the
symbolic build (meta tensors) run the block as it is. Dropout draws other random numbers compiled
than eager (inductor's generator), so a compiled run with dropout is another sample of the same
model, not eager's numbers.
"""

import contextlib
import importlib

import keras

# What `jit_compile` means on PyTorch: True compiles per block (here); "whole_model" is Keras's own
# `torch.compile` of the train step, kept for comparison (`keras-tse bench`). Elsewhere both are XLA.
WHOLE_MODEL = "whole_model"
JIT_COMPILE = ("auto", True, False, WHOLE_MODEL)


def keras_jit_compile(jit_compile):
    """The `jit_compile` to give `Model.compile`, and whether to compile the blocks here."""
    if jit_compile not in JIT_COMPILE:
        raise ValueError(f"`jit_compile` must be one of {JIT_COMPILE}. Received: jit_compile={jit_compile!r}")
    if jit_compile == WHOLE_MODEL:
        return True, False
    if jit_compile is True and keras.backend.backend() == "torch":
        return False, True
    return jit_compile, False


def compiled_as(jit_compile):
    """How a train step compiled with `jit_compile` runs on this backend, in the words a run records
    (`config.json`'s "compiled"): `jit_compile=True` means other things on PyTorch and elsewhere."""
    mode, blocks = keras_jit_compile(jit_compile)
    backend = keras.backend.backend()
    if blocks:
        return "torch.compile of each block, the step eager"
    if backend == "torch":
        return "torch.compile of the whole step (Keras's)" if mode is True else "eager"
    if mode is False:
        return "eager" if backend == "jax" else "tf.function, no XLA"
    if mode is True or backend == "jax":  # Keras's "auto" is XLA on JAX
        return "XLA, the whole step"
    return "tf.function, XLA where Keras picks it (a GPU)"


def compile_blocks(model):
    """On the PyTorch backend, run every Transformer block of `model` through `torch.compile`, one
    compiled function per block class shared by all its blocks; returns `model`.

    Call it after `model.compile(...)` (with `jit_compile=False`: the trainer stays eager) or let
    `keras_tse.training.Task.compile(jit_compile=True)` do it. On JAX and TensorFlow it does nothing:
    there `jit_compile` compiles the whole step, once. The model's config, weights and `.keras` file do
    not change; a model loaded from a file is eager until this is called again.
    """
    if keras.backend.backend() != "torch":
        return model
    compile_function = importlib.import_module("torch").compile
    compiled = {}
    for block in model_blocks(model):
        kind = type(block)
        if kind not in compiled:
            compiled[kind] = compile_function(kind.call)
        block.call = _CompiledCall(block, kind.call, compiled[kind])
    return model


def is_compiled(block):
    """Whether `compile_blocks` compiled this block (a loaded or new block is eager)."""
    return isinstance(block.call, _CompiledCall)


def model_blocks(model):
    """The blocks `compile_blocks` compiles: the Transformer blocks (`keras_tse.layers.TransformerBlock`
    and its subclasses) among `model`'s layers and those of the models inside it, in order, but
    Transformer-XL's. Those write their memory during the call, and dynamo breaks the graph at the
    writes and recompiles per segment state (measured: 199 s to compile a 2-block one, where eager
    takes seconds), so they stay eager."""
    from keras_tse.layers import TransformerBlock, TransformerXLBlock

    found = []
    for layer in getattr(model, "layers", ()):
        if isinstance(layer, TransformerBlock):
            found.extend([] if isinstance(layer, TransformerXLBlock) else [layer])
        else:
            found.extend(model_blocks(layer))
    return found


class _CompiledCall:
    """A block's `call`: the compiled function for a plain forward on real tensors, else the block's own."""

    def __init__(self, block, call, compiled):
        self.block, self.call, self.compiled = block, call, compiled

    def __call__(self, inputs, *args, **kwargs):
        if kwargs.get("return_attention_scores") or _is_symbolic(inputs) or _in_keras_scope():
            return self.call(self.block, inputs, *args, **kwargs)
        with _no_name_scopes():
            return self.compiled(self.block, inputs, *args, **kwargs)


def _is_symbolic(tensor):
    """A shape-only tensor: Keras's symbolic build runs on PyTorch's meta device."""
    return getattr(getattr(tensor, "device", None), "type", None) == "meta"


def _in_keras_scope():
    """Keras's shape inference (which falls back to real tensors where the meta device fails) or a
    stateless call (variables read from a mapping): both run the block as it is."""
    try:
        from keras.src.backend.common.stateless_scope import in_stateless_scope
        from keras.src.backend.common.symbolic_scope import in_symbolic_scope
    except ImportError:  # Keras laid out otherwise: the meta-device check above still holds
        return False
    return in_symbolic_scope() or in_stateless_scope()


@contextlib.contextmanager
def _no_name_scopes():
    """Layers open no name scope inside: the scope reads the layer's name, which would make each block
    a new program to dynamo (a recompile per block). Keras has no switch for it, so the method is
    swapped for the call's duration."""
    layer_class = keras.layers.Layer
    original = layer_class._open_name_scope
    layer_class._open_name_scope = _null_scope
    try:
        yield
    finally:
        layer_class._open_name_scope = original


def _null_scope(layer):
    return contextlib.nullcontext()
