"""A saved tokenizer of either kind read back (`tokenizer.json`'s `"type"`): from a folder, a `.keras` archive
or any source of its files; and a data set's vocabulary as its tokenizer."""

import json
import os
import zipfile

from keras_tse.data.byte_pair import BytePairTokenizer
from keras_tse.data.tokenizer import (
    ARCHIVE_FOLDER,
    CONFIG_FILE,
    DEFAULT_KIND,
    VOCABULARY_FILE,
    Tokenizer,
    WordTokenizer,
)

KINDS = {WordTokenizer.kind: WordTokenizer, BytePairTokenizer.kind: BytePairTokenizer}  # tokenizer.json's "type"


def as_tokenizer(vocabulary, lowercase=False):
    """A data set's vocabulary as its tokenizer (a word-level `Vocabulary`, split and cased as the set was); a
    tokenizer (a byte-pair one the loader learned) as itself."""
    return vocabulary if isinstance(vocabulary, Tokenizer) else WordTokenizer(vocabulary, lowercase=lowercase)


def tokenizer_from_files(read):
    """The tokenizer whose files `read(name)` gives (their text, None where absent), or None without a
    vocabulary. Without settings, or settings without a "type" (written before there were kinds): a word-level
    vocabulary split as written."""
    vocabulary, settings = read(VOCABULARY_FILE), read(CONFIG_FILE)
    if vocabulary is None:
        return None
    settings = json.loads(settings) if settings else {}
    kind = settings.get("type", DEFAULT_KIND)
    if kind not in KINDS:
        raise ValueError(f"{CONFIG_FILE}'s type must be one of {', '.join(KINDS)}. Received: {kind!r}")
    return KINDS[kind].from_settings(read, settings)


def load_tokenizer(folder):
    """The tokenizer `save` wrote into `folder`, of either kind."""
    tokenizer = tokenizer_from_files(lambda name: _read_text(os.path.join(folder, name)))
    if tokenizer is None:
        raise FileNotFoundError(f"No {VOCABULARY_FILE} in {folder}: expected the tokenizer's files there.")
    return tokenizer


def tokenizer_from_archive(archive):
    """The tokenizer a `.keras` zip `archive` carries (`write_into`), or None where it carries none."""
    with zipfile.ZipFile(archive) as z:
        names = set(z.namelist())
        return tokenizer_from_files(
            lambda name: z.read(ARCHIVE_FOLDER + name).decode("utf-8") if ARCHIVE_FOLDER + name in names else None
        )


def _read_text(path):
    if not os.path.isfile(path):
        return None
    with open(path, encoding="utf-8") as f:
        return f.read()
