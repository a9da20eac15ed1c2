import keras

from keras_tse import _checks


@keras.saving.register_keras_serializable(package="keras_tse")
class ClassTokenPooling(keras.layers.Layer):
    """The ViT's pooling: the class token's state, `x[:, 0]` (Dosovitskiy et al. 2021, eq. 4).

    `zoo.vit` slices the class token inside its functional graph; this layer does the same as a
    registered layer, so a ViT composed with `keras.Sequential` from `PatchEmbedding`, the blocks, a
    LayerNorm and a `Dense` head needs no `Lambda` and its `.keras` file loads in safe mode.

    Call arguments:
        inputs: tokens `[batch, tokens, hidden]`, class token first (`PatchEmbedding`'s layout).

    Returns:
        `[batch, hidden]`.

    Example:

    >>> model = keras.Sequential([
    ...     keras.Input((32, 32, 3)),
    ...     keras_tse.layers.PatchEmbedding(32, 4, 192),
    ...     *[keras_tse.layers.PostNormBlock(8, 384, deescalate="output") for _ in range(12)],
    ...     keras.layers.LayerNormalization(epsilon=1e-5),
    ...     keras_tse.layers.ClassTokenPooling(),
    ...     keras.layers.Dense(10),
    ... ])
    """

    def call(self, inputs):
        return inputs[:, 0]

    def build(self, input_shape):
        _checks.rank3(self, input_shape)
        self.built = True

    def compute_output_shape(self, input_shape):
        return (input_shape[0], input_shape[-1])
