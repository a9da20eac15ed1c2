"""A byte-level byte-pair-encoding tokenizer learned from a training text: `BytePairTokenizer`.

As GPT-2's (Radford et al. 2019) and KerasHub's `BytePairTokenizer`: text is read as UTF-8 bytes, so every
string has ids and none is unknown; the vocabulary starts from the 256 bytes and grows by merging, one pair at
a time, the two adjacent symbols that occur together most often in the training words (Sennrich et al. 2016).
Words are split on whitespace and each is read with the space before it (the merges never cross a word), so
the ids give back the words and their single spaces; a line ends with `<eos>`, id 0, as the word-level
vocabulary's lines do (`keras_tse.data.Vocabulary`). Ties between pairs of equal count go to the pair of
lower ids, so the same text always learns the same merges.

Files (`keras_tse.data.tokenizer`): `vocabulary.txt`, one symbol a line in id order, bytes written as GPT-2's
printable stand-ins (to read; two merges may spell the same bytes); `merges.txt`, the learned merges in order,
each the two ids it joins (what the tokenizer is rebuilt from); `tokenizer.json`, the settings.
"""

import collections
import heapq

import numpy as np

from keras_tse.data.text import EOS
from keras_tse.data.tokenizer import Tokenizer

MERGES_FILE = "merges.txt"
BYTES = 256
FIRST_MERGE = 1 + BYTES  # id 0 is <eos>, ids 1..256 the bytes


def byte_symbols():
    """GPT-2's printable stand-in for each byte (its `bytes_to_unicode`): the printable Latin-1 bytes as
    themselves, every other byte as a character from 256 up, so no symbol holds whitespace or a line end."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    others = [b for b in range(BYTES) if b not in printable]
    table = dict(zip(printable, printable)) | {b: BYTES + i for i, b in enumerate(others)}
    return [chr(table[b]) for b in range(BYTES)]


class BytePairTokenizer(Tokenizer):
    """Text to a language model's ids and back through learned byte-pair merges; no id is unknown.

    Args:
        merges: the learned merges in order, each a pair of ids; merge `k` makes id `257 + k`.
        lowercase: bool, lower-case the text before it is read. Defaults to `False`.
    """

    kind = "byte_pair"

    def __init__(self, merges, lowercase=False):
        self.merges = [tuple(int(i) for i in pair) for pair in merges]
        self.lowercase = bool(lowercase)
        self.ranks = {pair: FIRST_MERGE + k for k, pair in enumerate(self.merges)}
        self.pieces = [b""] + [bytes([b]) for b in range(BYTES)]  # each id's bytes (<eos>: none)
        for left, right in self.merges:
            if not (0 < left < len(self.pieces) and 0 < right < len(self.pieces)):
                raise ValueError(f"A merge must join two earlier ids other than {EOS}'s. Received: {(left, right)}")
            self.pieces.append(self.pieces[left] + self.pieces[right])
        self._words = {}  # word -> its ids, each word merged once

    @classmethod
    def train(cls, lines, vocab_size, lowercase=False):
        """The tokenizer of at most `vocab_size` ids whose merges `lines` (the training split) teach: fewer where
        no pair of symbols occurs twice any more."""
        if vocab_size < FIRST_MERGE + 1:
            raise ValueError(f"`vocab_size` must be at least {FIRST_MERGE + 1} ({EOS}, the 256 bytes and one merge). "
                             f"Received: vocab_size={vocab_size}")  # fmt: skip
        counts = collections.Counter(w for line in lines for w in (line.lower() if lowercase else line).split())
        words = [list(_byte_ids(word)) for word in counts]
        frequency = list(counts.values())
        pairs, where = collections.Counter(), collections.defaultdict(set)
        for i, symbols in enumerate(words):
            _count(symbols, frequency[i], i, pairs, where)
        heap = [(-count, pair) for pair, count in pairs.items()]  # stale entries skipped as they surface
        heapq.heapify(heap)
        merges = []
        while FIRST_MERGE + len(merges) < vocab_size and heap:
            count, pair = heapq.heappop(heap)  # the most frequent; of equal counts, the lowest ids
            if pairs.get(pair) != -count:
                continue
            if -count < 2:
                break
            new = FIRST_MERGE + len(merges)
            merges.append(pair)
            changed = set()
            for i in sorted(where.pop(pair)):
                changed.update(zip(words[i], words[i][1:]))
                _count(words[i], -frequency[i], i, pairs, where)
                words[i] = _merged(words[i], pair, new)
                _count(words[i], frequency[i], i, pairs, where)
                changed.update(zip(words[i], words[i][1:]))
            for other in changed:
                if pairs.get(other, 0) > 0:
                    heapq.heappush(heap, (-pairs[other], other))
        return cls(merges, lowercase=lowercase)

    def __len__(self):
        return FIRST_MERGE + len(self.merges)

    @property
    def end_token_id(self):
        return 0

    def words(self, text):
        return (text.lower() if self.lowercase else text).split()

    def tokenize(self, text):
        """int32 ids of `text`'s words (no `<eos>` added)."""
        return np.asarray([i for word in self.words(text) for i in self._ids_of(word)], "int32")

    def encode(self, lines):
        """int32 ids of all `lines`, each followed by `<eos>` (a language model's training stream)."""
        ids = []
        for line in lines:
            ids.extend(i for word in self.words(line) for i in self._ids_of(word))
            ids.append(self.end_token_id)
        return np.asarray(ids, "int32")

    def detokenize(self, ids, skip_special_tokens=False):
        """The text of `ids`: their bytes as UTF-8 (a byte sequence cut mid-character shows U+FFFD), `<eos>` as
        itself unless skipped, words separated by single spaces."""
        text, pending = [], b""
        for i in (int(i) for i in ids):
            if i == self.end_token_id:
                text.append(pending.decode("utf-8", "replace"))
                pending = b""
                if not skip_special_tokens:
                    text.append(" " + EOS)
                continue
            pending += self.pieces[i]
        text.append(pending.decode("utf-8", "replace"))
        return "".join(text).strip()

    def symbols(self):
        """Each id's symbol, in id order: `<eos>`, then its bytes as GPT-2's printable stand-ins."""
        stand_in = byte_symbols()
        return [EOS] + ["".join(stand_in[b] for b in piece) for piece in self.pieces[1:]]

    def files(self):
        return {**super().files(), MERGES_FILE: "".join(f"{a} {b}\n" for a, b in self.merges)}

    @classmethod
    def from_settings(cls, read, settings):
        merges = [line.split(" ") for line in (read(MERGES_FILE) or "").splitlines()]
        return cls(merges, lowercase=settings.get("lowercase", False))

    def _ids_of(self, word):
        if word not in self._words:
            symbols = list(_byte_ids(word))
            while len(symbols) > 1:
                ranked = [self.ranks.get(pair, 1 << 62) for pair in zip(symbols, symbols[1:])]
                first = int(np.argmin(ranked))
                if ranked[first] == 1 << 62:
                    break
                symbols = _merged(symbols, (symbols[first], symbols[first + 1]), ranked[first])
            self._words[word] = symbols
        return self._words[word]


def _byte_ids(word):
    """The ids of a word's bytes, read with the space before it."""
    return (1 + b for b in (" " + word).encode("utf-8"))


def _merged(symbols, pair, new):
    """`symbols` with each non-overlapping occurrence of `pair`, left to right, as `new`."""
    out, i = [], 0
    while i < len(symbols):
        if i + 1 < len(symbols) and (symbols[i], symbols[i + 1]) == pair:
            out.append(new)
            i += 2
        else:
            out.append(symbols[i])
            i += 1
    return out


def _count(symbols, weight, i, pairs, where):
    """Add `weight` to the count of each adjacent pair of word `i`'s `symbols` (and note where it occurs)."""
    for pair in zip(symbols, symbols[1:]):
        pairs[pair] += weight
        if weight > 0:
            where[pair].add(i)
        elif pairs[pair] <= 0:
            del pairs[pair]
