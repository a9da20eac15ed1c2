"""A user's own data, the Keras way, for the recipes' run folders, resume and cards.

- `load_image_folder(path, image_size)`: one subfolder per class, as
  `keras.utils.image_dataset_from_directory` reads it; `path/train/` and `path/test/` when both are
  there, else `path` itself split with that function's seeded validation split.
- `load_npz(path)`: NumPy arrays `x_train`, `y_train`, `x_test`, `y_test` in one `.npz` file.
- `load_text_folder(path)`: `train.txt`, `valid.txt`, `test.txt`, one line a sentence (or a paragraph),
  words split on whitespace; the vocabulary is the training file's, `<unk>` for the other words.
"""

import os

import keras
import numpy as np

from keras_tse.data.text import Vocabulary

NPZ_KEYS = ("x_train", "y_train", "x_test", "y_test")
TEXT_SPLITS = ("train", "valid", "test")


def load_image_folder(path, image_size, seed=0, test_fraction=0.2):
    """`((x, y), (x_test, y_test), class_names)`: uint8 RGB images `[N, image_size, image_size, 3]`
    (resized), int32 labels in the order of the sorted class folder names."""
    if not os.path.isdir(path):
        raise FileNotFoundError(f"No image folder at {path} (one subfolder per class). Received: --data-dir {path}")
    read = dict(image_size=(image_size, image_size), batch_size=None, label_mode="int", color_mode="rgb")
    split = [os.path.join(path, part) for part in ("train", "test")]
    if all(os.path.isdir(part) for part in split):
        train, test = (keras.utils.image_dataset_from_directory(part, shuffle=False, **read) for part in split)
    else:
        both = dict(validation_split=test_fraction, subset="both", shuffle=True, seed=seed)
        train, test = keras.utils.image_dataset_from_directory(path, **both, **read)
    if train.class_names != test.class_names:
        raise ValueError(f"{path}: train/ and test/ have other classes: {train.class_names} and {test.class_names}")
    return _arrays(train), _arrays(test), list(train.class_names)


def _arrays(dataset):
    images, labels = zip(*((image.numpy(), label.numpy()) for image, label in dataset))
    return np.clip(np.rint(np.stack(images)), 0, 255).astype("uint8"), np.asarray(labels, "int32")


def load_npz(path):
    """`((x_train, y_train), (x_test, y_test))` from an `.npz` file; grey images `[N, H, W]` get a channel."""
    if not os.path.isfile(path):
        raise FileNotFoundError(f"No .npz file at {path}. Received: --data-dir {path}")
    with np.load(path) as arrays:
        missing = [key for key in NPZ_KEYS if key not in arrays]
        if missing:
            raise ValueError(f"{path} lacks {missing}: it must hold {list(NPZ_KEYS)}. It holds {sorted(arrays)}")
        x, y, x_test, y_test = (arrays[key] for key in NPZ_KEYS)
    x, x_test = (a[..., None] if a.ndim == 3 else a for a in (x, x_test))
    if x.ndim != 4 or x.shape[1] != x.shape[2] or x.shape[1:] != x_test.shape[1:]:
        raise ValueError(
            f"{path}: x_train and x_test must be square images [N, size, size(, channels)] of one shape. "
            f"Received: x_train {x.shape}, x_test {x_test.shape}"
        )
    return (x, y.astype("int32").reshape(-1)), (x_test, y_test.astype("int32").reshape(-1))


def load_text_folder(path):
    """`({"train", "valid", "test"}: int32 ids, Vocabulary)` from `path/{train,valid,test}.txt`."""
    files = {split: os.path.join(path, f"{split}.txt") for split in TEXT_SPLITS}
    missing = [f for f in files.values() if not os.path.isfile(f)]
    if missing:
        raise FileNotFoundError(f"A text folder holds train.txt, valid.txt and test.txt; missing {missing}")
    lines = {}
    for split, file in files.items():
        with open(file, encoding="utf-8") as f:
            lines[split] = [line for line in f.read().splitlines() if line.strip()]
    train_words = {word for line in lines["train"] for word in line.split()}
    vocab = Vocabulary.build(lines["train"], max_size=len(train_words) + 2)  # every training word, and <unk>
    return {split: vocab.encode(lines[split]) for split in TEXT_SPLITS}, vocab
