"""The norm vocabulary: every block layout the zoo builds, and the block each one maps to, for both
model families (the ViT of Sec. 3.3 and the Transformer-XL of Sec. 3.4). Every other module that
names a norm (the builders, the blocks, the sweep, the demo) reads it from here.
"""

from keras_tse import _checks

PAPER_NORMS = ("post", "pre", "deescalate")  # Algorithm 1, eq. (19), Algorithm 1 + eq. (21)
BASELINE_NORMS = ("deepnorm", "rezero", "layerscale")  # the published depth-enabling methods (issue 7)
NORMS = PAPER_NORMS + BASELINE_NORMS  # what zoo.vit, zoo.transformer_xl and the sweep accept
# Transformer-XL only, and for measurement only: eq. (21)'s global mean lets a position read later tokens.
LEAKY_NORMS = ("deescalate_leaky_global",)
TRANSFORMER_XL_NORMS = NORMS + LEAKY_NORMS
POST_NORMS = ("post", "deescalate", "deepnorm", "deescalate_leaky_global")  # a LayerNorm after each add
DEESCALATED = ("deescalate", "deescalate_leaky_global")
DEESCALATE_AT = ("output", "pre_ffn")  # where a post-norm block de-escalates: Sec. 3.3 (ViT), Sec. 3.4 (XL)


def block_arguments(norm, depth, architecture):
    """The baseline's block arguments for a stack of `depth` blocks: DeepNet's (alpha, beta) for the
    `architecture` ("encoder" for the ViT, "decoder" for Transformer-XL), CaiT's initial scale."""
    from keras_tse.layers.baselines import cait_layer_scale_init, deepnorm_constants

    if norm == "deepnorm":
        alpha, beta = deepnorm_constants(depth, architecture)
        return dict(residual_scale=alpha, init_gain=beta)
    if norm == "layerscale":
        return dict(layer_scale_init=cait_layer_scale_init(depth))
    return {}


def vit_block(norm, depth, deescalate=None, tau=1.0, trainable_tau=False, **kwargs):
    """The ViT's block for `norm` in a stack of `depth`: `PostNormBlock` (post; deescalate, at
    `deescalate`), `PreNormBlock`, `DeepNormBlock`, `ReZeroBlock` or `LayerScaleBlock`."""
    # imported here: the block modules read this module's vocabulary
    from keras_tse.layers import DeepNormBlock, LayerScaleBlock, PostNormBlock, PreNormBlock, ReZeroBlock

    _checks.one_of("norm", norm, NORMS)
    if norm in ("post", "deescalate"):
        place = deescalate if norm == "deescalate" else None
        return PostNormBlock(deescalate=place, tau=tau, trainable_tau=trainable_tau, **kwargs)
    block = {"pre": PreNormBlock, "deepnorm": DeepNormBlock, "rezero": ReZeroBlock, "layerscale": LayerScaleBlock}
    return block[norm](**block_arguments(norm, depth, "encoder"), **kwargs)


def transformer_xl_block(norm, depth, **kwargs):
    """Transformer-XL's block for `norm` in a stack of `depth`: one `TransformerXLBlock`, whose `norm`
    picks the layout, with DeepNet's decoder constants or CaiT's scale where the norm needs them."""
    from keras_tse.layers import TransformerXLBlock

    _checks.one_of("norm", norm, TRANSFORMER_XL_NORMS)
    return TransformerXLBlock(norm=norm, **block_arguments(norm, depth, "decoder"), **kwargs)
