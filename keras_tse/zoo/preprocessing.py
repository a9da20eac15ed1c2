"""An image model with its input preparation inside it (`ImagePreprocessor` as its first layer), and the
class names it answers with: `with_preprocessing`, `preprocessor_of`, `classify`."""

import keras
import numpy as np

from keras_tse.layers.image_preprocessor import ImagePreprocessor


def preprocessor_of(model):
    """The model's `ImagePreprocessor` (its first layer past the input), or None."""
    first = [layer for layer in model.layers if not isinstance(layer, keras.layers.InputLayer)][:1]
    return first[0] if first and isinstance(first[0], ImagePreprocessor) else None


def core_of(model):
    """The model without its `ImagePreprocessor`: normalised images in (the model itself where it has none)."""
    preprocessor = preprocessor_of(model)
    if preprocessor is None:
        return model
    inputs = keras.Input((preprocessor.image_size,) * 2 + (preprocessor.channels,), name="images")

    def skipped(operation, *args, **kwargs):
        return args[0] if operation is preprocessor else operation(*args, **kwargs)

    return replayed(model, inputs, skipped)


def with_preprocessing(model, preprocessor):
    """`model` (normalised images `[batch, size, size, channels]` in; with or without a preprocessor of its
    own, which this one replaces) taking raw images through `preprocessor`: one flat functional model whose
    layers are `model`'s own (no weight copied), its name kept. Its input takes any height and width."""
    core = core_of(model)
    inputs = keras.Input((None, None, preprocessor.channels), name="images")
    prepared = preprocessor(inputs)

    def fed(operation, *args, **kwargs):
        return operation(*[prepared if arg is inputs else arg for arg in args], **kwargs)

    return replayed(core, inputs, fed)


def replayed(model, inputs, call=None, layers=lambda layer: layer):
    """Functional `model`'s graph called again from `inputs` (Keras's `clone_model`), each layer `layers(layer)`
    (itself by default: its weights shared, none copied), called through `call(layer, *args, **kwargs)` if given."""
    return keras.models.clone_model(model, input_tensors=inputs, clone_function=layers, call_function=call)


def dataset_preprocessor(dataset):
    """The `ImagePreprocessor` of a registered image set (`keras_tse.data.get_dataset`): its size, channels,
    statistics, value range and class names."""
    from keras_tse import data

    spec = data.get_dataset(dataset)
    return ImagePreprocessor(
        spec.image_size, spec.channels, **spec.normalization(), class_names=spec.class_names, name="image_preprocessor"
    )


def preprocessor_like(preprocessor, **changes):
    """A new `ImagePreprocessor` with `preprocessor`'s settings but `changes` (one statistic a channel for a
    grey model's statistics given to colour images: the grey value on each channel)."""
    config = {**preprocessor.get_config(), **changes}
    if len(config["mean"]) != config["channels"]:
        config["mean"] = [float(np.mean(config["mean"]))]
        config["std"] = [float(np.mean(config["std"]))]
    return ImagePreprocessor.from_config(config)


def classify(model, images, batch_size=64):
    """The class name the model gives each image: `images` one array `[batch, height, width(, c)]` or a list
    of images `[height, width(, c)]` of any sizes (raw pixels, as `ImagePreprocessor` takes them). Needs a
    model that carries its class names (a trained preset, a run's checkpoint or export)."""
    names = class_names_of(model)
    return [names[i] for i in np.argmax(probabilities(model, images, batch_size), axis=-1)]


def class_names_of(model):
    """The class names `model` carries (its `ImagePreprocessor`'s); one line for a model without them."""
    preprocessor = preprocessor_of(model)
    if preprocessor is None or not preprocessor.class_names:
        raise ValueError(
            f"Model {model.name!r} carries no class names (no ImagePreprocessor with class_names as its first "
            "layer); expected a trained preset or a model a `keras-tse train vit` run saved"
        )
    return list(preprocessor.class_names)


def probabilities(model, images, batch_size=64, progress=None):
    """The softmax of `model`'s logits (the zoo's heads give logits), `[n, classes]` float64, for `images` as
    `classify` takes them; `progress(done, total)` after each batch, where given."""
    preprocessor = preprocessor_of(model)
    if isinstance(images, np.ndarray) and images.ndim in (3, 4):
        arrays = [_with_channel_axis(images)]
        groups = [np.arange(len(images))]
    else:
        singles = [_with_channel_axis(np.asarray(image)[None]) for image in images]
        shapes = sorted({x.shape for x in singles})  # one prediction per image size: each compiles once
        groups = [np.asarray([i for i, x in enumerate(singles) if x.shape == shape], "int64") for shape in shapes]
        arrays = [np.concatenate([singles[i] for i in group]) for group in groups]
    if preprocessor is not None:
        check_value_range(preprocessor, arrays)
    total = sum(map(len, groups))
    found, done = np.zeros((total, model.output.shape[-1])), 0
    for group, array in zip(groups, arrays):
        for start in range(0, len(array), batch_size):
            logits = np.asarray(model.predict(array[start : start + batch_size], verbose=0), "float64")
            exp = np.exp(logits - logits.max(axis=-1, keepdims=True))
            found[group[start : start + batch_size]] = exp / exp.sum(axis=-1, keepdims=True)
            done += len(logits)
            if progress is not None:
                progress(done, total)
    return found


def check_value_range(preprocessor, arrays):
    """Refuse, in one line, pixels outside the range `preprocessor` records (0-255 images given to a model of
    values 0..16, say), which it would read as brighter than anything it was trained on. Floats in [0, 1] are
    taken: the preprocessor reads them as scaled (`ImagePreprocessor`)."""
    low, high = preprocessor.value_range
    arrays = [np.asarray(a) for a in arrays if np.size(a)]
    if not arrays:
        return
    least, most = min(float(a.min()) for a in arrays), max(float(a.max()) for a in arrays)
    if least < low or most > high:
        raise ValueError(
            f"The images hold values in [{least:g}, {most:g}]; this model takes pixels in "
            f"[{low:g}, {high:g}] (its ImagePreprocessor's value_range), or floats in [0, 1]"
        )


def _with_channel_axis(batch):
    """A batch of grey images `[batch, height, width]` given its channel axis."""
    return batch[..., None] if batch.ndim == 3 else batch
