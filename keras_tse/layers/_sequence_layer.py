"""Base of the layers that map `[batch, tokens, dim]` to the same shape and pass a padding mask on."""

import keras


class SequenceLayer(keras.layers.Layer):
    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True

    def compute_output_shape(self, input_shape):
        return input_shape

    def compute_mask(self, inputs, mask=None):
        return mask
