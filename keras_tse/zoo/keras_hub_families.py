"""KerasHub's model families whose blocks `deescalate` rewrites: each backbone class and its tasks.

KerasHub's `Task.from_preset` picks a folder's task class by its backbone's exact class (a task class's
`backbone_cls`), so a de-escalated family has classes of its own: `DeEscalated<Backbone>` and, for each task,
`DeEscalated<Task>`, whose `backbone_cls` it is. `keras_hub.models.BertMaskedLM.from_preset(folder)` (or
`MaskedLM.from_preset`) then finds the de-escalated BERT's task, and another family's task class finds none.
The names are written here, not read from KerasHub, so that a saved model's classes are registered with Keras
before KerasHub is imported (`keras_hub_classes.lazy_class`); a test checks the table against the installed
KerasHub.
"""

_HUB = "keras_hub.src.models"

# backbone class: its task classes, each as "module:ClassName" (`analysis.similarity.kind_name`)
FAMILIES = {
    f"{_HUB}.{backbone}": tuple(f"{_HUB}.{task}" for task in tasks)
    for backbone, tasks in {
        "bert.bert_backbone:BertBackbone": (
            "bert.bert_masked_lm:BertMaskedLM",
            "bert.bert_text_classifier:BertTextClassifier",
            "bert.bert_text_embedder:BertTextEmbedder",
        ),
        "roberta.roberta_backbone:RobertaBackbone": (
            "roberta.roberta_masked_lm:RobertaMaskedLM",
            "roberta.roberta_text_classifier:RobertaTextClassifier",
        ),
        "xlm_roberta.xlm_roberta_backbone:XLMRobertaBackbone": (
            "xlm_roberta.xlm_roberta_masked_lm:XLMRobertaMaskedLM",
            "xlm_roberta.xlm_roberta_text_classifier:XLMRobertaTextClassifier",
            "xlm_roberta.xlm_roberta_text_embedder:XLMRobertaTextEmbedder",
        ),
        "albert.albert_backbone:AlbertBackbone": (
            "albert.albert_masked_lm:AlbertMaskedLM",
            "albert.albert_text_classifier:AlbertTextClassifier",
        ),
        "distil_bert.distil_bert_backbone:DistilBertBackbone": (
            "distil_bert.distil_bert_masked_lm:DistilBertMaskedLM",
            "distil_bert.distil_bert_text_classifier:DistilBertTextClassifier",
        ),
        "deberta_v3.deberta_v3_backbone:DebertaV3Backbone": (
            "deberta_v3.deberta_v3_masked_lm:DebertaV3MaskedLM",
            "deberta_v3.deberta_v3_text_classifier:DebertaV3TextClassifier",
        ),
        "electra.electra_backbone:ElectraBackbone": (),
        "gpt2.gpt2_backbone:GPT2Backbone": ("gpt2.gpt2_causal_lm:GPT2CausalLM",),
        "opt.opt_backbone:OPTBackbone": ("opt.opt_causal_lm:OPTCausalLM",),
        "vit.vit_backbone:ViTBackbone": ("vit.vit_image_classifier:ViTImageClassifier",),
    }.items()
}


def class_name(kind):
    """The class name in "module:ClassName"."""
    return kind.rpartition(":")[2]


def deescalated_name(kind):
    """The name of the de-escalated class for the KerasHub class `kind`."""
    return f"DeEscalated{class_name(kind)}"
