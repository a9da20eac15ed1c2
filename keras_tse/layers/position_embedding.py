import keras
from keras import ops

from keras_tse import _checks
from keras_tse.layers import initializers
from keras_tse.layers._sequence_layer import SequenceLayer


@keras.saving.register_keras_serializable(package="keras_tse")
class PositionEmbedding(SequenceLayer):
    """Learned absolute positions added to a sequence: `x[:, t] + p_t`, for `t < max_length`.

    The position table of GPT-style decoders (Radford et al. 2019's `wpe`); the ViT's positions live
    in `PatchEmbedding`, Transformer-XL's are relative (`RelativeAttention`). A sequence shorter than
    `max_length` reads the first rows, so a model trained on `max_length` tokens also runs on fewer.

    Args:
        max_length: int, the longest sequence, the rows of the table.
        initializer: weight scheme of the table, one of `keras_tse.layers.initializers.INITIALIZERS`,
            drawn as that scheme draws an embedding table. Defaults to `"transformer_xl"`
            (N(0, 0.02), GPT-2's too).

    Call arguments:
        inputs: `[batch, T, hidden]` with `T <= max_length`.
        start: int, the position of the first of the `T` (decoding adds rows `start` to
            `start + T - 1`). Defaults to `0`.

    Returns:
        `[batch, T, hidden]`.

    Example:

    >>> layer = keras_tse.layers.PositionEmbedding(128)
    >>> layer(np.zeros((2, 16, 64), "float32")).shape  # (2, 16, 64)
    """

    def __init__(self, max_length, initializer="transformer_xl", **kwargs):
        super().__init__(**kwargs)
        self.max_length = _checks.positive_int("max_length", max_length)
        self.initializer = initializers.check(initializer)

    def build(self, input_shape):
        _checks.rank3(self, input_shape)
        if input_shape[1] is not None and input_shape[1] > self.max_length:
            raise ValueError(
                f"{self.name} holds {self.max_length} positions. Received: inputs.shape={tuple(input_shape)}"
            )
        self.positions = self.add_weight(
            name="positions",
            shape=(self.max_length, input_shape[-1]),
            initializer=initializers.embedding_table(self.initializer),
        )
        self.built = True

    def call(self, inputs, start=0):
        length, hidden = ops.shape(inputs)[1], ops.shape(self.positions)[1]
        # a slice at `start`, which may be a tensor (a compiled decoding step's position)
        rows = (
            self.positions[:length]
            if isinstance(start, int) and start == 0
            else ops.slice(ops.convert_to_tensor(self.positions), (start, 0), (length, hidden))
        )
        return inputs + ops.cast(rows[None], inputs.dtype)

    def get_config(self):
        return {**super().get_config(), "max_length": self.max_length, "initializer": self.initializer}
