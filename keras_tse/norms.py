"""The norm vocabulary: every block layout the zoo builds, for both model families (the ViT of
Sec. 3.3 and the Transformer-XL of Sec. 3.4), and where a post-norm block de-escalates. Every
module that names a norm reads it from here; `keras_tse.zoo.blocks` builds the block for each name.
The weight schemes' names live here too (`keras_tse.layers.initializers` draws them), so that a
command line can offer them without importing Keras.
"""

PAPER_NORMS = ("post", "pre", "deescalate")  # Algorithm 1, eq. (19), Algorithm 1 + eq. (21)
BASELINE_NORMS = ("deepnorm", "rezero", "layerscale")  # the published depth-enabling methods (baselines.py)
NORMS = PAPER_NORMS + BASELINE_NORMS  # what zoo.vit, zoo.transformer_xl and the sweep accept
# Transformer-XL only, and for measurement only: eq. (21)'s global mean lets a position read later tokens.
LEAKY_NORMS = ("deescalate_leaky_global",)
TRANSFORMER_XL_NORMS = NORMS + LEAKY_NORMS
POST_NORMS = ("post", "deescalate", "deepnorm", "deescalate_leaky_global")  # a LayerNorm after each add
DEESCALATED = ("deescalate", "deescalate_leaky_global")
DEESCALATE_AT = ("output", "pre_ffn")  # where a post-norm block de-escalates: Sec. 3.3 (ViT), Sec. 3.4 (XL)
# The escalation measurement (Fig. 2) stacks ViT blocks; it also places eq. (21) at the FFN input, as
# Transformer-XL does, to compare the two placements at initialisation.
ESCALATION_KINDS = NORMS + ("deescalate_pre_ffn",)
FIG2_KINDS = PAPER_NORMS + ("deescalate_pre_ffn",)  # the escalation command's default: the paper's blocks
ESCALATION_LABELS = {"deescalate": "deescalate (output)", "deescalate_pre_ffn": "deescalate (pre_ffn)"}  # table columns
INITIALIZERS = ("torch", "glorot", "normal", "transformer_xl")  # kernel schemes (layers/initializers.py)
EMBEDDING_INITIALIZERS = ("timm", "vit_pytorch")  # class token and position embeddings (PatchEmbedding)
