"""A trained model, named any way a user names one: a shipped preset with weights, a preset folder (or
`hf://owner/name`), a run's variant folder, or a `.keras` file.

The commands that start from a trained model (`keras-tse train --from-preset`, `export`, `generate`) read it
through `trained(source)`: one place decides what the name is, which file of a run is meant (its checkpoint
chosen on the validation split, else its last) and what was recorded about its training. What a command needs
before it loads anything (the layout, the images' geometry, the classes, the words) is read from the stored
Keras config, without building the model.
"""

import dataclasses
import json
import os
import zipfile

from keras_tse import run_files
from keras_tse._checks import InputError
from keras_tse.zoo import hub
from keras_tse.zoo.preset_folder import CONFIG_FILE, METADATA_FILE, is_preset_folder, tokenizer_folder

KINDS = ("preset", "preset folder", "run", "file")
WHAT = "a preset with trained weights, a preset folder or hf://owner/name, a run's variant folder, or a .keras file"


@dataclasses.dataclass(frozen=True)
class Trained:
    """`given`: the name as the user gave it; `kind`: one of `KINDS`; `path`: what loads (the shipped preset's
    name, a folder, or a `.keras` file); `which`: which of a run's checkpoints, in words (None elsewhere);
    `record`: what its training recorded (a run's `config.json`, a preset's `metadata.json`; `{}` for a file)."""

    given: str
    kind: str
    path: str
    which: str = None
    record: dict = dataclasses.field(default_factory=dict)

    @property
    def dataset(self):
        """The data set it was trained on, where recorded (None: not known)."""
        return self.record.get("dataset")

    @property
    def folder(self):
        """The preset folder behind a shipped preset or a preset folder (None for a run or a file)."""
        from keras_tse.zoo.presets import folder_of

        return folder_of(self.path) if self.kind in ("preset", "preset folder") else None

    def model_config(self):
        """The Keras config the model was saved with (`model.get_config()`'s serialised form), read from its
        files without building the model."""
        if self.folder is not None:
            with open(os.path.join(self.folder, CONFIG_FILE)) as f:
                return json.load(f)
        with zipfile.ZipFile(self.path) as archive:
            return json.loads(archive.read(CONFIG_FILE))

    def tokenizer(self):
        """The words of a language model (`keras_tse.data.WordTokenizer`): inside its `.keras` file, beside a
        run's model, or among a preset's assets; None where it has none."""
        from keras_tse.data.tokenizer import VOCABULARY_FILE
        from keras_tse.data.tokenizers import load_tokenizer, tokenizer_from_archive

        if self.folder is not None:
            words = tokenizer_folder(self.folder)
            return load_tokenizer(words) if words else None
        inside = tokenizer_from_archive(self.path)
        if inside is None and self.kind == "run" and os.path.isfile(os.path.join(self.given, VOCABULARY_FILE)):
            return load_tokenizer(self.given)
        return inside

    def load(self, compile=False):
        """The model, its weights loaded, with its words as `model.tokenizer` where it has them."""
        from keras_tse.zoo.presets import from_preset
        from keras_tse.zoo.saved_file import load_keras_file

        if self.kind in ("run", "file"):
            model = load_keras_file(self.path, compile=compile)
        else:
            model = from_preset(self.path)
        if getattr(model, "tokenizer", None) is None:
            tokenizer = self.tokenizer()
            if tokenizer is not None:
                model.tokenizer = tokenizer
        return model


def trained(source, flag="--from-preset"):
    """The `Trained` model `source` names; one line naming `source` and `flag` for anything else (a name
    without weights, a run's top folder, a folder or file that holds no model)."""
    from keras_tse.zoo.presets import PRESETS

    given = os.fspath(source)
    if hub.is_hub_handle(given):
        return _preset_folder(given, hub.download(given))
    if given in PRESETS:
        if PRESETS[given]["weights"] is None:
            raise InputError(flag, given, f"{WHAT} (preset {given} ships no weights yet)")
        found = Trained(given, "preset", given)
        return dataclasses.replace(found, record=_metadata(found.folder))
    if os.path.isdir(given) and os.path.isfile(os.path.join(given, "checkpoints", "last.keras")):
        checkpoint, which = run_files.chosen_checkpoint(given)
        return Trained(given, "run", _archive(checkpoint, flag), which, _json(os.path.join(given, "config.json")))
    if is_preset_folder(given):
        return _preset_folder(given, given)
    if given.endswith(".keras") and os.path.isfile(given):
        return Trained(given, "file", _archive(given, flag))
    if os.path.isdir(given):
        variants = sorted(
            n for n in os.listdir(given) if os.path.isfile(os.path.join(given, n, "checkpoints", "last.keras"))
        )
        if variants:
            runs = ", ".join(os.path.join(given, name) for name in variants)
            raise InputError(flag, given, f"one of the run's variant folders: {runs}")
    raise InputError(flag, given, WHAT)


def _preset_folder(given, folder):
    return Trained(given, "preset folder", folder, record=_metadata(folder))


def _archive(path, flag):
    if not zipfile.is_zipfile(path):
        raise InputError(flag, path, "a .keras file as model.save writes it (a zip archive)")
    return path


def _metadata(folder):
    return _json(os.path.join(folder, METADATA_FILE))


def _json(path):
    if not os.path.isfile(path):
        return {}
    with open(path) as f:
        return json.load(f)


# === What the stored config says, before any model is built ===


def _dicts(value):
    """Every dict nested in a JSON value, outermost first."""
    if isinstance(value, dict):
        yield value
        for item in value.values():
            yield from _dicts(item)
    elif isinstance(value, list):
        for item in value:
            yield from _dicts(item)


def layout_of(config):
    """The residual layout of the model's blocks (their `norm`, a registered layout's name); None for a
    model without the zoo's blocks."""
    from keras_tse.layouts import layout_names

    known = set(layout_names(measurement=True))
    for entry in _dicts(config):
        if isinstance(entry.get("norm"), str) and entry["norm"] in known:
            return entry["norm"]
    return None


def _layer(config, class_name=None, name=None):
    """The config of the first layer of class `class_name` (or named `name`), or None."""
    for entry in _dicts(config):
        inner = entry.get("config")
        if not isinstance(inner, dict):
            continue
        if (class_name and entry.get("class_name") == class_name) or (name and inner.get("name") == name):
            return inner
    return None


def input_shape(config):
    """The stored model's input batch shape (a list, None where a size is free), or None."""
    return (_layer(config, class_name="InputLayer") or {}).get("batch_shape")


def image_geometry(config):
    """`(image size, channels, classes, class names)` of an image classifier's stored config: its
    preprocessor's size and channels where it has one (raw images in), else its input's; the classes of the
    Dense layer named `head` (None without one); the class names its preprocessor records (`()`: none). None
    for a model that does not take images."""
    preprocessor = _layer(config, class_name="ImagePreprocessor")
    head = _layer(config, name="head")
    classes = head.get("units") if head else None
    if preprocessor is not None:
        names = tuple(preprocessor.get("class_names") or ())
        return preprocessor["image_size"], preprocessor["channels"], classes, names
    shape = input_shape(config)
    if not shape or len(shape) != 4 or shape[1] != shape[2]:
        return None
    return shape[1], shape[3], classes, ()
