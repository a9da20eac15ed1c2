import keras
from keras import ops

from keras_tse.layers.de_escalation import DeEscalation


@keras.saving.register_keras_serializable(package="keras_tse")
class DeEscalatedBlock(keras.layers.Layer):
    """A bidirectional Transformer block someone else wrote, followed by eq. (21) on its output (the
    paper's place for an encoder, Sec. 3.3): `Y = (I - tau 11^T/n) block(X)`, the token mean over the real
    tokens where the block is called with a `padding_mask` (KerasHub's keyword). `keras_tse.deescalate`
    wraps a model's blocks so; the block keeps its own weights and names.

    Args:
        block: the block, a `keras.layers.Layer` taking `[batch, tokens, hidden]`.
        tau, trainable_tau: eq. (21)'s options (`keras_tse.layers.DeEscalation`).
    """

    def __init__(self, block, tau=1.0, trainable_tau=False, **kwargs):
        super().__init__(**kwargs)
        self.supports_masking = True  # a Keras mask on the tokens passes through, as the block's own
        self.block = block
        self.de_escalation = DeEscalation(tau=tau, trainable_tau=trainable_tau, name="deescalation")

    def build(self, input_shape):
        if not self.block.built:  # a block loaded from its config: built as its own build says
            self.block.build(input_shape)
        self.de_escalation.build(input_shape)
        self.built = True

    def call(self, inputs, *args, **kwargs):
        outputs = self.block(inputs, *args, **kwargs)
        mask = kwargs.get("padding_mask")
        return self.de_escalation(outputs, mask=None if mask is None else ops.cast(mask, "bool"))

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(),
            "block": keras.saving.serialize_keras_object(self.block),
            "tau": self.de_escalation.tau,
            "trainable_tau": self.de_escalation.trainable_tau,
        }

    @classmethod
    def from_config(cls, config):
        config = dict(config)
        config["block"] = keras.saving.deserialize_keras_object(config["block"])
        return cls(**config)
