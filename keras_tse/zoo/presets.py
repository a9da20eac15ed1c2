"""Named model configurations: builder keywords with metadata, as KerasHub's presets carry.

`from_preset(name, **overrides)` builds one (or loads a `.keras` file); `presets()` lists them with
their metadata: description, input and its normalisation, parameter counts, `weights` and the model
card (`zoo/<card>.md`: settings, the command that trains it, the results measured so far).
`keras-tse presets` prints the list. `create_model(name)` builds a preset or a family by name and
`list_models(pattern)` lists them (`registry.py`).
"""

import copy
import fnmatch
import inspect
import json
import os
import re

import keras_tse.zoo.gpt  # noqa: F401  registers its family
import keras_tse.zoo.transformer_xl  # noqa: F401  registers its family
import keras_tse.zoo.vit  # noqa: F401  registers its family
from keras_tse.zoo import fine_tune, hub
from keras_tse.zoo.preset_folder import folder_error, is_preset_folder, load_preset
from keras_tse.zoo.registry import FAMILIES, list_families

# Parameter counts, measured by building each preset: `keras-tse presets --count --write <this file>`
# writes it, tests/test_presets.py checks it against count_params(). Not typed by hand.
SIZES_FILE = os.path.join(os.path.dirname(__file__), "preset_sizes.json")

# initializer "torch": the paper's ViT ran on vit-pytorch (Sec. 3.3), nn.Linear / nn.Conv2d defaults; the
# depth study (zoo/depth_study.md) measures it against Glorot.
_PAPER_VIT = dict(image_size=32, patch_size=4, hidden_dim=192, ffn_dim=384, num_heads=8, num_classes=10)
_PAPER_VIT.update(initializer="torch")
_SMALL_VIT = dict(hidden_dim=64, ffn_dim=128, num_heads=4, num_classes=10, norm="deescalate", initializer="torch")
_SMALL_TXL = dict(vocab_size=4000, hidden_dim=64, num_heads=4, head_dim=16, ffn_dim=128, cutoffs=(1000, 2000))
_CIFAR = "per-channel CIFAR-10 mean and std (keras_tse.data.cifar10.MEAN / STD), pixels first scaled to [0, 1]"
_WT103 = "WikiText-103 word ids (vocabulary 267,735 with <eos>, keras_tse.data.load_wikitext103)"


def _vit80(norm, description, **config):
    return _preset("vit", {**_PAPER_VIT, "depth": 80, "norm": norm, **config}, description, _CIFAR, "vit80_cifar10")


def _txl60(norm, description, **config):
    config = {"depth": 60, "norm": norm, **config}
    return _preset("transformer_xl", config, description, _WT103, "transformer_xl60_wt103")


def _preset(builder, config, description, normalization, card, weights=None):
    entry = dict(builder=builder, config=config, description=description, normalization=normalization)
    return {**entry, "card": f"zoo/{card}.md", "weights": weights}


# Trained on the 2-core CPU and shipped inside the package (the lab's `ship_presets` trains, evaluates and
# writes each; its card gives the command and the test accuracy). Not the paper's sizes.
_SHIPPED_VIT = dict(depth=6, hidden_dim=64, ffn_dim=128, num_heads=4, norm="deescalate", initializer="torch")


# The language-model task's Penn Treebank widths (keras_tse/cli/train_lm.py), 4 blocks: 2.09M parameters,
# 8 MiB of float32 weights, under the 10 MiB a package's preset may take.
_SHIPPED_GPT = dict(depth=4, vocab_size=10_000, hidden_dim=128, num_heads=4, head_dim=32, ffn_dim=512, segment_len=64,
                    cutoffs=(), norm="deescalate")  # fmt: skip


def _shipped(name, config, description, normalization, builder="vit"):
    base = _SHIPPED_VIT if builder == "vit" else _SHIPPED_GPT
    return _preset(builder, {**base, **config}, description, normalization, name, f"weights/{name}")


PRESETS = {
    "vit80_cifar10_post": _vit80(
        "post", "Yu & Zhang Sec. 3.3: 80-block post-norm ViT on CIFAR-10 (Algorithm 1), the one that fails."
    ),
    "vit80_cifar10_pre": _vit80(
        "pre", "Yu & Zhang Sec. 3.3: 80-block pre-norm ViT on CIFAR-10 (eq. 19), the usual fix."
    ),
    "vit80_cifar10_deescalate": _vit80(
        "deescalate",
        "Yu & Zhang Sec. 3.3: 80-block post-norm ViT with de-escalation (tau=1) at each block output.",
        tau=1.0,
        deescalate_at="output",
    ),
    "vit80_cifar10_deepnorm": _vit80(
        "deepnorm",
        "Wang et al. 2022's DeepNorm (alpha = (2N)^(1/4), beta = (8N)^(-1/4)) on the 80-block ViT: a baseline.",
    ),
    "vit80_cifar10_layerscale": _vit80(
        "layerscale",
        "Touvron et al. 2021's LayerScale (CaiT's eps for its depth) on the 80-block pre-norm ViT: a baseline.",
    ),
    "vit12_cifar10_small": _preset(
        "vit",
        {**_SMALL_VIT, "depth": 12, "image_size": 32, "patch_size": 4},
        "CPU-sized 12-block de-escalated ViT for CIFAR-shaped 32x32x3 inputs (smoke runs, tests).",
        _CIFAR,
        "vit12_cifar10_small",
    ),
    "vit24_digits": _preset(
        "vit",
        {**_SMALL_VIT, "depth": 24, "image_size": 8, "patch_size": 2, "channels": 1},
        "24-block ViT for scikit-learn's 8x8 digits: the `keras-tse demo` model (CPU, minutes).",
        "zero mean, unit variance over the training pixels (keras_tse.data.load_digits)",
        "vit24_digits",
    ),
    "vit6_fashion_mnist": _shipped(
        "vit6_fashion_mnist",
        dict(image_size=28, patch_size=4, channels=1),
        "A 6-block de-escalated ViT trained on Fashion-MNIST (CPU, minutes): weights included.",
        "pixels / 255, then Fashion-MNIST's mean and std (keras_tse.data.mnist.FASHION_MEAN / FASHION_STD)",
    ),
    "vit6_digits": _shipped(
        "vit6_digits",
        dict(image_size=8, patch_size=2, channels=1),
        "A 6-block de-escalated ViT trained on scikit-learn's 8x8 digits (CPU, a minute): weights included.",
        "zero mean, unit variance over the training pixels (keras_tse.data.load_digits)",
    ),
    "gpt4_ptb": _shipped(
        "gpt4_ptb",
        {},
        "A 4-block GPT with causal de-escalation trained on Penn Treebank (CPU, minutes): weights and vocabulary.",
        "Penn Treebank word ids: the preset's assets/tokenizer/vocabulary.txt (10,000 words with <eos>)",
        builder="gpt",
    ),
    "transformer_xl60_wt103_post": _txl60(
        "post", "Yu & Zhang Sec. 3.4: 60-block post-norm Transformer-XL on WikiText-103, the one that fails."
    ),
    "transformer_xl60_wt103_pre": _txl60(
        "pre", "Yu & Zhang Sec. 3.4: 60-block pre-norm Transformer-XL (the reference's pre_lnorm)."
    ),
    "transformer_xl60_wt103_deescalate": _txl60(
        "deescalate",
        "Yu & Zhang Sec. 3.4: 60-block post-norm Transformer-XL with causal de-escalation at each FFN input.",
        tau=1.0,
    ),
    "transformer_xl16_wt103_base": _preset(
        "transformer_xl",
        {"depth": 16, "norm": "post", "ffn_dim": 2100, "batch_size": 60, "dropout": 0.1},
        "Dai et al. 2019: the 16-block base WikiText-103 Transformer-XL.",
        _WT103,
        "transformer_xl60_wt103",
    ),
    "transformer_xl8_small": _preset(
        "transformer_xl",
        {**_SMALL_TXL, "depth": 8, "norm": "deescalate", "segment_len": 32, "mem_len": 32, "batch_size": 8},
        "CPU-sized 8-block de-escalated Transformer-XL (the offline corpus, smoke runs, tests).",
        "word ids of the offline corpus or Penn Treebank (keras_tse.data.load_python_docs / load_ptb)",
        "transformer_xl8_small",
    ),
    "gpt8_small": _preset(
        "gpt",
        {**_SMALL_TXL, "depth": 8, "norm": "deescalate", "segment_len": 32},
        "CPU-sized 8-block GPT-style decoder with causal de-escalation at each FFN input (smoke runs, tests).",
        "word ids of the offline corpus or Penn Treebank (keras_tse.data.load_python_docs / load_ptb)",
        "gpt8_small",
    ),
}


def input_description(preset):
    """What the preset's model takes, in words, from its builder keywords."""
    return FAMILIES.get(PRESETS[preset]["builder"]).describe_input(full_config(preset))


def full_config(preset):
    """Every builder keyword of `preset`: its own settings over the builder's defaults."""
    entry = PRESETS[preset]
    parameters = inspect.signature(FAMILIES.get(entry["builder"]).builder).parameters.values()
    defaults = {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}
    return {**defaults, **copy.deepcopy(entry["config"])}


def _sizes():
    if not os.path.exists(SIZES_FILE):
        return {}
    with open(SIZES_FILE) as f:
        return json.load(f)


def presets():
    """Name -> metadata for every preset (a copy: edit freely).

    Each entry: `builder`, `config` (its keywords), `description`, `input`, `normalization` (what the
    data path does to the inputs), `params` (trainable) and `state` (non-trainable: Transformer-XL's
    memory), `weights` (`None`: none published yet) and `card` (the model card's path in the repo).
    """
    sizes = _sizes()
    listed = {}
    for name, entry in PRESETS.items():
        size = sizes.get(name, {})
        listed[name] = {**copy.deepcopy(entry), "input": input_description(name)}
        listed[name].update(params=size.get("params"), state=size.get("state"))
    return listed


def from_preset(preset, *, pretrained=None, load_weights=None, **overrides):
    """Build the model of preset `preset`, with any builder keyword overridden; or load a `.keras` file.

    An overridden preset's model is named after the change (`vit80_cifar10_post-depth24`), so a run
    folder or a saved file never claims a configuration it does not have. A preset that ships weights
    (`presets()[name]["weights"]`) loads them unless `load_weights=False` (KerasHub's name; timm's
    `pretrained` is the same switch); asked of a preset without weights, either says so.

    A folder `save_preset` wrote (KerasHub's layout: `config.json`, `model.weights.h5`,
    `metadata.json`) loads as saved, on any backend, here or from the Hugging Face Hub
    (`hf://owner/name`, `keras_tse.zoo.hub`); `num_classes=` gives it a fresh head (0: its features).

    Example: `from_preset("vit80_cifar10_deescalate", tau=0.5, num_classes=100)`;
    `from_preset("runs/cifar10/deescalate/model.keras")`; `from_preset("my_preset/", num_classes=5)`;
    `from_preset("hf://owner/name")`.
    """
    if hub.is_hub_handle(preset):
        preset = hub.download(preset)
    if is_preset_folder(preset):
        return _adapted_folder(load_preset(preset), overrides)
    if isinstance(preset, (str, os.PathLike)) and str(preset).endswith(".keras"):
        return _load_file(os.fspath(preset), overrides)
    if preset not in PRESETS:
        raise ValueError(
            folder_error(preset)
            or f"Unknown preset; choose from {sorted(PRESETS)} or give a .keras file path. Received: preset={preset!r}"
        )
    entry = PRESETS[preset]
    wanted = [flag for flag in (pretrained, load_weights) if flag is not None]
    if entry["weights"] is not None and all(wanted):
        fixed = sorted(set(overrides) - set(fine_tune.ADAPTABLE))
        if fixed:
            raise ValueError(
                f"Preset {preset!r} loads its trained weights, which fix everything but "
                f"{', '.join(fine_tune.ADAPTABLE)}. Received overrides: {fixed}; pass load_weights=False to build it "
                "untrained with them"
            )
        trained = load_preset(folder_of(preset))
        return _adapted(trained, preset, **overrides)
    if entry["weights"] is None and any(wanted):
        raise ValueError(
            f"No weights are published for preset {preset!r} yet (its `weights` is None). Build it untrained "
            f"(pretrained=False, the default) and train it with the command in {entry['card']}, or load a model "
            f"you trained: from_preset('path/to/model.keras')."
        )
    builder = FAMILIES.get(entry["builder"]).builder
    accepted = set(inspect.signature(builder).parameters)
    unknown = sorted(set(overrides) - accepted)
    if unknown:
        raise ValueError(
            f"Preset {preset!r} builds `{entry['builder']}`, which accepts {sorted(accepted)}. "
            f"Received unknown overrides: {unknown}"
        )
    return builder(**{**entry["config"], "name": overridden_name(preset, overrides), **overrides})


def _adapted(trained, preset, num_classes=None, image_size=None):
    """A preset's trained model with a fresh head (`num_classes`: 0 for its pooled features) or at
    another `image_size` (its position table resampled); as trained where neither changes."""
    entry, config = PRESETS[preset], full_config(preset)
    model = trained
    if image_size is not None and image_size != config["image_size"]:
        build = FAMILIES.get(entry["builder"]).builder
        config["num_classes"] = config["num_classes"] if num_classes in (None, 0) else num_classes
        # named after the change, as every overridden preset
        named = {**config, "name": overridden_name(preset, {"image_size": image_size})}
        model = fine_tune.at_image_size(trained, build, named, image_size)
        if num_classes != 0:
            return model
    if num_classes is not None and (num_classes != config["num_classes"] or num_classes == 0):
        return fine_tune.with_head(model, num_classes, config.get("initializer", "torch"))
    return model


def list_models(pattern="*"):
    """The names `create_model` builds, sorted: every preset and every model family, filtered by the
    shell-style `pattern` (timm's `list_models("vit*")`)."""
    return sorted(name for name in (*PRESETS, *list_families()) if fnmatch.fnmatch(name, pattern))


def create_model(model_name, /, **overrides):
    """The model of preset or family `model_name`, any builder keyword overridden (`name` too):
    `create_model("vit", depth=12)`, `create_model("vit80_cifar10_deescalate", tau=0.5)`. A preset's
    model is named after its overrides (`from_preset`); a family's takes its builder's defaults."""
    if model_name in PRESETS:
        return from_preset(model_name, **overrides)
    if model_name not in list_families():
        raise ValueError(
            f"Unknown model; choose from list_models(): {list_models()}. Received: model_name={model_name!r}"
        )
    return FAMILIES.get(model_name).builder(**overrides)


# Builder keywords that change how a model trains, not what it computes: not part of its name.
UNNAMED = ("name", "remat")


def overridden_name(preset, overrides):
    """The preset's name, followed by every override that changes its configuration (`-depth24`)."""
    config = full_config(preset)
    changed = [(k, v) for k, v in overrides.items() if k not in UNNAMED and config.get(k) != v]
    # Keras names allow letters, digits, "_", "-" and "."; anything else in a value becomes "_".
    return preset + "".join(re.sub(r"[^\w.-]", "_", f"-{key}{value}") for key, value in changed)


def folder_of(preset):
    """The folder that holds preset `preset`'s files (its weights, metadata and assets): a shipped preset's
    inside the package, a hub preset's in Hugging Face's cache, or `preset` itself if it is such a folder;
    None for a preset that ships no weights."""
    if hub.is_hub_handle(preset):
        return hub.download(preset)
    if is_preset_folder(preset):
        return os.fspath(preset)
    if preset in PRESETS and PRESETS[preset]["weights"] is not None:
        return os.path.join(os.path.dirname(os.path.abspath(__file__)), PRESETS[preset]["weights"])
    return None


def _adapted_folder(model, overrides):
    """A saved preset with a fresh head (`num_classes`; 0: its pooled features); its weights fix the rest."""
    fixed = sorted(set(overrides) - {"num_classes"})
    if fixed:
        raise ValueError(f"A saved preset folder takes num_classes only; its weights fix the rest. Received: {fixed}")
    if overrides.get("num_classes") is None:
        return model
    if "head" not in [layer.name for layer in model.layers]:
        raise ValueError(f"num_classes applies to a classifier (a layer named 'head'). Received: model {model.name!r}")
    return fine_tune.with_head(model, overrides["num_classes"])


def _no_overrides(overrides):
    if overrides:
        raise ValueError(f"A saved model is loaded as it is; overrides apply to presets. Received: {sorted(overrides)}")


def _load_file(path, overrides):
    import keras

    _no_overrides(overrides)
    if not os.path.exists(path):
        raise ValueError(f"No such file. Received: preset={path!r}")
    return keras.saving.load_model(path)
