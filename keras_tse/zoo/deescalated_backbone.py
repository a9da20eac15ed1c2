"""KerasHub's backbone with the paper's fix in its blocks (`keras_tse.deescalate` makes it)."""

import keras

from keras_tse.analysis.similarity import kind_name
from keras_tse.zoo.deescalated_graph import deescalated_graph, surgery_options
from keras_tse.zoo.keras_hub_classes import lazy_class
from keras_tse.zoo.keras_hub_families import FAMILIES, class_name, deescalated_name

KERAS_HUB_BACKBONE = "keras_hub.src.models.backbone:Backbone"


def _define():
    import keras_hub

    class DeEscalatedBackbone(keras_hub.models.Backbone):
        """A KerasHub backbone whose Transformer blocks apply eq. (21) (`keras_tse.deescalate`), itself a
        KerasHub `Backbone` with the original's attributes (its configuration's numbers, `token_embedding`,
        `transformer_layers` as rewritten, ...), so that a KerasHub task takes it as it takes the original.
        Its layers are those of the backbone it is given (`keras_tse.deescalate` gives it a copy of yours) but the
        blocks: an encoder held by a `DeEscalatedBlock`, a decoder rebuilt as a `DeEscalatedDecoder` with its
        values.

        Saved, it is the original's configuration and the options: loading builds the original anew, rewrites
        it, then loads the weights.

        Args:
            backbone: the KerasHub backbone, or its serialized form (from a saved model).
            tau, trainable_tau: eq. (21)'s options.
            norm, layout_options: the fix (`keras_tse.deescalate`'s): `"deescalate"` or `"contranorm"`.
        """

        def __init__(self, backbone, tau=1.0, trainable_tau=False, norm="deescalate", layout_options=None, **kwargs):
            if isinstance(backbone, dict):
                backbone = keras.saving.deserialize_keras_object(backbone)
            options = surgery_options(norm, tau, trainable_tau, layout_options)
            graph, rewritten = deescalated_graph(backbone, options)
            kwargs.setdefault("name", f"{backbone.name}_{'deescalated' if norm == 'deescalate' else norm}")
            kwargs.setdefault("dtype", backbone.dtype_policy)
            super().__init__(inputs=graph.input, outputs=graph.output, **kwargs)
            self.backbone_config = keras.saving.serialize_keras_object(backbone)
            self.tau, self.trainable_tau = tau, trainable_tau
            self.norm, self.layout_options = norm, options["layout_options"]
            for name, value in _attributes(backbone).items():
                setattr(self, name, keras.tree.map_structure(lambda v: rewritten.get(id(v), v), value))

        def get_config(self):
            # KerasHub's `Backbone.get_config` records a quantized model's layers in a `DTypePolicyMap` keyed by
            # layer path; the paths are those the original's constructor gives, so the map goes into the
            # original's configuration, which then builds its layers quantized before the rewrite.
            backbone = self.backbone_config
            dtype = super().get_config()["dtype"]
            if isinstance(dtype, dict) and dtype.get("class_name") == "DTypePolicyMap":
                backbone = {**backbone, "config": {**backbone["config"], "dtype": dtype}}
            return {
                "backbone": backbone,
                "tau": self.tau,
                "trainable_tau": self.trainable_tau,
                "norm": self.norm,
                "layout_options": self.layout_options,
                "name": self.name,
                "trainable": self.trainable,
            }

    return DeEscalatedBackbone


def _attributes(backbone):
    """What the backbone's class set on it beyond a Keras model's own: its configuration's numbers and its
    named layers (`token_embedding`, a property of KerasHub's `Backbone`, with them)."""
    plain = keras.Input((1,))
    keras_own = set(vars(keras.Model(plain, plain)))
    names = [k for k in vars(backbone) if not k.startswith("_") and k not in keras_own]
    return {"token_embedding": backbone.token_embedding, **{k: getattr(backbone, k) for k in names}}


# `DeEscalatedBackbone`, a subclass of KerasHub's `Backbone`: a backbone outside `FAMILIES` gets it.
deescalated_backbone_class = lazy_class("DeEscalatedBackbone", _define)


def _define_family(kind):
    return type(
        deescalated_name(kind),
        (deescalated_backbone_class(),),
        {
            "__module__": __name__,
            "__doc__": f"A de-escalated KerasHub `{class_name(kind)}`: `DeEscalatedBackbone` under a name of its "
            "family's, so that KerasHub's `Task.from_preset` finds the family's de-escalated tasks "
            "(`keras_hub_families`).",
        },
    )


_FAMILY_CLASSES = {
    kind: lazy_class(deescalated_name(kind), lambda k=kind: _define_family(k), needs=(kind,)) for kind in FAMILIES
}


def family_backbone_class(kind):
    """The de-escalated class of the KerasHub backbone class named `kind` (one of `FAMILIES`)."""
    return _FAMILY_CLASSES[kind]()


def backbone_class(backbone):
    """The class `deescalate` gives `backbone`: its family's where its class is one of `FAMILIES`, else
    `DeEscalatedBackbone`."""
    kind = kind_name(type(backbone))
    return family_backbone_class(kind) if kind in FAMILIES else deescalated_backbone_class()
