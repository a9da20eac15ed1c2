"""The content check every image loader applies, whatever the source (files, pickle, npz or TFDS)."""

import numpy as np


def checked(split, counts, name, source, image_shape):
    """The split, after checking image shape and dtype, label range and the per-class counts of the
    standard release (`counts`: {"train": [...], "test": [...]})."""
    for (x, y), part in zip(split, ("train", "test")):
        if x.shape[1:] != image_shape or x.dtype != np.uint8 or len(x) != len(y):
            raise ValueError(
                f"{name} {part} from {source} has images {x.shape} {x.dtype} and {len(y)} labels; "
                f"expected uint8 [N, {', '.join(map(str, image_shape))}] with one label each."
            )
        found = np.bincount(y, minlength=10).tolist() if y.min() >= 0 and y.max() <= 9 else sorted(set(y.tolist()))
        if found != counts[part]:
            raise ValueError(
                f"{name} {part} from {source} is not the standard release: per-class counts {found}, "
                f"expected {counts[part]}. Fetch the files again."
            )
    return split
