"""The words of a language model as text: `WordTokenizer`, the vocabulary with the splitting and lower-casing
its data set was made with, saved beside the model (KerasHub keeps a tokenizer's vocabulary as an asset and
its settings in `tokenizer.json`)."""

import json
import os
import warnings
import zipfile

from keras_tse import run_files
from keras_tse.data.text import UNK, Vocabulary

VOCABULARY_FILE = "vocabulary.txt"
CONFIG_FILE = "tokenizer.json"
# Inside a `.keras` archive, where KerasHub's preset folders keep a tokenizer's assets: Keras's loader reads only
# the entries of the objects it rebuilds, so `keras.saving.load_model` takes the file as it is.
ARCHIVE_FOLDER = "assets/tokenizer/"


class WordTokenizer:
    """Text to a language model's ids and back: words split on whitespace, lower-cased first where the
    data set was (Penn Treebank's text is), each looked up in the vocabulary; a word it lacks is `<unk>`
    and is counted (`unknown_words`, and a warning from `tokenize` naming them).

    Args:
        vocabulary: a `keras_tse.data.Vocabulary` or its symbols in id order.
        lowercase: bool, lower-case the text before it is split. Defaults to `False`.
    """

    def __init__(self, vocabulary, lowercase=False):
        self.vocabulary = vocabulary if isinstance(vocabulary, Vocabulary) else Vocabulary(vocabulary)
        self.lowercase = bool(lowercase)

    def words(self, text):
        return (text.lower() if self.lowercase else text).split()

    def unknown_words(self, text):
        """The words of `text` the vocabulary lacks, in order, as written."""
        return [word for word in self.words(text) if word not in self.vocabulary.index]

    def tokenize(self, text):
        """int32 ids of `text`'s words (no `<eos>` added); a warning names the words read as `<unk>`."""
        unknown = self.unknown_words(text)
        if unknown:
            shown = ", ".join(repr(word) for word in unknown[:10]) + (" ..." if len(unknown) > 10 else "")
            warnings.warn(f"{len(unknown)} word(s) not in the vocabulary, read as {UNK}: {shown}", stacklevel=2)
        return self.vocabulary.encode([" ".join(self.words(text))])[:-1]

    def detokenize(self, ids):
        return self.vocabulary.decode(ids)

    def save(self, folder):
        """`vocabulary.txt` and `tokenizer.json` into `folder` (each written whole, then renamed into place)."""
        os.makedirs(folder, exist_ok=True)
        self.vocabulary.save(os.path.join(folder, VOCABULARY_FILE))
        run_files.write_json(os.path.join(folder, CONFIG_FILE), {"lowercase": self.lowercase})

    @classmethod
    def load(cls, folder):
        """The tokenizer in `folder`: its `vocabulary.txt`, and `tokenizer.json` where there is one (a folder
        from before it existed: split as written, no lower-casing)."""
        config = os.path.join(folder, CONFIG_FILE)
        settings = {}
        if os.path.isfile(config):
            with open(config) as f:
                settings = json.load(f)
        return cls(Vocabulary.load(os.path.join(folder, VOCABULARY_FILE)), **settings)

    def write_into(self, archive):
        """Add `vocabulary.txt` and `tokenizer.json` to the `.keras` zip `archive` (`ARCHIVE_FOLDER`): the file
        alone then reads and writes text (`keras_tse.zoo.from_preset`, `keras-tse generate`)."""
        with zipfile.ZipFile(archive, "a", compression=zipfile.ZIP_DEFLATED) as z:
            z.writestr(ARCHIVE_FOLDER + VOCABULARY_FILE, "\n".join(self.vocabulary.symbols) + "\n")
            z.writestr(ARCHIVE_FOLDER + CONFIG_FILE, json.dumps({"lowercase": self.lowercase}))

    @classmethod
    def from_archive(cls, archive):
        """The tokenizer a `.keras` zip `archive` carries (`write_into`), or None where it carries none."""
        with zipfile.ZipFile(archive) as z:
            names = set(z.namelist())
            if ARCHIVE_FOLDER + VOCABULARY_FILE not in names:
                return None
            symbols = z.read(ARCHIVE_FOLDER + VOCABULARY_FILE).decode("utf-8").split("\n")[:-1]
            settings = json.loads(z.read(ARCHIVE_FOLDER + CONFIG_FILE)) if ARCHIVE_FOLDER + CONFIG_FILE in names else {}
        return cls(Vocabulary(symbols), **settings)

    def __len__(self):
        return len(self.vocabulary)
