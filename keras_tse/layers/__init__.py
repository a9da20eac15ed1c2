"""keras_tse layers: one public layer per module, each registered for `.keras` saving."""

from keras_tse.layers.adaptive_embedding import AdaptiveEmbedding
from keras_tse.layers.centred_attention_block import CentredAttentionBlock
from keras_tse.layers.centred_multi_head_attention import CentredMultiHeadAttention
from keras_tse.layers.class_token_pooling import ClassTokenPooling
from keras_tse.layers.contra_norm import ContraNorm
from keras_tse.layers.contra_norm_block import ContraNormBlock
from keras_tse.layers.de_escalation import DeEscalation
from keras_tse.layers.deepnorm_block import DeepNormBlock
from keras_tse.layers.deescalated_block import DeEscalatedBlock
from keras_tse.layers.image_preprocessor import ImagePreprocessor
from keras_tse.layers.layer_scale_block import LayerScaleBlock
from keras_tse.layers.patch_embedding import PatchEmbedding
from keras_tse.layers.position_embedding import PositionEmbedding
from keras_tse.layers.post_norm_block import PostNormBlock
from keras_tse.layers.pre_norm_block import PreNormBlock
from keras_tse.layers.relative_attention import RelativeAttention
from keras_tse.layers.rezero_block import ReZeroBlock
from keras_tse.layers.scanned_blocks import ScannedBlocks
from keras_tse.layers.self_attention import SelfAttention
from keras_tse.layers.sigma_reparam_dense import SigmaReparamDense
from keras_tse.layers.stochastic_depth import StochasticDepth
from keras_tse.layers.transformer_block import TransformerBlock
from keras_tse.layers.transformer_xl_block import TransformerXLBlock
from keras_tse.layers.wrapped_block import WrappedBlock
from keras_tse.layouts.deepnorm import deepnorm_constants  # the baselines' constants, beside their blocks
from keras_tse.layouts.layerscale import cait_layer_scale_init

__all__ = [
    "AdaptiveEmbedding",
    "CentredAttentionBlock",
    "CentredMultiHeadAttention",
    "ClassTokenPooling",
    "ContraNorm",
    "ContraNormBlock",
    "DeEscalatedBlock",
    "DeEscalation",
    "DeepNormBlock",
    "ImagePreprocessor",
    "LayerScaleBlock",
    "PatchEmbedding",
    "PositionEmbedding",
    "PostNormBlock",
    "PreNormBlock",
    "RelativeAttention",
    "ReZeroBlock",
    "ScannedBlocks",
    "SelfAttention",
    "SigmaReparamDense",
    "StochasticDepth",
    "TransformerBlock",
    "TransformerXLBlock",
    "WrappedBlock",
    "cait_layer_scale_init",
    "deepnorm_constants",
]
