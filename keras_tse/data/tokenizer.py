"""A language model's text, as ids and back, saved beside the model: `Tokenizer`, what every kind shares, and
`WordTokenizer` (the vocabulary with the splitting and lower-casing its data set was made with); the byte-level
BPE learned from a training text is `keras_tse.data.BytePairTokenizer`. KerasHub keeps a tokenizer's vocabulary as
an asset and its settings in `tokenizer.json`; here `tokenizer.json` also names the kind (`"type"`), and
`keras_tse.data.tokenizers` reads either kind back."""

import json
import os
import warnings
import zipfile

from keras_tse import run_files
from keras_tse.data.text import EOS, UNK, Vocabulary

VOCABULARY_FILE = "vocabulary.txt"
CONFIG_FILE = "tokenizer.json"
# Inside a `.keras` archive, where KerasHub's preset folders keep a tokenizer's assets: Keras's loader reads only
# the entries of the objects it rebuilds, so `keras.saving.load_model` takes the file as it is.
ARCHIVE_FOLDER = "assets/tokenizer/"
DEFAULT_KIND = "word"  # a tokenizer.json without "type" (every one written before there were kinds) is word-level


class Tokenizer:
    """What every kind shares: its files (`files`, written by `save` and `write_into`) and its special ids."""

    kind = None  # tokenizer.json's "type"
    lowercase = False

    @property
    def end_token_id(self):
        """The id of `<eos>`, the end of a line (of a sentence, in Penn Treebank): generation's default stop."""
        raise NotImplementedError

    @property
    def special_token_ids(self):
        """The ids text leaves out by default (KerasHub's special tokens): `<eos>`. `<unk>` is kept: Penn
        Treebank and WikiText write it in their text, where it stands for a rare word."""
        return [] if self.end_token_id is None else [self.end_token_id]

    def symbols(self):
        raise NotImplementedError

    def files(self):
        """The tokenizer as the text of its files, by name: its symbols in id order, and its settings as JSON."""
        settings = {"lowercase": self.lowercase} | ({"type": self.kind} if self.kind != DEFAULT_KIND else {})
        return {VOCABULARY_FILE: "\n".join(self.symbols()) + "\n", CONFIG_FILE: json.dumps(settings)}

    def save(self, folder):
        """Its files into `folder` (each written whole, then renamed into place)."""
        os.makedirs(folder, exist_ok=True)
        for name, text in self.files().items():
            run_files.write_text(os.path.join(folder, name), text)

    def write_into(self, archive):
        """Add its files to the `.keras` zip `archive` (`ARCHIVE_FOLDER`): the file alone then reads and writes
        text (`keras_tse.zoo.from_preset`, `keras-tse generate`)."""
        with zipfile.ZipFile(archive, "a", compression=zipfile.ZIP_DEFLATED) as z:
            for name, text in self.files().items():
                z.writestr(ARCHIVE_FOLDER + name, text)


class WordTokenizer(Tokenizer):
    """Text to a language model's ids and back: words split on whitespace, lower-cased first where the
    data set was (Penn Treebank's text is), each looked up in the vocabulary; a word it lacks is `<unk>`
    and is counted (`unknown_words`, and a warning from `tokenize` naming them).

    Args:
        vocabulary: a `keras_tse.data.Vocabulary` or its symbols in id order.
        lowercase: bool, lower-case the text before it is split. Defaults to `False`.
    """

    kind = DEFAULT_KIND

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

    @property
    def end_token_id(self):
        return self.vocabulary.index.get(EOS)

    def detokenize(self, ids, skip_special_tokens=False):
        special = set(self.special_token_ids) if skip_special_tokens else set()
        return self.vocabulary.decode([i for i in ids if int(i) not in special])

    def symbols(self):
        return self.vocabulary.symbols

    @classmethod
    def from_settings(cls, read, settings):
        return cls(Vocabulary.from_text(read(VOCABULARY_FILE)), lowercase=settings.get("lowercase", False))

    def __len__(self):
        return len(self.vocabulary)
