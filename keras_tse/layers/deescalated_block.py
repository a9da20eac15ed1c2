import keras

from keras_tse.layers.de_escalation import DeEscalation
from keras_tse.layers.wrapped_block import WrappedBlock


@keras.saving.register_keras_serializable(package="keras_tse")
class DeEscalatedBlock(WrappedBlock):
    """A bidirectional Transformer block someone else wrote, followed by eq. (21) on its output (the
    paper's place for an encoder, Sec. 3.3): `Y = (I - tau 11^T/n) block(X)`, the token mean over the real
    tokens where the block is called with a `padding_mask` (KerasHub's keyword). `keras_tse.deescalate`
    wraps a model's blocks so; the block keeps its own weights and names.

    Args:
        block: the block, a `keras.layers.Layer` taking `[batch, tokens, hidden]`.
        tau, trainable_tau: eq. (21)'s options (`keras_tse.layers.DeEscalation`).
    """

    def __init__(self, block, tau=1.0, trainable_tau=False, **kwargs):
        super().__init__(block, **kwargs)
        self.de_escalation = DeEscalation(tau=tau, trainable_tau=trainable_tau, name="deescalation")

    @property
    def transform(self):
        return self.de_escalation

    def get_config(self):
        eq21 = self.de_escalation
        return {**super().get_config(), "tau": eq21.tau, "trainable_tau": eq21.trainable_tau}
