"""Model builders, their families (`registry`) and the preset registry."""

from keras_tse.lora import enable_lora, load_lora_weights, save_lora_weights
from keras_tse.zoo import (  # noqa: F401 (their loaders registered)
    deescalated_backbone,
    deescalated_decoder,
    deescalated_task,
)
from keras_tse.zoo.families.gpt import gpt
from keras_tse.zoo.families.transformer_xl import TransformerXL, transformer_xl
from keras_tse.zoo.families.vit import vit
from keras_tse.zoo.generate import generate
from keras_tse.zoo.intermediates import forward_intermediates
from keras_tse.zoo.preprocessing import classify
from keras_tse.zoo.preset_folder import save_preset
from keras_tse.zoo.presets import create_model, from_preset, full_config, list_models, presets
from keras_tse.zoo.registry import get_family, list_families, register_family

__all__ = [
    "TransformerXL",
    "classify",
    "create_model",
    "enable_lora",
    "forward_intermediates",
    "from_preset",
    "full_config",
    "generate",
    "get_family",
    "gpt",
    "list_families",
    "list_models",
    "load_lora_weights",
    "presets",
    "save_lora_weights",
    "save_preset",
    "register_family",
    "transformer_xl",
    "vit",
]
