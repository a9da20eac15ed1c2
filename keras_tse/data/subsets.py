"""Subsets of a labelled training split, drawn from a seed: a class-balanced subset (`--train-size`,
`--test-size`) and the validation examples held out of the training split (`--validation-fraction`)."""

import numpy as np

from keras_tse._checks import InputError


def balanced_subset(labels, size, seed, flag="--train-size"):
    """Indices of `size` examples, the same number from each class (seeded), in their original order."""
    classes, counts = np.unique(labels, return_counts=True)
    most = len(classes) * int(counts.min())  # every class gives as many as its smallest has
    if size % len(classes) or size > most:
        raise InputError(
            flag, size, f"a multiple of {len(classes)} (the classes) up to {most} (balanced, of {len(labels)})"
        )
    rng = np.random.default_rng(seed)
    per_class = size // len(classes)
    chosen = [rng.choice(np.nonzero(labels == c)[0], per_class, replace=False) for c in classes]
    return np.sort(np.concatenate(chosen))


def validation_split(labels, fraction, seed, multiple=1):
    """A boolean mask of the training examples held out for validation: `fraction` of each class of two
    images or more (at least one, rounded; a class of one image trains on it), seeded; None for `fraction` 0
    or where no class can spare an image. The count held out is a multiple of `multiple` (the devices a
    batch splits over): taken from the largest classes or given to them, so that neither split's batches
    stop splitting evenly where the whole split's did."""
    classes, sizes = np.unique(labels, return_counts=True)
    spare = sizes >= 2
    if not fraction or not spare.any():
        return None
    counts = np.where(spare, np.clip(np.round(fraction * sizes).astype(int), 1, sizes - 1), 0)
    fewest = -(-int(spare.sum()) // multiple) * multiple  # one a class that can spare it, to a multiple
    target = max(fewest, counts.sum() // multiple * multiple)
    while counts.sum() != target:  # one at a time, where the most are left to train on (or held out)
        step = 1 if counts.sum() < target else -1
        room = np.where(spare, sizes - 1 - counts if step > 0 else counts - 1, 0)
        if room.max() < 1:
            raise InputError("--validation-fraction", fraction, f"0, or a split of {target} training images")
        counts[np.argmax(room)] += step
    rng, held = np.random.default_rng(seed), np.zeros(len(labels), bool)
    for label, count in zip(classes, counts):
        held[rng.choice(np.nonzero(labels == label)[0], count, replace=False)] = True
    return held
