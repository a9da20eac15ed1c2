"""A layer's quantized sublayers, kept through its config.

`model.quantize(mode)` gives each Dense of a block a quantized dtype policy (int8 kernels and their
scales), but a block rebuilds its Dense sublayers from its own config when a `.keras` file loads, with
float kernels, and the saved int8 ones then do not load. The block's config therefore records its dtype
as a `DTypePolicyMap` (what KerasHub's backbones record): its own policy, and each quantized sublayer's
under a pattern of its path below the block; the block hands its policy to every sublayer, and each
takes its own from the map by path when it is built."""

import re

import keras


def config_dtype(layer, sublayers):
    """`layer`'s dtype for its config: its policy, or, where some of its `sublayers` (every layer below it) are
    quantized, a map of theirs."""
    base = layer.dtype_policy
    quantized = [sub for sub in sublayers if sub.quantization_mode]
    if not quantized:
        return keras.dtype_policies.serialize(base)
    if isinstance(base, keras.dtype_policies.DTypePolicyMap):
        base = base.default_policy
    policies = keras.dtype_policies.DTypePolicyMap(default_policy=base)
    for sub in quantized:
        below = sub.path[len(layer.path) + 1 :] if layer.path and sub.path.startswith(layer.path + "/") else sub.path
        policies[f"(.*/)?{re.escape(below)}"] = sub.dtype_policy  # the block's own path may differ when loaded
    return keras.dtype_policies.serialize(policies)
