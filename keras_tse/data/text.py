"""Word-level vocabulary and the ordered segment stream of a language model (Transformer-XL's data path)."""

import collections

import keras
import numpy as np

from keras_tse import _checks, run_files

EOS = "<eos>"
UNK = "<unk>"


class Vocabulary:
    """Words ordered by training-split frequency, special symbols first; id = position.

    As Transformer-XL builds WikiText-103's: lines split on whitespace, `<eos>` appended to each
    line (the only special symbol), then every word of the training split by descending count
    (ties in order of first appearance). With `max_size`, the rarer words map to `<unk>` (added as
    a special symbol); WikiText already writes its rare words as `<unk>` and needs no cap.
    """

    def __init__(self, symbols):
        self.symbols = list(symbols)
        self.index = {s: i for i, s in enumerate(self.symbols)}
        if len(self.index) != len(self.symbols):
            raise ValueError("Vocabulary symbols must be distinct.")

    @classmethod
    def build(cls, lines, max_size=None):
        counts = collections.Counter()
        for line in lines:
            counts.update(line.split())
        special = [EOS] if max_size is None else [EOS, UNK]
        words = [w for w, _ in counts.most_common() if w not in special]
        if max_size is not None:
            words = words[: max(0, max_size - len(special))]
        return cls(special + words)

    def __len__(self):
        return len(self.symbols)

    def encode(self, lines):
        """int32 ids of all `lines`, each followed by `<eos>`; unknown words become `<unk>`."""
        eos, unk = self.index[EOS], self.index.get(UNK)

        def ids_of(line):
            for word in line.split():
                i = self.index.get(word, unk)
                if i is None:
                    raise ValueError(f"Word {word!r} is not in the vocabulary, which has no {UNK} symbol.")
                yield i
            yield eos

        # straight into an int32 array, 4 bytes a token (a list of Python ints took about 36)
        return np.fromiter((i for line in lines for i in ids_of(line)), "int32")

    def decode(self, ids):
        return " ".join(self.symbols[int(i)] for i in ids)

    def text(self):
        """The vocabulary as `vocabulary.txt` holds it: one symbol a line, in id order."""
        return "\n".join(self.symbols) + "\n"

    @classmethod
    def from_text(cls, text):
        return cls(text.removesuffix("\n").split("\n"))

    def save(self, path):
        run_files.write_text(path, self.text())

    @classmethod
    def load(cls, path):
        with open(path, encoding="utf-8") as f:
            return cls.from_text(f.read())


def lm_segments(ids, batch_size, segment_len, shard=(0, 1)):
    """Inputs and next-token targets `[num_segments * batch_size, segment_len]`, in stream order.

    Transformer-XL's LMOrderedIterator: the corpus is cut into `batch_size` contiguous streams
    (stream `b` = the `b`-th slice of `len(ids) // batch_size` tokens), each read in windows of
    `segment_len`; targets are the inputs shifted by one; the tokens past the last full window are
    dropped. Row `k * batch_size + b` is window `k` of stream `b`, so `fit(x, y,
    batch_size=batch_size, shuffle=False)` hands batch `k` the `k`-th window of every stream and
    each batch continues the previous one, as the memory needs.

    `shard=(index, count)`: this process's part of every batch when `count` processes train together,
    streams `[index * b / count, (index + 1) * b / count)` of the `b = batch_size` (rows of `b / count`
    a window): together the processes feed exactly the batches of one.
    """
    segment_len = _checks.positive_int("segment_len", segment_len)
    streams, windows = _streams(ids, batch_size, segment_len, shard)
    part = len(streams)
    used = windows * segment_len
    x = streams[:, :used].reshape(part, windows, segment_len)
    y = streams[:, 1 : used + 1].reshape(part, windows, segment_len)
    return (x.transpose(1, 0, 2).reshape(-1, segment_len), y.transpose(1, 0, 2).reshape(-1, segment_len))


def _streams(ids, batch_size, segment_len, shard):
    """(this process's streams, `[batch_size / count, steps]`, a view of `ids` (of a memory-mapped file's too: no
    copy), how many windows of `segment_len` each holds), checked."""
    batch_size = _checks.positive_int("batch_size", batch_size)
    index, count = shard
    if not 0 <= index < count or batch_size % count:
        raise ValueError(
            f"`shard` must be (index, count) with 0 <= index < count, count dividing batch_size {batch_size}. "
            f"Received: shard={shard!r}"
        )
    ids = ids if isinstance(ids, np.ndarray) else np.asarray(ids)
    steps = len(ids) // batch_size
    windows = (steps - 1) // segment_len
    if windows < 1:
        raise ValueError(
            f"Too few tokens for one segment: {len(ids)} tokens in {batch_size} streams of {steps}, "
            f"need at least segment_len + 1 = {segment_len + 1} per stream."
        )
    part = batch_size // count
    return ids[: steps * batch_size].reshape(batch_size, steps)[index * part : (index + 1) * part], windows


class _Windows:
    """`lm_segments`' inputs (`shift=0`) or targets (`shift=1`) as rows read from the streams when sliced: rows
    `[k * b, (k + 1) * b)` (window `k` of the `b` streams) are columns `[k * segment_len + shift, ...)` of the
    `[b, steps]` view, a view again."""

    def __init__(self, streams, segment_len, windows, shift):
        self.streams, self.segment_len, self.windows, self.shift = streams, segment_len, windows, shift

    def __len__(self):
        return self.windows * len(self.streams)

    def __getitem__(self, rows):
        window, start = divmod(rows.start, len(self.streams))
        if start or rows.stop - rows.start != len(self.streams):
            raise ValueError(f"Rows are read a window at a time, {len(self.streams)} rows. Received: {rows!r}")
        first = window * self.segment_len + self.shift
        return self.streams[:, first : first + self.segment_len]


class SegmentStream(keras.utils.PyDataset):
    """An endless ordered stream of `lm_segments` batches, read `steps_per_epoch` batches per epoch.

    Transformer-XL trains for a number of steps over a stream that wraps around at the corpus end,
    and evaluates every so many steps. Here epoch `e`, batch `i` is global step `g = e *
    steps_per_epoch + i`, which reads window `g mod num_windows` of every stream; the epoch comes
    from Keras (`set_epoch`, called at each epoch start by the runner's callback), so a run
    resumed at epoch `e` reads on exactly where it stopped.
    """

    def __init__(self, x, y, batch_size, steps_per_epoch):
        super().__init__()
        if len(x) % batch_size or len(x) != len(y):
            raise ValueError(
                f"x and y must hold whole batches of {batch_size} rows. Received: len(x)={len(x)}, len(y)={len(y)}"
            )
        self.x, self.y, self.batch_size, self.steps_per_epoch = x, y, batch_size, steps_per_epoch
        self.windows = len(x) // batch_size
        self.epoch = 0

    @classmethod
    def from_ids(cls, ids, batch_size, segment_len, steps_per_epoch, shard=(0, 1)):
        """The stream of `lm_segments(ids, batch_size, segment_len, shard)`'s batches, read from `ids` itself: each
        batch two slices of the `[streams, steps]` view of `ids`, so no copy of the corpus is made (a memory-mapped
        token file stays on disk but for the batch read). Its batches hold this process's `batch_size / count`
        rows."""
        streams, windows = _streams(ids, batch_size, _checks.positive_int("segment_len", segment_len), shard)
        x, y = (_Windows(streams, segment_len, windows, shift) for shift in (0, 1))
        return cls(x, y, len(streams), steps_per_epoch)

    def __len__(self):
        return self.steps_per_epoch

    def __getitem__(self, index):
        window = (self.epoch * self.steps_per_epoch + index) % self.windows
        rows = slice(window * self.batch_size, (window + 1) * self.batch_size)
        return self.x[rows], self.y[rows]

    def set_epoch(self, epoch):
        self.epoch = epoch
