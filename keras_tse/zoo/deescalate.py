"""The paper's fix on a model someone else wrote: `deescalate(model)` applies eq. (21) in every Transformer
block of a known kind where the paper puts it, every weight kept."""

import contextlib
import random

import keras

from keras_tse._weights import assign_copy
from keras_tse.analysis.similarity import as_graph, of_kind
from keras_tse.zoo.deescalated_backbone import KERAS_HUB_BACKBONE, backbone_class
from keras_tse.zoo.deescalated_graph import deescalated_graph, surgery_options
from keras_tse.zoo.deescalated_task import task_class


def deescalate(model, tau=1.0, trainable_tau=False, norm="deescalate", layout_options=None):
    """A copy of `model` in which every Transformer block of a known kind applies eq. (21),
    `Y = (I - tau 11^T/n) X`, where the paper puts it. The copy's variables are its own, holding `model`'s
    values bit for bit (as Keras's `clone_model` and `set_weights` give): training it leaves `model` as it was.

    - a bidirectional block (KerasHub's `TransformerEncoder`, ViT encoder blocks and DeBERTa's
      `DisentangledAttentionEncoder`, keras_tse's blocks that are not causal): on its output (Sec. 3.3), the
      block held by a `DeEscalatedBlock`; the token mean over the real tokens where the block is given a
      `padding_mask`. The ViT backbone's `ViTEncoder`, which calls its blocks in a loop of its own, is run
      block by block in the copy;
    - a causal KerasHub `TransformerDecoder` (GPT-2's): the running mean before its FFN (Sec. 3.4), in a
      `DeEscalatedDecoder` of the same configuration.

    With `norm="contranorm"` each bidirectional block gets ContraNorm (Guo et al. 2023) at the same place instead,
    held by a `ContraNormBlock` (`layout_options`: `contranorm_scale`, `contranorm_temperature`, the layout's own);
    with `norm="centred_attention"` each block's Keras `MultiHeadAttention` computes `(P - U) V`
    (`CentredAttentionBlock`), no weight added. A causal decoder takes only eq. (21).

    Every other layer is as in `model`, inputs and outputs as they were. A KerasHub backbone gives a
    `DeEscalatedBackbone` (for a family of `keras_hub_families.FAMILIES`, its subclass `DeEscalatedBertBackbone`,
    ...): a KerasHub `Backbone` with the original's attributes (`token_embedding`, `vocabulary_size`,
    `transformer_layers`, ...), so a KerasHub task takes it (`BertMaskedLM(backbone=...)`).
    A KerasHub task gives the same task on the de-escalated backbone, with the task's own preprocessor: for the
    tasks of `FAMILIES` (`BertMaskedLM`, `BertTextClassifier`, GPT-2's causal LM, ...) its subclass
    `DeEscalatedBertMaskedLM`, ..., declared for the family's backbone, so that KerasHub's own
    `BertMaskedLM.from_preset` (or `MaskedLM.from_preset`) loads its `save_to_preset` folder; GPT-2's and OPT's
    causal LMs keep the FFN inputs the running mean reads in their cache beside the keys and values. Any such
    folder loads with `keras_tse.zoo.from_preset` too, and KerasHub's `from_preset` reads the keras_tse classes
    once keras_tse is imported. A functional model holding a backbone (or any functional model with blocks) as
    one layer gets that layer de-escalated.
    A model with no block of a known kind, a causal block of keras_tse's (build it with `norm="deescalate"`),
    or a block that applies eq. (21) already (a second pass would compound tau) is refused in one line.

    Args:
        model: a functional or Sequential `keras.Model` (a KerasHub backbone or task, a zoo model).
        tau: float in [0, 1], eq. (21)'s fraction. Defaults to `1.0`.
        trainable_tau: bool, learn each block's tau, clipped into [0, 1]. Defaults to `False`.
        norm: `"deescalate"` (eq. 21), `"contranorm"` or `"centred_attention"`, the fix the blocks get.
            Defaults to `"deescalate"`.
        layout_options: dict, the options of `norm`'s layout (`keras_tse.layouts`); `None` for its defaults.

    Returns:
        A functional `keras.Model` (a `DeEscalatedBackbone` for a KerasHub backbone, the task's de-escalated
        subclass or its class for a KerasHub task) named `f"{model.name}_deescalated"` (`_contranorm`,
        `_centred_attention` for the others).
    """
    options = surgery_options(norm, tau, trainable_tau, layout_options)
    with _random_state_kept():
        if of_kind(model, {KERAS_HUB_TASK}):  # its preprocessor kept as it is, the backbone and the head copied
            return _deescalated_task(model, copied(model.backbone), options)
        return _rewritten(copied(model), options)


@contextlib.contextmanager
def _random_state_kept():
    """Python's random state as found once the copy is made: Keras gives each initializer and seed generator
    made without a seed one drawn from it, and every value the copy's initializers would draw is overwritten,
    so a model built after `deescalate` (a task's head) is the one built without it, seed for seed."""
    state = random.getstate()
    try:
        yield
    finally:
        random.setstate(state)


def copied(model):
    """`model` with variables of its own holding its values: a KerasHub backbone rebuilt from its configuration
    (its class, whose attributes a task reads, kept), any other model by Keras's `clone_model`."""
    model = as_graph(model)
    if of_kind(model, {KERAS_HUB_BACKBONE}):
        twin = type(model).from_config(model.get_config())
    else:
        twin = keras.models.clone_model(model)
    for target, value in zip(twin.weights, model.weights, strict=True):
        assign_copy(target, value)
    return twin


def _rewritten(model, options):
    """`model`, a copy no one else holds, its blocks rewritten (those of the task, backbone or functional model
    nested in it too)."""
    if of_kind(model, {KERAS_HUB_TASK}):
        return _deescalated_task(model, model.backbone, options)
    if of_kind(model, {KERAS_HUB_BACKBONE}):
        return backbone_class(model)(model, **options)
    copy, _ = deescalated_graph(model, options, nested=lambda graph, **same: _rewritten(graph, same))
    return keras.Model(copy.input, copy.output, name=f"{model.name}_{_suffix(options)}")  # their structure (a dict)


KERAS_HUB_TASK = "keras_hub.src.models.task:Task"


def _suffix(options):
    """What a rewritten model's name ends with: `deescalated`, or the fix's name."""
    return "deescalated" if options["norm"] == "deescalate" else options["norm"]


def _deescalated_task(task, backbone, options):
    """`task`'s de-escalated class (`task_class`; else its own) on `backbone` (`task`'s or a copy of it)
    de-escalated: the task builds its head anew from its configuration, so the head's weights are copied in,
    layer by layer; the preprocessor is the task's own."""
    backbone = _rewritten(backbone, options)
    config = {**task.get_config(), "backbone": backbone, "preprocessor": task.preprocessor}
    kind = task_class(type(task)) or type(task)
    copy = kind.from_config({**config, "name": f"{task.name}_{_suffix(options)}"})
    for source, target in zip(_head(task), _head(copy), strict=True):
        for value, weight in zip(source.weights, target.weights, strict=True):
            assign_copy(weight, value)
    return copy


def _head(task):
    return [layer for layer in task.layers if layer is not task.backbone and layer is not task.preprocessor]
