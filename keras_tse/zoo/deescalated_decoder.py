"""KerasHub's decoder block with the paper's causal de-escalation (`keras_tse.deescalate` makes it)."""

import keras

from keras_tse.layers.de_escalation import DeEscalation
from keras_tse.zoo.keras_hub_classes import lazy_class


def _define():
    import keras_hub

    class DeEscalatedDecoder(keras_hub.layers.TransformerDecoder):
        """KerasHub's `TransformerDecoder` with the paper's causal de-escalation before its FFN (Sec. 3.4, eq. 21
        with the running mean): position `t` of the FFN's input minus `tau` times the mean of positions
        `<= t`, so no position reads a later one. Placed as keras_tse's own blocks place it: after the
        norm whose output the FFN reads (post-norm: the attention's norm, which the FFN's residual reads too;
        pre-norm: the FFN's own norm, the residual stream untouched).

        The running mean needs every earlier position, which KerasHub's key/value cache does not keep: a
        call with `self_attention_cache` is refused in one line (`deescalate` of GPT-2's or OPT's causal LM
        generates by full passes: `keras_tse.zoo.deescalated_causal_lm`).

        Args:
            tau, trainable_tau: eq. (21)'s options (`keras_tse.layers.DeEscalation`).
            **kwargs: `keras_hub.layers.TransformerDecoder`'s.
        """

        def __init__(
            self,
            *args,
            tau=1.0,
            trainable_tau=False,
            decoder_sequence_shape=None,
            encoder_sequence_shape=None,
            **kwargs,
        ):
            super().__init__(*args, **kwargs)  # built below, once eq. (21) exists (KerasHub builds in here)
            self.de_escalation = DeEscalation(tau=tau, trainable_tau=trainable_tau, causal=True, name="deescalation")
            if decoder_sequence_shape is not None:
                self.build(decoder_sequence_shape, encoder_sequence_shape)

        def build(self, decoder_sequence_shape, encoder_sequence_shape=None):
            super().build(decoder_sequence_shape, encoder_sequence_shape)
            self.de_escalation.build(decoder_sequence_shape)
            if self.normalize_first:
                self._feedforward_layer_norm = _ThenDeEscalated(self._feedforward_layer_norm, self.de_escalation)
            elif self._cross_attention_layer is not None:
                self._cross_attention_layer_norm = _ThenDeEscalated(
                    self._cross_attention_layer_norm, self.de_escalation
                )
            else:
                self._self_attention_layer_norm = _ThenDeEscalated(self._self_attention_layer_norm, self.de_escalation)

        def call(self, decoder_sequence, *args, self_attention_cache=None, **kwargs):
            if self_attention_cache is not None:
                raise ValueError(
                    f"{self.name}: eq. (21)'s running mean reads every earlier position, which a key/value cache "
                    "does not keep; received a `self_attention_cache`; expected full passes over the sequence "
                    "(`keras_tse.deescalate` of a GPT2CausalLM or OPTCausalLM generates so)"
                )
            return super().call(decoder_sequence, *args, **kwargs)

        def get_config(self):
            return {
                **super().get_config(),
                "tau": self.de_escalation.tau,
                "trainable_tau": self.de_escalation.trainable_tau,
            }

    return DeEscalatedDecoder


# `DeEscalatedDecoder`, a subclass of KerasHub's `TransformerDecoder`.
deescalated_decoder_class = lazy_class("DeEscalatedDecoder", _define)


class _ThenDeEscalated(keras.layers.Layer):
    """A built norm followed by causal eq. (21); its weights stay the norm's (paths and order kept)."""

    def __init__(self, norm, de_escalation, **kwargs):
        super().__init__(name=norm.name + "_deescalated", dtype=norm.dtype_policy, **kwargs)
        self.norm, self.de_escalation = norm, de_escalation
        self.built = True

    def call(self, x):
        return self.de_escalation(self.norm(x))
