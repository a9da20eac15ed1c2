"""Keras's weight quantization (`model.quantize`) as the zoo offers it: the modes that shrink the file and that the
zoo's models save and load with (tests/test_saving.py, every family): int8 or int4 kernels with a scale per output
channel in every Dense (int4's two to a byte). Keras's float8 keeps float32 kernels (its casts are for training on
FP8 hardware): it saves and loads too, but is not offered for export."""

import warnings

MODES = ("int8", "int4")


def quantize(model, mode):
    """`model.quantize(mode)`, without Keras's warning for each layer that has no weights to quantize."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Layer .* does not have a `quantize` method implemented")
        model.quantize(mode)
    return model
