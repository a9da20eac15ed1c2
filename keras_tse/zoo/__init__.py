"""Model builders and the preset registry."""

from keras_tse.zoo.presets import from_preset, presets
from keras_tse.zoo.vit import vit

__all__ = ["vit", "presets", "from_preset"]
