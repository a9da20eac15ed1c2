"""The input preparation a trained image model carries with it (timm's data config, KerasHub's
`ImageConverter`): raw pixels in, the normalised images its first layer was trained on out."""

import keras
from keras import ops

from keras_tse import _checks

# ITU-R 601-2 luma, Pillow's convert("L"): colour to grey as a grey data set's images were made
LUMA = (0.299, 0.587, 0.114)


@keras.saving.register_keras_serializable(package="keras_tse")
class ImagePreprocessor(keras.layers.Layer):
    """Raw images `[batch, height, width, c]` (any size; `uint8` or floats in `value_range`; c 1, 3, 4 or the
    model's) to `[batch, image_size, image_size, channels]` normalised as in training: channels converted (grey
    repeated; colour to grey by luma; RGBA's alpha dropped), resized bilinearly where the size differs, then
    `(x / value_range[1] - mean) / std` per channel (the training pipeline's formula, `keras_tse.data.normalized`).

    Where `value_range` reaches past 1, an image whose largest value is at most 1 is read as one already scaled to
    [0, 1] (`x / 255`, what most pipelines produce) and multiplied by `value_range[1]` first: as stored, such an
    image would be all but black, and read as stored it would be classified as one (every such image as one class).

    It holds no weight: it is the model's record of what its inputs were, so the model takes images as
    they come, after `save`, `export` and `from_preset` alike.

    Args:
        image_size: side of the square images the model was trained on.
        channels: their channels.
        mean, std: per-channel statistics of the training images scaled to [0, 1] (one value: every channel).
        value_range: `(low, high)` of the raw pixels. Defaults to `(0, 255)`.
        class_names: the class each output stands for, in order (`keras_tse.zoo.classify` reads them);
            `()` where unknown. It computes nothing.
    """

    def __init__(self, image_size, channels, mean, std, value_range=(0, 255), class_names=(), **kwargs):
        super().__init__(**kwargs)
        self.image_size = _checks.positive_int("image_size", image_size)
        self.channels = _checks.positive_int("channels", channels)
        self.mean = _per_channel("mean", mean, channels)
        self.std = _per_channel("std", std, channels)
        if min(self.std) <= 0:
            raise ValueError(f"`std` must be positive. Received: std={std!r}")
        self.value_range = tuple(float(v) for v in value_range)
        if len(self.value_range) != 2 or self.value_range[1] <= self.value_range[0]:
            raise ValueError(
                f"`value_range` must be (low, high) with low < high. Received: value_range={value_range!r}"
            )
        self.class_names = tuple(str(name) for name in class_names)

    def call(self, images):
        x = _in_value_range(ops.cast(images, "float32"), self.value_range[1])
        x = _to_channels(x, self.channels)
        if tuple(x.shape[1:3]) != (self.image_size, self.image_size):
            # no antialiasing: TensorFlow's (ScaleAndTranslate) does not compile with XLA, and a model loaded
            # with its jit_compile predicts through XLA; at a whole factor, bilinear averages the pixels it spans
            x = ops.image.resize(x, (self.image_size, self.image_size), interpolation="bilinear", antialias=False)
        mean = ops.convert_to_tensor(self.mean, "float32")
        std = ops.convert_to_tensor(self.std, "float32")
        return ops.cast((x / self.value_range[1] - mean) / std, self.compute_dtype)

    def compute_output_shape(self, input_shape):
        return (input_shape[0], self.image_size, self.image_size, self.channels)

    def get_config(self):
        return {
            **super().get_config(),
            "image_size": self.image_size,
            "channels": self.channels,
            "mean": list(self.mean),
            "std": list(self.std),
            "value_range": list(self.value_range),
            "class_names": list(self.class_names),
        }


def _in_value_range(x, high):
    """Each image of `x` in [0, high]: one whose values are all at most 1 scaled from [0, 1] (where high > 1)."""
    if high <= 1:
        return x
    peak = ops.max(x, axis=(1, 2, 3), keepdims=True)
    return ops.where(peak <= 1.0, x * high, x)


def _per_channel(name, values, channels):
    try:
        values = [float(v) for v in values]
    except TypeError:  # one number: every channel's
        values = [float(values)]
    if len(values) == 1:
        values = values * channels
    if len(values) != channels:
        raise ValueError(f"`{name}` must hold 1 or {channels} values. Received: {name}={values!r}")
    return tuple(values)


def _to_channels(x, channels):
    have = x.shape[-1]
    if have is None and channels in (1, 3):
        return _to_channels_unknown(x, channels)
    if have == channels:
        return x
    if have == 4 and channels in (1, 3):  # RGBA: the colour, its alpha dropped
        x, have = x[..., :3], 3
    if have == 1:
        return ops.repeat(x, channels, axis=-1)
    if have == 3 and channels == 1:
        return ops.sum(x * ops.convert_to_tensor(LUMA, x.dtype), axis=-1, keepdims=True)
    if have == channels:
        return x
    raise ValueError(
        f"A model of {channels}-channel images takes images of 1, 3, 4 or {channels} channels. Received: images "
        f"of shape {tuple(x.shape)}"
    )


def _to_channels_unknown(x, channels):
    """`_to_channels` where the count is not known when the call is traced (TensorFlow relaxes a dimension
    that differed between calls): grey or colour made colour by broadcasting, RGBA's alpha dropped, then
    luma for a grey model."""
    colour = x[..., :3] * ops.ones((3,), x.dtype)
    if channels == 3:
        return colour
    return ops.sum(colour * ops.convert_to_tensor(LUMA, x.dtype), axis=-1, keepdims=True)
