"""The block of each norm name (`keras_tse.norms`) in a stack of a given depth, for the two
model families: the baselines' depth-dependent constants are chosen here, beside the models."""

from keras_tse import _checks
from keras_tse.layers import (
    DeepNormBlock,
    LayerScaleBlock,
    PostNormBlock,
    PreNormBlock,
    ReZeroBlock,
    TransformerXLBlock,
)
from keras_tse.layers.baselines import cait_layer_scale_init, deepnorm_constants
from keras_tse.norms import ESCALATION_KINDS, NORMS, TRANSFORMER_XL_NORMS


def block_arguments(norm, depth):
    """The baseline's block arguments for a stack of `depth` blocks: DeepNet's (alpha, beta) for an
    N-layer encoder or decoder (their Table 1: the same formula), CaiT's initial scale."""
    if norm == "deepnorm":
        alpha, beta = deepnorm_constants(depth)
        return dict(residual_scale=alpha, init_gain=beta)
    if norm == "layerscale":
        return dict(layer_scale_init=cait_layer_scale_init(depth))
    return {}


def vit_block(norm, depth, deescalate=None, tau=1.0, trainable_tau=False, **kwargs):
    """The ViT's block for `norm` in a stack of `depth`: `PostNormBlock` (post; deescalate, at
    `deescalate`), `PreNormBlock`, `DeepNormBlock`, `ReZeroBlock` or `LayerScaleBlock`."""
    _checks.one_of("norm", norm, NORMS)
    if norm in ("post", "deescalate"):
        place = deescalate if norm == "deescalate" else None
        return PostNormBlock(deescalate=place, tau=tau, trainable_tau=trainable_tau, **kwargs)
    block = {"pre": PreNormBlock, "deepnorm": DeepNormBlock, "rezero": ReZeroBlock, "layerscale": LayerScaleBlock}
    return block[norm](**block_arguments(norm, depth), **kwargs)


def escalation_block(kind, depth, tau=1.0, **kwargs):
    """A block of the escalation measurement: `vit_block`, with `"deescalate"` at the output (Sec. 3.3)
    and `"deescalate_pre_ffn"` at the FFN input (Sec. 3.4's placement)."""
    _checks.one_of("kind", kind, ESCALATION_KINDS)
    if kind == "deescalate_pre_ffn":
        return vit_block("deescalate", depth, "pre_ffn", tau, **kwargs)
    return vit_block(kind, depth, "output", tau, **kwargs)


def transformer_xl_block(norm, depth, **kwargs):
    """Transformer-XL's block for `norm` in a stack of `depth`: one `TransformerXLBlock`, whose `norm`
    picks the layout, with DeepNet's decoder constants or CaiT's scale where the norm needs them."""
    _checks.one_of("norm", norm, TRANSFORMER_XL_NORMS)
    return TransformerXLBlock(norm=norm, **block_arguments(norm, depth), **kwargs)
