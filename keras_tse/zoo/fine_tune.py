"""A trained ViT made ready to fine-tune: a fresh classifier head, the pooled features, another image
size or another number of channels, every other weight kept bit for bit (timm's `create_model(pretrained=True,
num_classes=N, in_chans=C)`, `resample_abs_pos_embed` and `adapt_input_conv`, KerasHub's
`from_preset(num_classes=N)`).

The head rule, one for Python and the command line (`new_head`): a fresh head whenever the task's classes
are not the preset's: another count, or other classes said so (`new_head=True`; the command line says so
for any data set but the preset's own); the trained head otherwise."""

import math

import keras
import numpy as np
from keras import ops

from keras_tse._weights import assign_copy
from keras_tse.layers import initializers

# What a model with trained weights may change at load (`from_preset`): everything else is the weights'.
ADAPTABLE = ("num_classes", "image_size", "channels")


def new_head(preset_classes, num_classes, other_classes=False):
    """Whether a fine-tuned model gets a fresh head (the rule above; `num_classes` None: the preset's count)."""
    return other_classes or (num_classes is not None and num_classes != preset_classes)


def adapt_input_channels(kernel, channels):
    """A patch projection's kernel `[p, p, C, hidden]` for images of `channels` channels, as timm's
    `adapt_input_conv` does for colour to grey (summed over the colour channels); grey to `channels` is the
    kernel repeated on each channel over `channels` (an image of equal channels gives the grey image's
    features); colour to other counts repeats the colour kernel, scaled by 3 / `channels` (timm's rule)."""
    have = kernel.shape[2]
    if channels == have:
        return kernel
    if channels == 1:
        return ops.sum(kernel, axis=2, keepdims=True)
    if have == 1:
        return ops.repeat(kernel, channels, axis=2) / channels
    if have != 3:
        raise ValueError(f"A {have}-channel kernel adapts to 1 channel only. Received: channels={channels}")
    repeated = ops.tile(kernel, (1, 1, -(-channels // 3), 1))[:, :, :channels]
    return repeated * (3.0 / channels)


def resample_positions(table, old_grid, new_grid, class_tokens=1):
    """The position table `[1, class_tokens + old_grid**2, hidden]` for a `new_grid` x `new_grid` patch
    grid: the patch rows resized bicubically over the grid as timm resamples (PyTorch's bicubic, a = -0.75,
    half-pixel centres, the border repeated), the class token's rows kept. The same numbers on every backend:
    Keras's own bicubic differs between them (JAX's and TensorFlow's kernel has a = -0.5)."""
    hidden = table.shape[-1]
    kept, patches = table[:, :class_tokens], table[:, class_tokens:]
    grid = ops.reshape(patches, (old_grid, old_grid, hidden))
    weights = ops.convert_to_tensor(_bicubic_weights(old_grid, new_grid), dtype=table.dtype)
    resized = ops.einsum("ia,jb,abh->ijh", weights, weights, grid)  # separable: rows, then columns
    return ops.concatenate([kept, ops.reshape(resized, (1, new_grid * new_grid, hidden))], axis=1)


def _bicubic_weights(old, new, a=-0.75):
    """`[new, old]`: output position i as a mix of the four inputs around its centre's source position."""
    weights = np.zeros((new, old))
    for i in range(new):
        source = (i + 0.5) * old / new - 0.5
        base = math.floor(source)
        t = source - base
        for offset, distance in zip((-1, 0, 1, 2), (1 + t, t, 1 - t, 2 - t)):
            weights[i, min(max(base + offset, 0), old - 1)] += _cubic(distance, a)
    return weights


def _cubic(x, a):
    """Keys's cubic convolution kernel at distance |x| <= 2."""
    if x <= 1:
        return ((a + 2) * x - (a + 3)) * x * x + 1
    return ((a * x - 5 * a) * x + 8 * a) * x - 4 * a


def with_head(trained, num_classes, initializer="torch"):
    """`trained` (a classifier whose last layer is its `head`) on its own pooled features: `num_classes=0`
    returns them `[batch, hidden]`; another count gets a fresh head of that many classes."""
    from keras_tse.zoo.preprocessing import replayed

    head = trained.get_layer("head")
    inputs = keras.Input(batch_shape=trained.input.shape, dtype=trained.input.dtype, name=trained.input.name)
    if num_classes == 0:
        features = replayed(
            trained, inputs, lambda layer, *args, **kw: args[0] if layer is head else layer(*args, **kw)
        )
        return keras.Model(inputs, features.output, name=f"{trained.name}_features")
    fresh = keras.layers.Dense(
        num_classes,
        name="head",
        dtype="float32",  # float32 logits under a mixed policy, as the builder's head
        kernel_initializer=initializers.kernel_initializer(initializer),
        bias_initializer=initializers.bias_initializer(initializer, head.kernel.shape[0]),
    )
    swapped = replayed(trained, inputs, layers=lambda layer: fresh if layer is head else layer)
    return keras.Model(inputs, swapped.output, name=f"{trained.name}_head{num_classes}")


def adapted(trained, build, config, image_size, channels):
    """`build(**config)` at `image_size` and `channels`, every weight of `trained` copied in by layer name but
    the position table, resampled to the new patch grid, and the patch projection's kernel, adapted to the
    channels (`adapt_input_channels`). The head is `trained`'s (`config` its class count); a fresh one comes
    after, from `with_head`."""
    model = build(**{**config, "image_size": image_size, "channels": channels})  # it checks the size's grid
    patch = config["patch_size"]
    for layer in model.layers:
        if not layer.weights:
            continue
        source = trained.get_layer(layer.name)
        if layer.name == "patch_embedding":
            tokens = int(source.use_class_token)
            table = resample_positions(
                source.position_embedding, source.image_size // patch, image_size // patch, tokens
            )
            assign_copy(layer.position_embedding, table)
            assign_copy(layer.projection.kernel, adapt_input_channels(source.projection.kernel, channels))
            adapted_here = (layer.position_embedding, layer.projection.kernel)
            pairs = [(w, v) for w, v in zip(layer.weights, source.weights) if not any(w is a for a in adapted_here)]
        else:
            pairs = list(zip(layer.weights, source.weights))
        for target, value in pairs:
            assign_copy(target, value)
    return model
