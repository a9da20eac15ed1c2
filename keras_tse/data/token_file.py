"""A text split as a token file: its int32 ids in a `.npy` file on disk, read memory-mapped.

A corpus larger than memory is encoded a slice of lines at a time and written as it goes, so neither its text
nor its ids are ever held whole; training then reads it through `numpy.load(..., mmap_mode="r")`, and
`SegmentStream.from_ids` takes each batch as a view of the map, so only the pages a batch reads come into
memory (and the kernel may drop them again: they are the file's, not the process's).

The file is a plain NumPy `.npy` (version 1.0, little-endian int32, one dimension): `numpy.load` reads it
anywhere. Its header is written before the ids with room for any length (NumPy pads a header with spaces
itself) and rewritten with the count once the last id is out; the whole file is written beside its name and
renamed, so an interrupted write leaves nothing under that name.
"""

import os

import numpy as np

from keras_tse import run_files

DTYPE = np.dtype("<i4")
LINES_PER_SLICE = 10_000  # lines encoded at once: about 2 MB of ids for WikiText-103's ~200-token lines
# magic (6) + version (2) + header length (2) + the header text: 128 bytes, a multiple of 64 as NumPy aligns
# them, with room for a shape of up to 10^20 ids
_HEADER_TEXT_BYTES = 118


def _header(count):
    """The `.npy` 1.0 header of `count` int32 ids, always `10 + _HEADER_TEXT_BYTES` bytes long."""
    text = f"{{'descr': '{DTYPE.str}', 'fortran_order': False, 'shape': ({count},), }}"
    text = text.ljust(_HEADER_TEXT_BYTES - 1) + "\n"
    return np.lib.format.magic(1, 0) + _HEADER_TEXT_BYTES.to_bytes(2, "little") + text.encode("latin1")


def write_token_file(path, tokenizer, lines, lines_per_slice=LINES_PER_SLICE):
    """Encode `lines` (any iterable of text lines, read once) with `tokenizer.encode` a slice of
    `lines_per_slice` lines at a time into the `.npy` file `path`; returns how many ids it holds."""
    count = 0
    with run_files.replacing(path, "wb") as f:
        f.write(_header(0))  # room for the header; its count is known at the end
        for piece in _slices(lines, lines_per_slice):
            ids = np.asarray(tokenizer.encode(piece), DTYPE)
            f.write(ids.tobytes())
            count += len(ids)
        f.seek(0)
        f.write(_header(count))
    return count


def _slices(lines, size):
    piece = []
    for line in lines:
        piece.append(line)
        if len(piece) == size:
            yield piece
            piece = []
    if piece:
        yield piece


def read_token_file(path):
    """The ids of token file `path`, memory-mapped read-only (a `numpy.memmap`, int32, one dimension)."""
    expected = "a token file, a .npy file of int32 ids [n] (keras_tse.data.token_file)"
    try:
        ids = np.load(path, mmap_mode="r", allow_pickle=False)
    except ValueError:  # no .npy header, or a damaged one (NumPy's words name pickles)
        raise ValueError(f"{path} is not {expected}") from None
    if not isinstance(ids, np.ndarray) or ids.dtype != DTYPE or ids.ndim != 1:
        got = f"{ids.dtype} values of shape {ids.shape}" if isinstance(ids, np.ndarray) else type(ids).__name__
        raise ValueError(f"{path} holds {got}; expected {expected}")
    return ids


def encode_splits(folder, tokenizer, lines, name="{split}.npy"):
    """`{split: memory-mapped ids}` of `lines` (`{split: iterable of lines}`), each split encoded into the
    token file `folder/name` (`name` formatted with the split)."""
    for split, split_lines in lines.items():
        write_token_file(_split_file(folder, name, split), tokenizer, split_lines)
    return read_splits(folder, lines, name)


def read_splits(folder, splits, name="{split}.npy"):
    """`{split: memory-mapped ids}` of the token files `encode_splits` wrote for `splits`."""
    return {split: read_token_file(_split_file(folder, name, split)) for split in splits}


def _split_file(folder, name, split):
    return os.path.join(folder, name.format(split=split))
