"""Named model configurations: builder keywords with metadata, as KerasHub's presets carry, each
family's kept beside it (`vit_presets.py`, ...) and gathered here.

`from_preset(name, **overrides)` builds one (or loads a `.keras` file); `presets()` lists them with
their metadata: description, input and its normalisation, parameter counts, `weights` and the model
card (`zoo/<card>.md`: settings, the command that trains it, the results measured so far).
`keras-tse presets` prints the list. `create_model(name)` builds a preset or a family by name and
`list_models(pattern)` lists them (`registry.py`).
"""

import collections.abc
import copy
import fnmatch
import inspect
import json
import os
import re

from keras_tse.zoo import fine_tune, hub, preprocessing, saved_file
from keras_tse.zoo.preset_folder import folder_error, is_preset_folder, load_preset
from keras_tse.zoo.registry import FAMILIES, family_config, list_families

# Parameter counts, measured by building each preset: `keras-tse presets --count --write <this file>`
# writes it, tests/test_presets.py checks it against count_params(). Not typed by hand.
SIZES_FILE = os.path.join(os.path.dirname(__file__), "preset_sizes.json")


class _Presets(collections.abc.Mapping):
    """Every registered family's presets, by name, each entry with its family as `builder`: read from the
    families as they are now (another package's family brings its own). Image families' first."""

    def _all(self):
        families = sorted(FAMILIES.items().items(), key=lambda item: item[1].task != "images")
        return {
            name: {"builder": family_name, **entry}
            for family_name, family in families
            for name, entry in family.presets.items()
        }

    def __getitem__(self, name):
        return self._all()[name]

    def __iter__(self):
        return iter(self._all())

    def __len__(self):
        return len(self._all())


PRESETS = _Presets()


def input_description(preset):
    """What the preset's model takes, in words, from its builder keywords."""
    return FAMILIES.get(PRESETS[preset]["builder"]).describe_input(full_config(preset))


def full_config(preset):
    """Every builder keyword of `preset`: its own settings over the builder's defaults; of a model family's
    name, its builder's defaults (as `create_model` takes either)."""
    if preset not in PRESETS and preset in list_families():
        return family_config(preset)
    entry = PRESETS[preset]
    return {**family_config(entry["builder"]), **copy.deepcopy(entry["config"])}


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


def from_preset(preset, *, pretrained=None, load_weights=None, new_head=False, **overrides):
    """Build the model of preset `preset`, with any builder keyword overridden; or load a `.keras` file.

    An overridden preset's model is named after the change (`vit80_cifar10_post-depth24`), so a run
    folder or a saved file never claims a configuration it does not have. A preset that ships weights
    (`presets()[name]["weights"]`) loads them unless `load_weights=False` (KerasHub's name; timm's
    `pretrained` is the same switch); asked of a preset without weights, either says so.

    A folder `save_preset` wrote (KerasHub's layout: `config.json`, `model.weights.h5`,
    `metadata.json`) loads as saved, on any backend, here or from the Hugging Face Hub
    (`hf://owner/name`, `keras_tse.zoo.hub`); `num_classes=` gives it a fresh head (0: its features). A
    KerasHub task's `save_to_preset` folder (its `task.json`) loads as that task, head and preprocessor with it.

    A preset with weights fine-tunes (`fine_tune`): `image_size=` and `channels=` adapt it to other images,
    and its head is fresh whenever the task's classes are not the preset's: another `num_classes`, or
    `new_head=True` (other classes of the same count).

    Example: `from_preset("vit80_cifar10_deescalate", tau=0.5, num_classes=100)`;
    `from_preset("runs/cifar10/deescalate/model.keras")`; `from_preset("my_preset/", num_classes=5)`;
    `from_preset("hf://owner/name")`.
    """
    if hub.is_hub_handle(preset):
        preset = hub.download(preset)
    if is_preset_folder(preset):
        return _adapted_folder(load_preset(preset), overrides, new_head)
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
        return _adapted(trained, preset, new_head, **overrides)
    if entry["weights"] is None and (any(wanted) or new_head):
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


def _adapted(trained, preset, new_head=False, num_classes=None, image_size=None, channels=None):
    """A preset's trained model at another `image_size` (its position table resampled) or for images of other
    `channels` (its patch kernel adapted), with a fresh head by `fine_tune.new_head`'s rule (`num_classes` 0:
    its pooled features); as trained where nothing changes."""
    if (num_classes, image_size, channels, new_head) == (None, None, None, False):
        return trained
    entry, config = PRESETS[preset], full_config(preset)
    given = {"image_size": image_size, "channels": channels}
    reshaped = {key: value for key, value in given.items() if value is not None and value != config[key]}
    model = trained
    if reshaped:
        build = FAMILIES.get(entry["builder"]).builder
        named = {**config, "name": overridden_name(preset, reshaped)}  # named after the change, as every override
        model = fine_tune.adapted(trained, build, named, **{**{key: config[key] for key in given}, **reshaped})
        preprocessor = preprocessing.preprocessor_of(trained)
        if preprocessor is not None:  # raw images in, as the preset took them, to the new size and channels
            model = preprocessing.with_preprocessing(model, preprocessing.preprocessor_like(preprocessor, **reshaped))
    if num_classes == 0 or fine_tune.new_head(config["num_classes"], num_classes, new_head):
        classes = config["num_classes"] if num_classes is None else num_classes
        return fine_tune.with_head(model, classes, config.get("initializer", "torch"))
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


def _adapted_folder(model, overrides, new_head=False):
    """A saved preset with a fresh head by `fine_tune.new_head`'s rule (`num_classes` 0: its pooled features);
    its weights fix the rest."""
    fixed = sorted(set(overrides) - {"num_classes"})
    if fixed:
        raise ValueError(f"A saved preset folder takes num_classes only; its weights fix the rest. Received: {fixed}")
    num_classes = overrides.get("num_classes")
    if num_classes is None and not new_head:
        return model
    if "head" not in [layer.name for layer in model.layers]:
        raise ValueError(f"num_classes applies to a classifier (a layer named 'head'). Received: model {model.name!r}")
    classes = model.get_layer("head").units
    if num_classes == 0 or fine_tune.new_head(classes, num_classes, new_head):
        return fine_tune.with_head(model, classes if num_classes is None else num_classes)
    return model


def _no_overrides(overrides):
    if overrides:
        raise ValueError(f"A saved model is loaded as it is; overrides apply to presets. Received: {sorted(overrides)}")


def _load_file(path, overrides):
    _no_overrides(overrides)
    return saved_file.load_keras_file(path)
