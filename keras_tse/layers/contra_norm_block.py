import keras

from keras_tse.layers.contra_norm import ContraNorm
from keras_tse.layers.wrapped_block import WrappedBlock


@keras.saving.register_keras_serializable(package="keras_tse")
class ContraNormBlock(WrappedBlock):
    """A bidirectional Transformer block someone else wrote, followed by ContraNorm on its output
    (`keras_tse.layers.ContraNorm`, Guo et al. 2023): `LN(Y - s softmax(Y_hat Y_hat^T / t) Y)` for `Y = block(X)`,
    padding left out of the softmax where the block is called with a `padding_mask`. It sits where
    `DeEscalatedBlock` puts eq. (21), the place `norm="contranorm"` gives it in keras_tse's own blocks, so that the
    two compare at one place; `keras_tse.deescalate(model, norm="contranorm")` wraps a model's blocks so.

    Args:
        block: the block, a `keras.layers.Layer` taking `[batch, tokens, hidden]`.
        scale, temperature: ContraNorm's `s` and `t`. Default `0.1` and `1.0` (the authors').
    """

    def __init__(self, block, scale=0.1, temperature=1.0, **kwargs):
        super().__init__(block, **kwargs)
        self.contra_norm = ContraNorm(scale=scale, temperature=temperature, name="contra_norm")

    @property
    def transform(self):
        return self.contra_norm

    def get_config(self):
        return {**super().get_config(), "scale": self.contra_norm.scale, "temperature": self.contra_norm.temperature}
