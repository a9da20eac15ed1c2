"""KerasHub's decoder block with the paper's causal de-escalation (`keras_tse.deescalate` makes it)."""

import keras
from keras import ops

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

        The running mean reads the FFN input of every earlier position, which KerasHub's key/value cache
        `[batch, 2, length, heads, head_dim]` does not keep: a cached call takes a third slot beside the keys and
        the values, `[batch, 3, length, heads, head_dim]`, in which each position's FFN input is kept (`hidden_dim`
        laid out as `heads x head_dim`, as the keys are); its rows before `self_attention_cache_update_index` are
        the running mean's earlier positions (`DeEscalation`'s memory), and the call writes its own positions'
        rows there. A cache of keys and values alone is refused in one line. (`deescalate` of GPT-2's or OPT's
        causal LM builds its cache so: `keras_tse.zoo.deescalated_task`.)

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
                norm = "_feedforward_layer_norm"
            elif self._cross_attention_layer is not None:
                norm = "_cross_attention_layer_norm"
            else:
                norm = "_self_attention_layer_norm"
            self._ffn_input = _ThenDeEscalated(getattr(self, norm), self.de_escalation)
            setattr(self, norm, self._ffn_input)

        def call(self, decoder_sequence, *args, self_attention_cache=None, self_attention_cache_update_index=None,
                 **kwargs):  # fmt: skip
            if self_attention_cache is None:
                return super().call(decoder_sequence, *args, **kwargs)
            index = 0 if self_attention_cache_update_index is None else self_attention_cache_update_index
            return self._cached_call(decoder_sequence, self_attention_cache, index, *args, **kwargs)

        def _cached_call(self, decoder_sequence, cache, index, *args, **kwargs):
            """The decoder on positions `index...` of the sequence, the earlier ones' FFN inputs read from slot 2 of
            `cache` and these positions' written there; its keys and values as KerasHub's decoder keeps them."""
            if cache.shape[1] != 3:
                raise ValueError(
                    f"{self.name}: eq. (21)'s running mean reads every earlier position's FFN input, which a "
                    f"key/value cache does not keep; received a self_attention_cache of shape "
                    f"{tuple(cache.shape)}; expected [batch, 3, length, heads, head_dim], the FFN "
                    "inputs beside the keys and values (`keras_tse.deescalate` of a GPT2CausalLM or OPTCausalLM "
                    "builds it)"
                )
            # The earlier positions' rows, not their running sum: generation writes a position again (its first
            # step re-reads the prompt's last one) and a batch's prompts end at different positions.
            kept = cache[:, 2]
            batch, length, heads, head_dim = ops.shape(kept)
            earlier = ops.reshape(kept, (batch, length, heads * head_dim))
            self._ffn_input.memory = (earlier, ops.arange(length) < index)
            try:
                outputs = super().call(
                    decoder_sequence, *args, self_attention_cache=cache[:, :2], self_attention_cache_update_index=index,
                    **kwargs,
                )  # fmt: skip
                seen = self._ffn_input.seen
            finally:
                self._ffn_input.memory = self._ffn_input.seen = None
            x, keys_values = outputs[0], outputs[1]
            rows = ops.reshape(ops.cast(seen, kept.dtype), (batch, -1, heads, head_dim))
            kept = ops.slice_update(kept, [0, index, 0, 0], rows)
            return x, ops.concatenate([keys_values, kept[:, None]], axis=1), *outputs[2:]

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
    """A built norm followed by causal eq. (21); its weights stay the norm's (paths and order kept). In a cached
    call its decoder sets `memory` (the earlier positions' FFN inputs and which of them count) for that call and
    reads `seen` (this call's FFN inputs, before eq. 21) after it."""

    def __init__(self, norm, de_escalation, **kwargs):
        super().__init__(name=norm.name + "_deescalated", dtype=norm.dtype_policy, **kwargs)
        self.norm, self.de_escalation = norm, de_escalation
        self.memory = self.seen = None
        self.built = True

    def call(self, x):
        x = self.norm(x)
        if self.memory is None:
            return self.de_escalation(x)
        self.seen = x
        earlier, counted = self.memory
        return self.de_escalation(x, memory=earlier, memory_mask=counted)
