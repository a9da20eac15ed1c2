"""Arrays of an `.npz` file read where they lie, what `--stream` trains an `.npz` data set on.

`numpy.savez` stores each array as a `.npy` member of a zip archive without compressing it, so its bytes lie
in the file as they would in memory: `stored_array(path, name)` memory-maps them (the member's `.npy` header read
from the archive, nothing else), and `StoredRows` stands for rows of such an array, as `ImageFiles` stands for a
folder's images: indexing it gives another `StoredRows` (a subset, nothing read) and NumPy's conversion
(`np.asarray`, which the input pipeline applies to each batch) reads those rows then. The batches are then the
arrays `numpy.load` gives, row for row. A member `numpy.savez_compressed` deflated cannot be read in place and
is refused in one line.
"""

import zipfile

import numpy as np

from keras_tse._checks import InputError

_LOCAL_HEADER = 30  # a zip member's local header: 30 bytes, then its name and its extra field


def stored_array(path, name):
    """Array `name` of the `.npz` file `path`, memory-mapped read-only (a `numpy.memmap`)."""
    with zipfile.ZipFile(path) as archive:
        info = archive.getinfo(f"{name}.npy")
    if info.compress_type != zipfile.ZIP_STORED:
        raise InputError(
            f"{path}: {name}", "a compressed array (numpy.savez_compressed)",
            "arrays stored as they are (numpy.savez), which --stream reads where they lie",
        )  # fmt: skip
    with open(path, "rb") as f:
        f.seek(info.header_offset)
        local = f.read(_LOCAL_HEADER)
        names = int.from_bytes(local[26:28], "little") + int.from_bytes(local[28:30], "little")
        f.seek(info.header_offset + _LOCAL_HEADER + names)
        version = np.lib.format.read_magic(f)
        read = np.lib.format.read_array_header_1_0 if version == (1, 0) else np.lib.format.read_array_header_2_0
        shape, fortran_order, dtype = read(f)
        offset = f.tell()
    if dtype.hasobject:
        raise InputError(f"{path}: {name}", "an array of Python objects", "numbers (--stream reads them in place)")
    return np.memmap(path, dtype=dtype, mode="r", offset=offset, shape=shape, order="F" if fortran_order else "C")


class StoredRows:
    """Rows `rows` of `array` (all of them by default), read when they are read.

    Args:
        array: an array, a memory-mapped one here (`stored_array`).
        rows: int indices of its rows, in this object's order.
    """

    def __init__(self, array, rows=None):
        self.array = array
        self.rows = np.arange(len(array)) if rows is None else np.asarray(rows)

    @property
    def dtype(self):
        return self.array.dtype

    @property
    def ndim(self):
        return self.array.ndim

    @property
    def shape(self):
        return (len(self.rows), *self.array.shape[1:])

    def __len__(self):
        return len(self.rows)

    def __getitem__(self, key):
        """Rows by an int (that row, read), a slice, an int array or a boolean mask (a subset, unread)."""
        if isinstance(key, (int, np.integer)):
            return np.asarray(self.array[self.rows[key]])
        return StoredRows(self.array, np.atleast_1d(self.rows[key]))

    def __array__(self, dtype=None, copy=None):
        rows = np.asarray(self.array[self.rows])
        return rows if dtype is None else rows.astype(dtype)

    def __repr__(self):
        return f"StoredRows({len(self.rows)} of {self.array.shape[0]} rows, {self.array.dtype})"
