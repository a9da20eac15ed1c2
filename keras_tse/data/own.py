"""A user's own data, read the same way on every backend, checked before any model is built.

- `load_image_folder(path, image_size)`: one subfolder per class (BMP, GIF, JPEG, PNG or TIFF files), read
  with Pillow into uint8 RGB arrays (no TensorFlow needed); `path/train/` and `path/test/` when both
  are there (the same class folders in each), else `path` itself split per class with a seeded
  shuffle (`test_fraction` of each class, at least one image, for testing).
- `load_npz(path)`: NumPy arrays `x_train`, `y_train`, `x_test`, `y_test` in one `.npz` file.
- `load_text_folder(path)`: `train.txt`, `valid.txt`, `test.txt` (UTF-8, read line by line), one line a sentence (or a
  paragraph), words split on whitespace; the vocabulary is the training file's, `<unk>` for the
  other words.
- `fingerprint(path)`: a digest of the files a loader reads, so that a run folder records which data
  it was trained on and a rerun on other data is refused; `contents(path)` the same per file (per
  array of a `.npz`), so that the refusal names what changed (`run_files.describe_change`).

Every check raises `InputError` naming the flag or file, what it received and what was expected.
The minimums: two classes; in a single folder, two images per class (one to train on, one to test),
with train/ and test/ one image per class in each.
"""

import codecs
import dataclasses
import hashlib
import os
import zipfile

import numpy as np

from keras_tse._checks import InputError
from keras_tse.data import token_file
from keras_tse.data.image_files import ImageFiles, read_image, read_resized  # noqa: F401 (read_image: own's API)
from keras_tse.data.stored_arrays import StoredRows, stored_array
from keras_tse.data.text import Vocabulary

NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")
TEXT_SPLITS = ("train", "valid", "test")
# those image_dataset_from_directory reads, and TIFF (scanners' and microscopes' 16-bit files), read by Pillow
IMAGE_EXTENSIONS = (".bmp", ".gif", ".jpeg", ".jpg", ".png", ".tif", ".tiff")
MIN_CLASSES = 2


# === Image folders ===


def image_folder_layout(path, seed=0, test_fraction=0.2):
    """`({"train": [(file, label)], "test": [...]}, class_names)`: the folder checked and split, no image read."""
    if not os.path.isdir(path):
        raise InputError("--data-dir", path, "a folder of class folders (or train/ and test/ holding them)")
    parts = {split: os.path.join(path, split) for split in ("train", "test")}
    present = [split for split, part in parts.items() if os.path.isdir(part)]
    if len(present) == 1:
        (there,) = present
        missing = "test" if there == "train" else "train"
        raise InputError(
            "--data-dir",
            f"{path}, holding {there}/ but no {missing}/",
            f"both train/ and test/ (the same class folders in each), or the class folders in {path} itself",
        )
    if present:
        train, names = _class_files(parts["train"], minimum=1)
        test, test_names = _class_files(parts["test"], minimum=1)
        if test_names != names:
            raise InputError(parts["test"], f"classes {test_names}", f"the classes of {parts['train']}: {names}")
        return {"train": train, "test": test}, names
    files, names = _class_files(path, minimum=2)
    return _split_per_class(files, len(names), seed, test_fraction), names


def _class_files(folder, minimum):
    """`([(file, label)], class_names)` of `folder`'s class subfolders, each with `minimum` images or more."""
    folders = sorted(d for d in os.listdir(folder) if os.path.isdir(os.path.join(folder, d)))
    # a hidden folder (.ipynb_checkpoints, .git) is a tool's, not a class: left out, and said so
    hidden = [d for d in folders if d.startswith(".")]
    if hidden:
        print(f"{folder}: skipping hidden folder(s) {', '.join(hidden)} (not classes)", flush=True)
    names = [d for d in folders if not d.startswith(".")]
    if len(names) < MIN_CLASSES:
        raise InputError(folder, f"{len(names)} class folder(s) {names}", f"at least {MIN_CLASSES} class folders")
    files = []
    for label, name in enumerate(names):
        entries = sorted(
            (e for e in os.scandir(os.path.join(folder, name)) if not e.name.startswith(".")), key=lambda e: e.name
        )
        inner = [e.name for e in entries if e.is_dir()]  # a class is its own files: a folder inside it is not read
        entries = [e.name for e in entries if not e.is_dir()]
        is_image = [os.path.splitext(f)[1].lower() in IMAGE_EXTENSIONS for f in entries]
        images = [f for f, image in zip(entries, is_image) if image]
        others = [f for f, image in zip(entries, is_image) if not image]  # one pass: a class may hold 50,000
        for kind, skipped in (("file(s) that are no image", others), ("folder(s)", inner)):
            if skipped:  # left out, never silently
                shown = ", ".join(skipped[:3]) + (", ..." if len(skipped) > 3 else "")
                print(f"{os.path.join(folder, name)}: skipping {len(skipped)} {kind} ({shown})", flush=True)
        if len(images) < minimum:
            raise InputError(
                os.path.join(folder, name),
                f"{len(images)} image(s)",
                f"at least {minimum} ({', '.join(IMAGE_EXTENSIONS)})",
            )
        files.extend((os.path.join(folder, name, f), label) for f in images)
    return files, names


def _split_per_class(files, num_classes, seed, test_fraction):
    """A seeded split of each class: `test_fraction` of its images (at least one) for testing."""
    rng = np.random.default_rng(seed)
    split = {"train": [], "test": []}
    for label in range(num_classes):
        mine = [item for item in files if item[1] == label]
        order = rng.permutation(len(mine))
        held = max(1, int(test_fraction * len(mine)))
        split["test"].extend(mine[i] for i in sorted(order[:held]))
        split["train"].extend(mine[i] for i in sorted(order[held:]))
    return split


def load_image_folder(path, image_size, seed=0, test_fraction=0.2, layout=None, stream=False):
    """`((x, y), (x_test, y_test), class_names)`: uint8 RGB images `[N, image_size, image_size, 3]`
    (resized bilinearly, as Keras resizes), int32 labels in the order of the sorted class folder names.
    `layout`: the folder's `image_folder_layout`, where it was read already (`survey_image_folder`).
    `stream`: the images as `ImageFiles`, each decoded when a batch reads it, never all at once."""
    layout, names = layout or image_folder_layout(path, seed, test_fraction)
    read = _image_files if stream else _read_images
    return (*(read(layout[split], image_size) for split in ("train", "test")), names)


def _read_images(items, image_size):
    images = np.empty((len(items), image_size, image_size, 3), "uint8")
    for row, (file, _) in enumerate(items):
        images[row] = read_resized(file, image_size)
    return images, np.asarray([label for _, label in items], "int32")


def _image_files(items, image_size):
    return ImageFiles([file for file, _ in items], image_size), np.asarray([label for _, label in items], "int32")


# === What a user's data holds, read once and without its images ===


@dataclasses.dataclass(frozen=True)
class Survey:
    """A user's data as a training run plans with it, every check made, no image or word read.

    Args:
        geometry: an image set's `(image size, channels, classes)`; None for text.
        labels: an image set's `(training labels, test labels)`; None for text.
        files: the files it trains and tests on, whose fingerprint the run records (None: the file itself).
        class_names: what each label stands for (empty: the labels' numbers).
        load_keywords: what its loader takes to read the same data without looking at it again.
        subfolders_are_data: whether a folder added inside it would be read as data (an image folder's class),
            so that no run folder may go there.
    """

    geometry: tuple = None
    labels: tuple = None
    files: tuple = None
    class_names: tuple = ()
    load_keywords: dict = dataclasses.field(default_factory=dict)
    subfolders_are_data: bool = False


def survey_image_folder(path, image_size, seed=0):
    """An image folder's `Survey`: its layout computed once, for the run's checks and its loader."""
    layout, names = image_folder_layout(path, seed=seed)
    labels = tuple(np.array([label for _, label in layout[split]]) for split in ("train", "test"))
    files = tuple(sorted(file for split in layout.values() for file, _ in split))
    load = {"layout": (layout, names)}
    return Survey((image_size, 3, len(names)), labels, files, tuple(names), load, subfolders_are_data=True)


def survey_npz(path, image_size=None, seed=0):
    """An `.npz` file's `Survey`: its arrays' headers and labels (`npz_description`), its class names if it
    holds a `class_names` array."""
    geometry = npz_description(path)
    with np.load(path) as arrays:
        labels = arrays["y_train"].reshape(-1), arrays["y_test"].reshape(-1)
        names = tuple(str(name) for name in arrays["class_names"]) if "class_names" in arrays else ()
    return Survey(geometry, labels, None, names)


def survey_text_folder(path, image_size=None, seed=0):
    """A text folder's `Survey`: its three files, each there."""
    return Survey(files=tuple(text_files(path).values()))


# === NumPy arrays ===


def npz_description(path):
    """`(image_size, channels, num_classes)` of an `.npz` data set, every check made, images not read."""
    if not os.path.isfile(path):
        raise InputError("--data-dir", path, "a .npz file holding x_train, y_train, x_test, y_test")
    try:
        with zipfile.ZipFile(path) as archive:
            shapes = {}
            for name in archive.namelist():
                with archive.open(name) as member:
                    version = np.lib.format.read_magic(member)
                    read = (
                        np.lib.format.read_array_header_1_0
                        if version == (1, 0)
                        else np.lib.format.read_array_header_2_0
                    )
                    shapes[name.removesuffix(".npy")] = read(member)[0]
        with np.load(path) as arrays:
            labels = {key: arrays[key] for key in ("y_train", "y_test") if key in arrays}
    except (zipfile.BadZipFile, ValueError, OSError) as error:
        raise InputError(path, f"a file NumPy cannot read as .npz ({error})", "a .npz file (numpy.savez)") from None
    missing = [key for key in NPZ_KEYS if key not in shapes]
    if missing:
        raise InputError(path, f"arrays {sorted(shapes)}", f"{list(NPZ_KEYS)} (missing {missing})")
    return _check_arrays(path, shapes, labels)


def _check_arrays(path, shapes, labels):
    images = {key: shapes[key] for key in ("x_train", "x_test")}
    for key, shape in images.items():
        if len(shape) not in (3, 4) or shape[1] != shape[2] or (len(shape) == 4 and shape[3] not in (1, 3)):
            raise InputError(
                f"{path}: {key}", f"shape {shape}", "square images [N, size, size] or [N, size, size, 1 or 3]"
            )
    one_image = {key: (*shape[1:3], shape[3] if len(shape) == 4 else 1) for key, shape in images.items()}
    if one_image["x_train"] != one_image["x_test"]:
        raise InputError(f"{path}: x_test", f"images {one_image['x_test']}", f"x_train's {one_image['x_train']}")
    for split in ("train", "test"):
        y, n = labels[f"y_{split}"], images[f"x_{split}"][0]
        if y.reshape(-1).shape != (n,):
            raise InputError(f"{path}: y_{split}", f"shape {y.shape}", f"{n} labels, one per image of x_{split}")
        if not np.issubdtype(y.dtype, np.integer):
            raise InputError(f"{path}: y_{split}", f"labels of dtype {y.dtype}", "integer class ids")
        if len(y) and y.min() < 0:
            raise InputError(f"{path}: y_{split}", f"a label {int(y.min())}", "class ids >= 0")
    classes = int(labels["y_train"].max()) + 1 if labels["y_train"].size else 0
    if len(np.unique(labels["y_train"])) < MIN_CLASSES:
        raise InputError(
            f"{path}: y_train", f"{len(np.unique(labels['y_train']))} class(es)", f"at least {MIN_CLASSES}"
        )
    missing = sorted(set(range(classes)) - set(np.unique(labels["y_train"]).tolist()))
    if missing:  # a head of `classes` outputs would hold classes no image has: ids must be 0..K-1
        shown = ", ".join(map(str, missing[:8])) + (", ..." if len(missing) > 8 else "")
        raise InputError(
            f"{path}: y_train", f"class ids 0..{classes - 1} without {shown}", "ids 0..K-1, each with an image"
        )
    unseen = sorted(set(np.unique(labels["y_test"]).tolist()) - set(np.unique(labels["y_train"]).tolist()))
    if unseen:
        raise InputError(f"{path}: y_test", f"classes {unseen} that y_train lacks", "only classes y_train holds")
    shape = images["x_train"]
    return int(shape[1]), int(shape[3]) if len(shape) == 4 else 1, classes


def load_npz(path, stream=False):
    """`((x_train, y_train), (x_test, y_test))` from an `.npz` file, checked (`npz_description`); grey
    images `[N, H, W]` get a channel. `stream`: the images as `StoredRows` of the arrays memory-mapped where
    they lie in the file (`numpy.savez` stores them uncompressed), each batch read when it is used."""
    npz_description(path)
    with np.load(path) as arrays:
        y, y_test = arrays["y_train"], arrays["y_test"]
        if not stream:
            x, x_test = arrays["x_train"], arrays["x_test"]
    if stream:
        x, x_test = stored_array(path, "x_train"), stored_array(path, "x_test")
    for key, images in (("x_train", x), ("x_test", x_test)):
        first = _first_not_finite(images)
        if first is not None:  # training would only find it as a nan loss, after the data had been read
            raise InputError(f"{path}: {key}", f"{images[first]} at index {first}", "finite pixel values")
    x, x_test = (a[..., None] if a.ndim == 3 else a for a in (x, x_test))
    if stream:
        x, x_test = StoredRows(x), StoredRows(x_test)
    return (x, y.astype("int32").reshape(-1)), (x_test, y_test.astype("int32").reshape(-1))


def _first_not_finite(images, chunk=256):
    """The index of the first pixel of `images` that is not finite, or None; read `chunk` images at a time."""
    if not np.issubdtype(images.dtype, np.floating):
        return None
    for start in range(0, len(images), chunk):
        bad = np.argwhere(~np.isfinite(np.asarray(images[start : start + chunk])))
        if len(bad):
            return (start + int(bad[0][0]), *(int(i) for i in bad[0][1:]))
    return None


# === Text ===


# A byte-level vocabulary's default size: the 256 bytes and <eos>, then 743 merges; a tenth of Penn Treebank's
# 10,000 words, so a CPU-sized model's embedding stays small (`keras-tse train lm --vocab-size` changes it).
BPE_VOCAB_SIZE = 1000


def text_files(path):
    """`{split: file}` of a text folder, each there."""
    if not os.path.isdir(path):
        raise InputError("--data-dir", path, "a folder holding train.txt, valid.txt and test.txt")
    files = {split: os.path.join(path, f"{split}.txt") for split in TEXT_SPLITS}
    missing = [f"{split}.txt" for split, f in files.items() if not os.path.isfile(f)]
    if missing:
        raise InputError("--data-dir", f"{path}, without {', '.join(missing)}", "train.txt, valid.txt and test.txt")
    return files


def load_text_folder(path, tokenizer="word", vocab_size=None, token_dir=None):
    """`({"train", "valid", "test"}: int32 ids, vocabulary)` from `path/{train,valid,test}.txt`.

    `tokenizer="word"`: a `Vocabulary` of every training word and `<unk>` (a valid or test word the training text
    lacks); `"bpe"`: a `BytePairTokenizer` of at most `vocab_size` ids (default `BPE_VOCAB_SIZE`) learned from
    train.txt alone, which reads every split with no unknown id; a tokenizer object: the splits read by it (a
    trained model's own).

    `token_dir`: each split encoded into a token file there (`token_file.encode_splits`) and its ids read
    memory-mapped, so a corpus larger than memory trains; None: the ids in memory."""
    from keras_tse.data.byte_pair import BytePairTokenizer

    files = text_files(path)
    for file in files.values():  # every file checked before any is read for its words
        _check_utf8(file)
    lines = {split: TextLines(file) for split, file in files.items()}
    if tokenizer == "bpe":
        tokenizer = BytePairTokenizer.train(lines["train"], vocab_size or BPE_VOCAB_SIZE)
    if tokenizer == "word":
        train_words = {word for line in lines["train"] for word in line.split()}
        tokenizer = Vocabulary.build(lines["train"], max_size=len(train_words) + 2)  # every training word, and <unk>
    elif isinstance(tokenizer, str):
        raise ValueError(f"`tokenizer` must be 'word', 'bpe' or a tokenizer. Received: tokenizer={tokenizer!r}")
    if token_dir is not None:
        return token_file.encode_splits(token_dir, tokenizer, lines), tokenizer
    return {split: tokenizer.encode(lines[split]) for split in TEXT_SPLITS}, tokenizer


class TextLines:
    """The lines of a UTF-8 text file as `read().splitlines()` splits them (the non-empty ones, or with
    `keep_empty` every one), read again from the file at each pass over them: a corpus is counted and encoded
    line by line, never held whole."""

    def __init__(self, file, chunk=1 << 20, keep_empty=False):
        self.file, self.chunk, self.keep_empty = file, chunk, keep_empty

    def __iter__(self):
        pending = ""
        with open(self.file, encoding="utf-8", newline="") as f:
            for text in iter(lambda: f.read(self.chunk), ""):
                pieces = (pending + text).splitlines(keepends=True)
                last = pieces[-1] if pieces else ""
                # a last piece without its line break, or whose "\r" may be the first half of "\r\n", waits
                unfinished = last.splitlines() == [last] or last.endswith("\r")
                pending = pieces.pop() if pieces and unfinished else ""
                yield from (line.rstrip(LINE_BREAKS) for line in pieces if self._kept(line))
        if self._kept(pending):
            yield pending.rstrip(LINE_BREAKS)

    def _kept(self, line):
        return bool(line.strip()) or (self.keep_empty and bool(line))


LINE_BREAKS = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # what str.splitlines breaks at


def _check_utf8(file, chunk=1 << 20):
    """One line naming the file and the offset of its first byte that is not UTF-8, reading it in chunks."""
    decoder, offset = codecs.getincrementaldecoder("utf-8")(), 0
    with open(file, "rb") as f:
        for block in iter(lambda: f.read(chunk), b""):
            held = len(decoder.getstate()[0])  # the bytes of a character the last block cut
            try:
                decoder.decode(block)
            except UnicodeDecodeError as error:
                at = offset - held + error.start
                raise InputError(file, f"bytes that are not UTF-8 (at byte {at})", "UTF-8 text") from None
            offset += len(block)
        try:
            decoder.decode(b"", final=True)
        except UnicodeDecodeError as error:
            at = offset - len(decoder.getstate()[0]) + error.start
            raise InputError(file, f"bytes that are not UTF-8 (at byte {at})", "UTF-8 text") from None


# === Identity ===


def fingerprint(path, files=None):
    """The first 16 hex digits of a SHA-256 over `files` (default: `path` itself, or every file under
    it), each by its path relative to `path` and its bytes: equal data, equal fingerprint."""
    if files is None:
        files = [path] if os.path.isfile(path) else sorted(_walk(path))
    digest = hashlib.sha256()
    for file in files:
        digest.update(os.path.relpath(file, path).encode() + b"\0")
        with open(file, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                digest.update(block)
    return digest.hexdigest()[:16]


def contents(path, files=None):
    """{name: what it holds} of the data a loader reads: for a `.npz`, each array's dtype, shape and
    digest; else each file (`files`, default every file under `path`) by its path relative to `path`
    and a digest of its bytes. Two equal records, equal data; `run_files.describe_change` names a difference."""
    if os.path.isfile(path) and path.endswith(".npz"):
        with np.load(path) as arrays:
            return {key: _array_record(arrays[key]) for key in sorted(arrays.files)}
    if files is None:
        files = [path] if os.path.isfile(path) else sorted(_walk(path))
    return {
        os.path.relpath(file, path) if file != path else os.path.basename(path): fingerprint(file) for file in files
    }


def _array_record(array):
    return f"{array.dtype}{list(array.shape)} {hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()[:16]}"


def _walk(folder):
    for root, dirs, names in os.walk(folder):
        dirs.sort()
        yield from (os.path.join(root, name) for name in sorted(names))
