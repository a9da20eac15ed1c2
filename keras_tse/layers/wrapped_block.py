import keras
from keras import ops


class WrappedBlock(keras.layers.Layer):
    """A bidirectional Transformer block someone else wrote, followed by a transform of its output or changed
    inside: the base of `DeEscalatedBlock`, `ContraNormBlock` and `CentredAttentionBlock`. A subclass makes the
    transform (a layer taking the block's outputs and a token `mask`) and returns it from the `transform`
    property; the block's `padding_mask` (KerasHub's keyword) is its mask. The block keeps its own weights and
    names; `keras_tse.deescalate` wraps a model's blocks so, and the measures read a wrapped block as a block.

    Args:
        block: the block, a `keras.layers.Layer` taking `[batch, tokens, hidden]`.
    """

    def __init__(self, block, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True  # a Keras mask on the tokens passes through, as the block's own
        self.block = block

    @property
    def transform(self):
        """The layer applied to the block's outputs, or `None` (a subclass that changes the block inside)."""
        return None

    def build(self, input_shape):
        if not self.block.built:  # a block loaded from its config: built as its own build says
            self.block.build(input_shape)
        if self.transform is not None:
            self.transform.build(input_shape)
        self.built = True

    def call(self, inputs, *args, **kwargs):
        outputs = self.block(inputs, *args, **kwargs)
        if self.transform is None:
            return outputs
        mask = kwargs.get("padding_mask")
        return self.transform(outputs, mask=None if mask is None else ops.cast(mask, "bool"))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "block": keras.saving.serialize_keras_object(self.block)}

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["block"] = keras.saving.deserialize_keras_object(config["block"])
        return cls(**config)
