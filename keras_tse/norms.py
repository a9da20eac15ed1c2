"""The names the command lines offer without importing Keras: the studies' groups of residual
layouts (each layout itself is a module of `keras_tse.layouts`), where a block de-escalates, the
escalation measurement's block kinds, and the weight schemes (`keras_tse.layers.initializers` draws
them).
"""

from keras_tse.layouts import layout_names

PAPER_NORMS = ("post", "pre", "deescalate")  # Algorithm 1, eq. (19), Algorithm 1 + eq. (21)
BASELINE_NORMS = ("deepnorm", "rezero", "layerscale")  # the published depth-enabling methods (keras_tse.layouts)
DEESCALATE_AT = ("output", "pre_ffn")  # where a post-norm block de-escalates: Sec. 3.3 (ViT), Sec. 3.4 (XL)
# The escalation measurement (Fig. 2) stacks ViT blocks; it also places eq. (21) at the FFN input, as
# Transformer-XL does, to compare the two placements at initialisation.
ESCALATION_PLACED = {"deescalate_pre_ffn": ("deescalate", "pre_ffn")}  # kind: (layout, place); besides the layouts
FIG2_KINDS = PAPER_NORMS + ("deescalate_pre_ffn",)  # the escalation command's default: the paper's blocks
ESCALATION_LABELS = {"deescalate": "deescalate (output)", "deescalate_pre_ffn": "deescalate (pre_ffn)"}  # table columns
# what `keras_tse.deescalate` changes in a block: eq. (21) or ContraNorm after it, or its attention centred
SURGERY_NORMS = ("deescalate", "contranorm", "centred_attention")
INITIALIZERS = ("torch", "glorot", "normal", "transformer_xl")  # kernel schemes (layers/initializers.py)
EMBEDDING_INITIALIZERS = ("timm", "vit_pytorch")  # class token and position embeddings (PatchEmbedding)


def escalation_kinds():
    """The escalation measurement's block kinds: every layout, and eq. (21) at the FFN input."""
    return layout_names() + tuple(ESCALATION_PLACED)
