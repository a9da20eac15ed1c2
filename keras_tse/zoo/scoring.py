"""A trained image classifier scored on labelled raw images, as timm's `validate.py` reports it: accuracy,
mean cross-entropy, each class's accuracy (recall) and the confusion matrix; `keras-tse evaluate` prints and
writes it, and the shipped presets' recorded accuracies are read the same way.

The model takes raw pixels (its `ImagePreprocessor` first) and gives logits (the zoo's heads); the loss is
the softmax cross-entropy of those logits in float64, the labels' mean, the same number `model.evaluate`
gives with `SparseCategoricalCrossentropy(from_logits=True)` up to float32 rounding.
"""

import numpy as np

from keras_tse.zoo.preprocessing import probabilities


def score(model, images, labels, batch_size=64, class_names=(), progress=None):
    """`model` on labelled `images`: a dict of `images`, `accuracy`, `loss`, `per_class` (each class's name, its
    images and the fraction of them right) and `confusion` (`[true][predicted]` counts)."""
    labels = np.asarray(labels).reshape(-1).astype("int64")
    probs = probabilities(model, images, batch_size, progress)
    classes = probs.shape[-1]
    if len(labels) and (labels.min() < 0 or labels.max() >= classes):
        raise ValueError(f"Labels run from {labels.min()} to {labels.max()}; the model has {classes} classes.")
    predicted = probs.argmax(axis=-1)
    confusion = np.zeros((classes, classes), "int64")
    np.add.at(confusion, (labels, predicted), 1)
    names = list(class_names) or [str(i) for i in range(classes)]
    per_class = [
        {
            "class": names[i],
            "images": int(confusion[i].sum()),
            "accuracy": _fraction(confusion[i, i], confusion[i].sum()),
        }
        for i in range(classes)
    ]
    loss = -np.log(np.maximum(probs[np.arange(len(labels)), labels], np.finfo("float64").tiny))
    return {
        "images": int(len(labels)),
        "accuracy": _fraction(int(np.trace(confusion)), len(labels)),
        "loss": float(loss.mean()) if len(labels) else None,
        "per_class": per_class,
        "confusion": confusion.tolist(),
    }


def _fraction(part, whole):
    return float(part) / float(whole) if whole else None


def confusion_figure(result, path, title):
    """The confusion matrix of `score`'s `result` as a PNG at `path`: rows the true class, columns the predicted,
    each row as fractions of its images."""
    from keras_tse import run_files

    counts = np.asarray(result["confusion"], "float64")
    rows = counts / np.maximum(counts.sum(axis=1, keepdims=True), 1)
    names = [entry["class"] for entry in result["per_class"]]
    size = max(4.0, 0.45 * len(names) + 2)
    fig, (ax,) = run_files.new_figure((size, size))
    image = ax.imshow(rows, cmap="Blues", vmin=0, vmax=1)
    ax.set_xticks(range(len(names)), names, rotation=90)
    ax.set_yticks(range(len(names)), names)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(title)
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04)
    run_files.save_figure(fig, path)
