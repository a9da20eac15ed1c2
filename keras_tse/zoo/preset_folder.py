"""A model as a folder to hand on, in KerasHub's preset layout: `config.json` (the model's Keras
config, `keras.saving.serialize_keras_object`), `model.weights.h5` (`model.save_weights`) and
`metadata.json` (versions, parameter count, and what the saver adds: the card's numbers, the command
that trained it), and `assets/` (what the model needs beside its weights, as KerasHub keeps a
tokenizer's: a language model's words in `assets/tokenizer/vocabulary.txt`). `save_preset` writes one,
`load_preset` builds the model back on any backend.
"""

import json
import os
import shutil
import tempfile

import keras

from keras_tse import __version__, run_files

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.weights.h5"
METADATA_FILE = "metadata.json"
TASK_CONFIG_FILE = "task.json"  # KerasHub's `Task.save_to_preset`: the task's config beside its backbone's files
TASK_WEIGHTS_FILE = "task.weights.h5"  # the weights of its layers outside the backbone (a head)
ASSETS = "assets"
TOKENIZER_ASSETS = "tokenizer"  # KerasHub's place for a tokenizer's files
VOCABULARY_ASSET = os.path.join(TOKENIZER_ASSETS, "vocabulary.txt")


def is_preset_folder(path):
    """Whether `path` is a folder holding a preset's `config.json`."""
    return isinstance(path, (str, os.PathLike)) and os.path.isfile(os.path.join(path, CONFIG_FILE))


def save_preset(model, folder, metadata=None, assets=None):
    """Write `model` to the new folder `folder`: its config, its weights, its `tokenizer` where it has one (a
    language model's, as KerasHub keeps a preprocessor's: its files under assets/tokenizer/), `metadata` (a dict
    of JSON values) and `assets` ({path under assets/: the file to copy there}). A folder that exists and holds
    anything is left as it is (a ValueError); the files are written beside it and renamed into place, so
    an interrupted save leaves no half a preset."""
    folder = os.fspath(folder)
    if os.path.exists(folder) and (not os.path.isdir(folder) or os.listdir(folder)):
        raise ValueError(f"save_preset writes a new folder and never replaces one. Received: folder={folder!r}")
    parent = os.path.dirname(os.path.abspath(folder))
    os.makedirs(parent, exist_ok=True)
    staging = tempfile.mkdtemp(prefix=".preset-", dir=parent)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(staging, 0o777 & ~umask)  # a folder like any other, not mkdtemp's private one
    try:
        run_files.write_json(os.path.join(staging, CONFIG_FILE), keras.saving.serialize_keras_object(model))
        model.save_weights(os.path.join(staging, WEIGHTS_FILE))
        run_files.write_json(os.path.join(staging, METADATA_FILE), {**_versions(model), **(metadata or {})})
        tokenizer = getattr(model, "tokenizer", None)
        for name, text in (tokenizer.files() if hasattr(tokenizer, "files") else {}).items():
            run_files.write_text(os.path.join(staging, ASSETS, TOKENIZER_ASSETS, name), text)
        for name, source in (assets or {}).items():
            run_files.copy_file(source, os.path.join(staging, ASSETS, name))
        if os.path.isdir(folder):
            os.rmdir(folder)  # empty: checked above
        os.replace(staging, folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return folder


def load_preset(folder):
    """The model saved in preset folder `folder`, its weights loaded (a KerasHub task's folder: the task);
    missing or unreadable weights are a ValueError naming the file."""
    if os.path.isfile(os.path.join(folder, TASK_CONFIG_FILE)):
        return _keras_hub_task(folder)
    with open(os.path.join(folder, CONFIG_FILE)) as f:
        model = keras.saving.deserialize_keras_object(json.load(f))
    weights = os.path.join(folder, WEIGHTS_FILE)
    if not os.path.isfile(weights):
        raise ValueError(
            f"{folder}: received a preset folder without {WEIGHTS_FILE}; expected save_preset's three files"
        )
    _load_weights(model.load_weights, weights)
    if tokenizer_folder(folder) is not None:  # a language model's words travel with it
        from keras_tse.data.tokenizers import load_tokenizer

        model.tokenizer = load_tokenizer(tokenizer_folder(folder))
    return model


def _load_weights(load, weights):
    try:
        load(weights)
    except (OSError, ValueError, KeyError) as error:  # h5py's errors for a cut or foreign file are these
        raise ValueError(
            f"{weights}: received a weights file that does not load ({type(error).__name__}: "
            f"{' '.join(str(error).split())[:160]}); expected the file its preset was saved with, whole"
        ) from None


def _keras_hub_task(folder):
    """The KerasHub task `Task.save_to_preset` wrote to `folder`, as KerasHub's loader reads it: the backbone by
    `Backbone.from_preset` (its weights, sharded or not), the task from `task.json` on it, the head's weights
    from `task.weights.h5` where it has any, the preprocessor's assets (a tokenizer's vocabulary). Whatever the
    task's class: KerasHub's own `Task.from_preset` finds only a task class declared for the backbone's class
    (the de-escalated tasks of `keras_hub_families.FAMILIES` are)."""
    import keras_hub

    with open(os.path.join(folder, TASK_CONFIG_FILE)) as f:
        saved = json.load(f)
    backbone = keras_hub.models.Backbone.from_preset(os.fspath(folder))
    task = keras.saving.deserialize_keras_object({**saved, "config": {**saved["config"], "backbone": backbone}})
    if os.path.isfile(os.path.join(folder, TASK_WEIGHTS_FILE)):
        _load_weights(task.load_task_weights, os.path.join(folder, TASK_WEIGHTS_FILE))
    if task.preprocessor is not None and hasattr(task.preprocessor, "load_preset_assets"):
        task.preprocessor.load_preset_assets(os.fspath(folder))
    return task


def folder_error(path):
    """For a folder that is not a preset folder, what it is instead, as one line; None for anything else.
    A run's top folder (one folder per variant, each with checkpoints/last.keras) names its variants."""
    if not (isinstance(path, (str, os.PathLike)) and os.path.isdir(path)):
        return None
    variants = sorted(
        name for name in os.listdir(path) if os.path.isfile(os.path.join(path, name, "checkpoints", "last.keras"))
    )
    if variants:
        runs = ", ".join(os.path.join(os.fspath(path), name, "checkpoints", "last.keras") for name in variants)
        return f"{path}: received a run's folder; expected one of its models: {runs}"
    files = ", ".join((CONFIG_FILE, WEIGHTS_FILE, METADATA_FILE))
    return f"{path}: received a folder without {CONFIG_FILE}; expected a preset folder (save_preset's {files})"


def tokenizer_folder(folder):
    """The preset folder's tokenizer assets (`keras_tse.data.load_tokenizer` reads them), or None."""
    return os.path.dirname(vocabulary_file(folder)) if vocabulary_file(folder) else None


def vocabulary_file(folder):
    """The preset folder's vocabulary asset (a language model's words, one a line, in id order), or None."""
    path = os.path.join(folder, ASSETS, VOCABULARY_ASSET)
    return path if os.path.isfile(path) else None


def preset_metadata(folder):
    """The preset folder's `metadata.json`."""
    with open(os.path.join(folder, METADATA_FILE)) as f:
        return json.load(f)


def _versions(model):
    return {
        "keras_version": keras.__version__,
        "keras_tse_version": __version__,
        "saved_with_backend": keras.backend.backend(),
        "parameter_count": int(model.count_params()),
    }
