"""KerasHub's causal language models on a de-escalated backbone, generating by full passes
(`keras_tse.deescalate` makes them from the task)."""

from keras import ops

from keras_tse.analysis.similarity import kind_name
from keras_tse.zoo.keras_hub_classes import lazy_class

# KerasHub's causal LMs whose blocks are its `TransformerDecoder` and whose generation calls
# `_build_cache(token_ids)` and `call_with_cache(token_ids, cache, index)`: GPT-2's and OPT's.
CAUSAL_LMS = {
    "keras_hub.src.models.gpt2.gpt2_causal_lm:GPT2CausalLM": "GPT2CausalLM",
    "keras_hub.src.models.opt.opt_causal_lm:OPTCausalLM": "OPTCausalLM",
}


def _define(name):
    import keras_hub

    class FullPassCausalLM(getattr(keras_hub.models, name)):
        """The KerasHub task on a de-escalated backbone, whose `generate` runs every step as one causal pass over
        the sequence so far. Eq. (21)'s running mean (Sec. 3.4) reads the FFN input of every earlier position,
        which KerasHub's key/value cache does not keep, so the "cache" here is the token ids so far: a step writes
        its tokens into it and reads the logits of their positions from a pass over all of it (later positions
        are not read: the blocks are causal). A step costs a pass over `max_length` tokens, not one token's."""

        def _build_cache(self, token_ids):
            _, hidden_states, cache = self.call_with_cache(token_ids, token_ids, 0)
            return hidden_states, cache

        def call_with_cache(self, token_ids, cache, cache_update_index):
            cache = ops.slice_update(cache, [0, cache_update_index], ops.cast(token_ids, cache.dtype))
            hidden = self.backbone({"token_ids": cache, "padding_mask": ops.ones_like(cache)})
            batch, length = ops.shape(token_ids)
            hidden_states = ops.slice(hidden, [0, cache_update_index, 0], [batch, length, ops.shape(hidden)[-1]])
            return self.backbone.token_embedding(hidden_states, reverse=True), hidden_states, cache

    FullPassCausalLM.__name__ = FullPassCausalLM.__qualname__ = f"DeEscalated{name}"
    return FullPassCausalLM


_CLASSES = {kind: lazy_class(f"DeEscalated{name}", lambda n=name: _define(n)) for kind, name in CAUSAL_LMS.items()}


def full_pass_class(task):
    """The class generating by full passes for `task`'s class (exactly one of `CAUSAL_LMS`), or None."""
    made = _CLASSES.get(kind_name(type(task)))
    return made() if made else None
