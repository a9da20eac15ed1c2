"""WikiText-103, word level (Merity et al. 2017), as Transformer-XL reads it; and a small offline corpus.

`load_wikitext103(data_dir)` looks for, in order: `data_dir/wikitext-103/wiki.{train,valid,test}.tokens`
(the standard layout), `data_dir/wikitext-103-v1.zip` (fetched by hand), then downloads the zip into
`data_dir` and checks its MD5. Offline with neither, it stops with a message naming the file and
where to put it. The encoded ids and the vocabulary are cached next to the text
(`keras_tse_{train,valid,test}.npy`, token files read memory-mapped, and `keras_tse_vocab.txt`): building
them reads its 540 MB of text once, a slice of lines at a time, and training holds neither text nor ids.

`load_python_docs()` is real English prose that ships with every CPython: the reference-manual
topics of `pydoc_data` (about 65,000 words), for tests and `--smoke` runs without a download.
"""

import functools
import os
import warnings
import zipfile

from keras_tse.data import _download, token_file
from keras_tse.data._image_set import default_data_dir
from keras_tse.data.own import TextLines
from keras_tse.data.text import Vocabulary

URLS = (
    "https://wikitext.smerity.com/wikitext-103-v1.zip",
    "https://s3.amazonaws.com/research.metamind.io/wikitext/wikitext-103-v1.zip",
)
ARCHIVE = "wikitext-103-v1.zip"
MD5 = "9ddaacaf6af0710eda8c456decff7832"
FOLDER = "wikitext-103"
SPLITS = ("train", "valid", "test")
CACHE, VOCAB = "keras_tse_{split}.npy", "keras_tse_vocab.txt"  # token files (`token_file`), then the words


def load_wikitext103(data_dir=None, download=True):
    """`({"train", "valid", "test"}: int32 ids, memory-mapped, Vocabulary)`; 267,735 symbols incl. `<eos>`."""
    data_dir = data_dir or default_data_dir()
    folder = os.path.join(data_dir, FOLDER)
    vocab_path = os.path.join(folder, VOCAB)
    if os.path.exists(vocab_path):  # written last: the token files before it are whole
        try:
            return token_file.read_splits(folder, SPLITS, name=CACHE), Vocabulary.load(vocab_path)
        except (OSError, ValueError) as error:  # damaged or missing: rebuilt from the text
            warnings.warn(f"{error} ({type(error).__name__}); rebuilding WikiText-103's token files from the text.",
                          stacklevel=2)  # fmt: skip
            os.remove(vocab_path)
    if not all(os.path.exists(_split_path(folder, s)) for s in SPLITS):
        _fetch(data_dir, download)
    # every line, the empty ones too: each is an <eos> in Transformer-XL's stream
    lines = {split: TextLines(_split_path(folder, split), keep_empty=True) for split in SPLITS}
    vocab = Vocabulary.build(lines["train"])
    ids = token_file.encode_splits(folder, vocab, lines, name=CACHE)
    vocab.save(vocab_path)
    return ids, vocab


def _fetch(data_dir, download):
    archive = os.path.join(data_dir, ARCHIVE)
    if os.path.exists(archive):  # fetched by hand: checked, never replaced behind the user's back
        _download.check_md5(archive, MD5, "the WikiText-103 word-level release", URLS[0])
    elif not download:
        raise FileNotFoundError(_missing_message(data_dir, "downloading is off"))
    else:
        _download.get_file(ARCHIVE, URLS, data_dir, MD5, "md5", functools.partial(_missing_message, data_dir))
    with zipfile.ZipFile(archive) as z:
        z.extractall(data_dir)


def _split_path(folder, split):
    return os.path.join(folder, f"wiki.{split}.tokens")


def _missing_message(data_dir, why):
    return (
        f"WikiText-103 is not available ({why}). Fetch {URLS[0]} (MD5 {MD5}) on a machine with "
        f"internet and put it at {os.path.join(data_dir, ARCHIVE)} (or extract it there as "
        f"{FOLDER}/wiki.train.tokens, wiki.valid.tokens, wiki.test.tokens), then rerun with "
        f"--data-dir {data_dir}."
    )


def load_python_docs(max_vocab=None):
    """A small real corpus available offline: `({"train", "valid", "test"}: ids, Vocabulary)`.

    The paragraphs of CPython's `pydoc_data.topics` in topic order, split 80/10/10 into
    contiguous train/valid/test parts, read like WikiText (whitespace words, `<eos>` per line).
    `max_vocab` caps the vocabulary (rarer words become `<unk>`).
    """
    from pydoc_data.topics import topics

    lines = [line for key in sorted(topics) for line in topics[key].splitlines()]
    cut_valid, cut_test = int(0.8 * len(lines)), int(0.9 * len(lines))
    parts = {"train": lines[:cut_valid], "valid": lines[cut_valid:cut_test], "test": lines[cut_test:]}
    vocab = Vocabulary.build(parts["train"], max_size=max_vocab or len(lines))
    return {split: vocab.encode(part) for split, part in parts.items()}, vocab


SMOKE_VOCAB = 4000  # the smoke run's vocabulary: the commonest words of CPython's docs


def smoke_text(seed=0):
    """What `--smoke` on WikiText-103 reads, offline: CPython's documentation, its 4,000 commonest words."""
    return load_python_docs(max_vocab=SMOKE_VOCAB)
