"""A `.keras` file loaded, or refused in one line that says what the file is: Keras answers a file that is
not its archive (a truncated download, an HTML page saved by mistake, a weights-only `.h5`) with "File not
found", which sends the user looking for a path that is there."""

import os
import zipfile

from keras_tse.data.tokenizers import tokenizer_from_archive


def load_keras_file(path, compile=True):
    """`keras.saving.load_model(path, compile=compile)`, with the tokenizer the archive carries as the model's
    `tokenizer` (a language model saved by this project); a missing file, a file that is not a zip archive, or an
    archive Keras cannot read is an `InputError` naming the path and what it holds."""
    import keras

    from keras_tse._checks import InputError

    if not os.path.isfile(path):
        raise InputError(path, "no such file", "a saved .keras file")
    if not zipfile.is_zipfile(path):
        size = os.path.getsize(path)
        held = f"a file of {size:,} bytes that is no zip archive (cut short, or another format)"
        raise InputError(path, held, "a .keras file as model.save writes it (a zip archive)")
    try:
        model = keras.saving.load_model(path, compile=compile)
    except Exception as error:  # noqa: BLE001 - a damaged archive fails in zipfile, h5py, json or Keras
        held = f"an archive Keras cannot load ({type(error).__name__}: {error})"
        raise InputError(path, held, "a whole .keras file") from None
    tokenizer = tokenizer_from_archive(path)
    if tokenizer is not None:  # a language model's words, saved inside (keras_tse.run_files.save_model)
        model.tokenizer = tokenizer
    return model
