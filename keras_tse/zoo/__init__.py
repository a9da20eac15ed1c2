"""Model builders and the preset registry."""

from keras_tse.zoo.presets import from_preset, full_config, presets
from keras_tse.zoo.transformer_xl import TransformerXL, transformer_xl
from keras_tse.zoo.vit import vit

__all__ = ["TransformerXL", "from_preset", "full_config", "presets", "transformer_xl", "vit"]
