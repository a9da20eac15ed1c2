"""KerasHub's causal language models on a de-escalated backbone, generating from a cache that keeps what eq. (21)'s
running mean reads (`keras_tse.deescalate` makes them from the task)."""

from keras import ops

from keras_tse.analysis.similarity import kind_name
from keras_tse.zoo.keras_hub_classes import lazy_class

# KerasHub's causal LMs whose blocks are its `TransformerDecoder` and whose generation calls
# `_build_cache(token_ids)` and `call_with_cache(token_ids, cache, index)`, the cache
# `[batch, layers, 2, length, heads, head_dim]` sliced a layer at a time: GPT-2's and OPT's.
CAUSAL_LMS = {
    "keras_hub.src.models.gpt2.gpt2_causal_lm:GPT2CausalLM": "GPT2CausalLM",
    "keras_hub.src.models.opt.opt_causal_lm:OPTCausalLM": "OPTCausalLM",
}


def _define(name):
    import keras_hub

    class CachedCausalLM(getattr(keras_hub.models, name)):
        """The KerasHub task on a de-escalated backbone. Eq. (21)'s running mean (Sec. 3.4) reads the FFN input of
        every earlier position, which KerasHub's key/value cache does not keep: this one holds it in a third slot
        beside each layer's keys and values, `[batch, layers, 3, length, heads, head_dim]` (the FFN input is
        `hidden_dim = heads x head_dim` wide, as the keys are), and each `DeEscalatedDecoder` reads and writes its
        slot. So a generated token costs one position's work, as the original's does, the cache half as large
        again."""

        def _build_cache(self, token_ids):
            batch, length = ops.shape(token_ids)
            heads = self.backbone.num_heads
            shape = [batch, self.backbone.num_layers, 3, length, heads, self.backbone.hidden_dim // heads]
            _, hidden_states, cache = self.call_with_cache(token_ids, ops.zeros(shape, self.compute_dtype), 0)
            return hidden_states, cache

    CachedCausalLM.__name__ = CachedCausalLM.__qualname__ = f"DeEscalated{name}"
    return CachedCausalLM


_CLASSES = {kind: lazy_class(f"DeEscalated{name}", lambda n=name: _define(n)) for kind, name in CAUSAL_LMS.items()}


def cached_class(task):
    """The class generating from the three-slot cache for `task`'s class (exactly one of `CAUSAL_LMS`), or
    None."""
    made = _CLASSES.get(kind_name(type(task)))
    return made() if made else None
