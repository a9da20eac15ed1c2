"""LoRA (Hu et al. 2021) on the zoo's models, named and filed as KerasHub's backbones do it.

`enable_lora(model, rank)` gives every block's attention and FFN projections Keras's own low-rank adapter
(`Dense.enable_lora`: the kernel `W` frozen, `W + (alpha / rank) A B` used, `A` of `he_uniform`, `B` of zeros,
so the model starts as it was) and freezes every other weight; `train` names layers that train whole beside
them (a fresh classifier head, as PEFT's `modules_to_save`). `save_lora_weights` writes the adapters and
those layers' weights to a small `.lora.h5` file (KerasHub's suffix) that `load_lora_weights` puts back on
a fresh copy of the same base model. `model.save` writes the merged kernels (Keras's rule): a plain
model that needs no adapter to load.

The targets are the projections of the blocks' tokens: W_Q, W_K, W_V (or Transformer-XL's fused W_QKV), the
attention output and the FFN's two layers. Transformer-XL's W_R (applied to the fixed sinusoidal encodings,
not to tokens), embeddings, norms and the output layer stay frozen, as in Hu et al.'s Sec. 4.2, which adapts
the attention weights only and freezes the rest; the FFN is adapted too, as QLoRA found it needed to
match full fine-tuning (Dettmers et al. 2023, Sec. 4). Biases stay frozen (Hu et al.; PEFT's `bias="none"`).
"""

import h5py
import keras
import numpy as np

from keras_tse import _checks, run_files
from keras_tse.layers.scanned_blocks import ScannedBlocks
from keras_tse.layers.sigma_reparam_dense import SigmaReparamDense

TARGETS = ("query", "key", "value", "qkv", "attention_output", "ffn_inner", "ffn_outer")
SUFFIX = ".lora.h5"
STATE = "keras_tse_lora"  # the group of a weights file that holds a run's adapter state (`add_state`)
FORMAT = 1  # the adapter file's layout: `lora/<layer path>/{lora_kernel_a,lora_kernel_b}`, `trained/<path>/<i>`


def lora_targets(model):
    """The layers `enable_lora` adapts: every Dense named in TARGETS inside one of `model`'s layers."""
    return [
        layer
        for layer in sublayers(model)
        if isinstance(layer, keras.layers.Dense) and layer.name in TARGETS and "/" in layer.path
    ]


def lora_layers(model):
    """The layers of `model` whose adapter is on, in the model's order."""
    return [layer for layer in sublayers(model) if getattr(layer, "lora_enabled", False)]


def sublayers(model):
    """Every layer below `model`, nested ones included, in Keras's order (Keras has no public walk; KerasHub's
    `Backbone.enable_lora` walks the same way)."""
    return model._flatten_layers(include_self=False)


def frozen_kernel(layer):
    """The kernel under an adapter: `layer.kernel` is it with the adapter's product added."""
    return next(variable for variable in layer.weights if variable.name == "kernel")


def enable_lora(model, rank, alpha=None, train=()):
    """Adapters of rank `rank` (scale `alpha / rank`, `alpha` defaulting to `rank` as in Keras) on every
    block's projections; every other weight frozen but those of the layers named in `train`. Returns the
    adapted layers' paths."""
    rank = _checks.positive_int("rank", rank)
    alpha = rank if alpha is None else _checks.positive_float("alpha", alpha)
    if any(isinstance(layer, ScannedBlocks) for layer in sublayers(model)):
        raise ValueError(
            f"LoRA needs each block's own projections; {model.name!r} runs its blocks as one scanned loop whose "
            "weights are stacked. Build it with scan=False (the same weights load into it)."
        )
    if lora_layers(model):
        raise ValueError(f"{model.name!r} already has LoRA adapters (rank {lora_layers(model)[0].lora_rank}).")
    targets, trained = lora_targets(model), _named(model, train)
    if not targets:
        raise ValueError(f"{model.name!r} has no block projection to adapt (Dense layers named one of {TARGETS}).")
    refusing = [layer for layer in targets if isinstance(layer, SigmaReparamDense)]
    if refusing:
        refusing[0].enable_lora(rank)  # its one-line refusal, before any weight is frozen
    model.trainable = True
    for layer in sublayers(model):
        layer.trainable = False
    for layer in targets:
        layer.trainable = True
        layer.enable_lora(rank, lora_alpha=alpha)
        if layer.bias is not None:
            layer.bias.trainable = False
    for layer in trained:
        layer.trainable = True  # its sublayers with it
    # steps traced before (a TensorFlow graph of `predict` or `fit`) read the layers as they were, without adapters
    model.train_function = model.test_function = model.predict_function = None
    return [layer.path for layer in targets]


def _named(model, names):
    found = {layer.name: layer for layer in model.layers}
    missing = [name for name in names if name not in found]
    if missing:
        raise ValueError(f"`train` names layers {model.name!r} lacks: {missing}. Its layers: {sorted(found)}.")
    return [found[name] for name in names]


def save_lora_weights(model, path):
    """The adapters of `model` and the weights of the layers it trains whole, as a `.lora.h5` file."""
    layers = lora_layers(model)
    if not layers:
        raise ValueError(f"{model.name!r} has no LoRA adapters: call keras_tse.zoo.enable_lora(model, rank) first.")
    if not str(path).endswith(SUFFIX):
        raise ValueError(f"An adapter file's name must end in {SUFFIX}. Received: path={path!r}")

    def write(temporary):
        with h5py.File(temporary, "w") as f:
            _write(model, layers, f)

    run_files.save_through_temporary(str(path), SUFFIX, write)


def _write(model, layers, f, base=False):
    """The adapters into the h5py group `f`; `base`: each adapted layer's frozen kernel too (a run's backup)."""
    f.attrs.update(format=FORMAT, model=model.name, rank=layers[0].lora_rank, alpha=layers[0].lora_alpha)
    for layer in layers:
        group = f.create_group(f"lora/{layer.path}")
        group["lora_kernel_a"] = np.asarray(layer.lora_kernel_a)
        group["lora_kernel_b"] = np.asarray(layer.lora_kernel_b)
        if base:
            group["kernel"] = np.asarray(frozen_kernel(layer))
    for layer in _trained_whole(model):
        group = f.create_group(f"trained/{layer.path}")
        for i, variable in enumerate(layer.weights):
            group[str(i)] = np.asarray(variable)


def add_state(model, path):
    """Into the weights file `path` (`model.save_weights`), where `model` has adapters: their state with the
    frozen kernels under them, which `model.save_weights` merges (Keras's rule) and `restore_state` puts back,
    so a run resumed from the file goes on from the state it left, not from merged kernels and zeroed adapters."""
    layers = lora_layers(model)
    if layers:
        with h5py.File(path, "a") as f:
            _write(model, layers, f.create_group(STATE), base=True)


def restore_state(model, path):
    """After `model.load_weights(path)`: the adapters and frozen kernels `add_state` put into the file, if any."""
    with h5py.File(path, "r") as f:
        if STATE in f:
            _read(model, f[STATE], path)


def _trained_whole(model):
    """The top-level layers `enable_lora` left trainable whole (its `train`)."""
    return [layer for layer in model.layers if layer.trainable and layer.weights and not lora_layers(layer)]


def load_lora_weights(model, path):
    """Put the adapters and whole-trained layers of the `.lora.h5` file `path` on `model`, a copy of the base
    model they were trained on (enabling LoRA at the file's rank first, where `model` has none)."""
    with h5py.File(path, "r") as f:
        _read(model, f, path)


def _read(model, f, path):
    rank, alpha = int(f.attrs["rank"]), float(f.attrs["alpha"])
    adapters, trained = f["lora"], f.get("trained", {})
    if not lora_layers(model):
        enable_lora(model, rank, alpha=alpha, train=list(trained))
    has = lora_layers(model)[0].lora_rank
    if has != rank:
        raise ValueError(f"{path} holds rank-{rank} adapters; {model.name!r} has rank {has}.")
    by_path = {layer.path: layer for layer in lora_layers(model)}
    stored = _paths(adapters)
    if set(stored) != set(by_path):
        lacking = sorted(set(stored) - set(by_path)) or sorted(set(by_path) - set(stored))
        raise ValueError(
            f"{path} holds adapters for {len(stored)} layers and {model.name!r} has {len(by_path)}; they differ at "
            f"{lacking[:3]}: load it onto the model it was trained on."
        )
    for name in stored:
        group, layer = adapters[name], by_path[name]
        for variable in ("lora_kernel_a", "lora_kernel_b", *(["kernel"] if "kernel" in group else [])):
            target = frozen_kernel(layer) if variable == "kernel" else getattr(layer, variable)
            _assign(target, group[variable][()], path, name)
    for name in _paths(trained) if trained else ():
        layer = _layer_at(model, name, path)
        for i, variable in enumerate(layer.weights):
            _assign(variable, trained[name][str(i)][()], path, name)


def _paths(group):
    """The paths of the groups of `group` that hold arrays (a layer path may hold slashes)."""
    found = []
    group.visititems(lambda name, item: found.append(name) if isinstance(item, h5py.Group) and len(item) and all(
        isinstance(value, h5py.Dataset) for value in item.values()) else None)  # fmt: skip
    return found


def _layer_at(model, layer_path, path):
    for layer in sublayers(model):
        if layer.path == layer_path:
            return layer
    raise ValueError(f"{path} holds weights of layer {layer_path!r}, which {model.name!r} lacks.")


def _assign(variable, value, path, name):
    if tuple(variable.shape) != value.shape:
        raise ValueError(
            f"{path}: {name}/{variable.name} is {value.shape} there and {tuple(variable.shape)} in the model: load it "
            "onto the model it was trained on."
        )
    variable.assign(value)
