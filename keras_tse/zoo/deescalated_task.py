"""KerasHub's tasks on a de-escalated backbone (`keras_tse.deescalate` makes them from the task): a subclass of
each task in `keras_hub_families.FAMILIES` whose `backbone_cls` is its family's de-escalated backbone, so that
KerasHub's own `from_preset` loads it; the causal LMs generate from a cache that keeps what eq. (21)'s running
mean reads."""

from keras import ops

from keras_tse._lazy import attribute
from keras_tse.analysis.similarity import kind_name
from keras_tse.zoo.deescalated_backbone import family_backbone_class
from keras_tse.zoo.keras_hub_classes import lazy_class
from keras_tse.zoo.keras_hub_families import FAMILIES, deescalated_name

# KerasHub's causal LMs whose blocks are its `TransformerDecoder` and whose generation calls
# `_build_cache(token_ids)` and `call_with_cache(token_ids, cache, index)`, the cache
# `[batch, layers, 2, length, heads, head_dim]` sliced a layer at a time: GPT-2's and OPT's.
CACHED_CAUSAL_LMS = {"GPT2CausalLM", "OPTCausalLM"}


def _build_cache(self, token_ids):
    """Eq. (21)'s running mean (Sec. 3.4) reads the FFN input of every earlier position, which KerasHub's key/value
    cache does not keep: this one holds it in a third slot beside each layer's keys and values,
    `[batch, layers, 3, length, heads, head_dim]` (the FFN input is `hidden_dim = heads x head_dim` wide, as the
    keys are), and each `DeEscalatedDecoder` reads and writes its slot. So a generated token costs one position's
    work, as the original's does, the cache half as large again."""
    batch, length = ops.shape(token_ids)
    heads = self.backbone.num_heads
    shape = [batch, self.backbone.num_layers, 3, length, heads, self.backbone.hidden_dim // heads]
    _, hidden_states, cache = self.call_with_cache(token_ids, ops.zeros(shape, self.compute_dtype), 0)
    return hidden_states, cache


def _define(backbone_kind, task_kind):
    original = attribute(task_kind)
    body = {
        "backbone_cls": family_backbone_class(backbone_kind),
        "__module__": __name__,
        "__doc__": f"KerasHub's `{original.__name__}` on a de-escalated backbone (`keras_tse.deescalate`).",
    }
    if original.__name__ in CACHED_CAUSAL_LMS:
        body["_build_cache"] = _build_cache
    return type(deescalated_name(task_kind), (original,), body)


_CLASSES = {
    task: lazy_class(deescalated_name(task), lambda b=backbone, t=task: _define(b, t), needs=(backbone, task))
    for backbone, tasks in FAMILIES.items()
    for task in tasks
}


def task_class(cls):
    """The de-escalated class of the KerasHub task class `cls` (exactly one of the tasks in `FAMILIES`), or
    None."""
    made = _CLASSES.get(kind_name(cls))
    return made() if made else None
