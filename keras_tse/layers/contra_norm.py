import math

import keras
from keras import ops

from keras_tse import _checks


@keras.saving.register_keras_serializable(package="keras_tse")
class ContraNorm(keras.layers.Layer):
    """ContraNorm (Guo et al., ICLR 2023, "ContraNorm: A Contrastive Learning Perspective on Oversmoothing and
    Beyond"): `LN(X - s * softmax(X_hat X_hat^T / t) X)`, `X_hat` the tokens scaled to unit length.

    One gradient step of a contrastive loss's uniformity term pushes each token away from the tokens it resembles,
    weighted by their softmax similarity; as `t` grows the weights become `1/n` and the step is eq. (21)'s
    de-escalation with `tau = s` before the LayerNorm. Its options follow the authors' code (PKU-ML/ContraNorm):
    `dual_norm` adds the column-normalised softmax, `pre_norm` steps from `X_hat` instead of `X`, `identity`
    scales `X` by `1 + s`, `learnable` makes `s` one weight a channel (`positive`: `exp` of it, so it stays > 0),
    the LayerNorm's epsilon 1e-6.

    Args:
        scale: float >= 0, `s`; `0` leaves only the LayerNorm. Defaults to `0.1` (the authors' default).
        temperature: float > 0, `t`. Defaults to `1.0`.
        dual_norm, pre_norm, identity, learnable, positive: bools, the authors' options. Default `False`.
        epsilon: float, the LayerNorm's. Defaults to `1e-6`.

    Input: `[batch, tokens, channels]`, and an optional boolean `mask` `[batch, tokens]` (`True` for a real
    token: padding is left out of the softmax); output the same shape.
    """

    def __init__(self, scale=0.1, temperature=1.0, dual_norm=False, pre_norm=False, identity=False,
                 learnable=False, positive=False, epsilon=1e-6, **kwargs):  # fmt: skip
        super().__init__(**kwargs)
        scale = _checks.non_negative_float("scale", scale)
        temperature = _checks.positive_float("temperature", temperature)
        if positive and learnable and scale == 0:
            raise ValueError("`positive` learns log(scale): `scale` must be > 0. Received: scale=0")
        self.scale, self.temperature, self.epsilon = scale, temperature, float(epsilon)
        self.dual_norm, self.pre_norm, self.identity = bool(dual_norm), bool(pre_norm), bool(identity)
        self.learnable, self.positive = bool(learnable), bool(positive)
        self.norm = keras.layers.LayerNormalization(epsilon=self.epsilon, name="layernorm")
        self.supports_masking = True  # a padding mask on the tokens passes through: each keeps its place
        self.scale_weight = None

    def build(self, input_shape):
        if self.learnable and self.scale > 0:
            start = math.log(self.scale) if self.positive else self.scale
            self.scale_weight = self.add_weight(
                name="scale", shape=(input_shape[-1],), initializer=keras.initializers.Constant(start)
            )
        self.norm.build(input_shape)

    def call(self, x, mask=None):
        _checks.token_mask(self, mask, x.shape)
        if self.scale > 0:
            unit = x / ops.maximum(ops.norm(x, axis=-1, keepdims=True), 1e-12)  # torch's F.normalize
            x = unit if self.pre_norm else x
            similarity = ops.matmul(unit, ops.swapaxes(unit, 1, 2)) / self.temperature
            # a padding token pushes no real one: it is left out of each softmax (the authors' code has no mask)
            keys = None if mask is None else ops.cast(mask, "bool")[:, None, :]
            weights = ops.softmax(similarity, axis=-1) if keys is None else _masked_softmax(similarity, keys, -1)
            if self.dual_norm:
                pairs = None if keys is None else ops.logical_and(keys, ops.swapaxes(keys, 1, 2))  # real to real
                columns = ops.softmax(similarity, axis=-2) if keys is None else _masked_softmax(similarity, pairs, -2)
                weights = weights + columns
            negatives = ops.matmul(weights, x)
            if self.scale_weight is None:
                x = (1 + self.scale) * x - self.scale * negatives if self.identity else x - self.scale * negatives
            else:
                scale = ops.exp(self.scale_weight) if self.positive else self.scale_weight
                x = scale * x - scale * negatives if self.identity else x - scale * negatives
        return self.norm(x)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {
            **super().get_config(), "scale": self.scale, "temperature": self.temperature, "dual_norm": self.dual_norm,
            "pre_norm": self.pre_norm, "identity": self.identity, "learnable": self.learnable,
            "positive": self.positive, "epsilon": self.epsilon,
        }  # fmt: skip


def _masked_softmax(logits, allowed, axis):
    """Softmax along `axis` over the entries `allowed` marks (broadcast against `logits`), 0 elsewhere."""
    # -1e4 sits below any similarity / t a float16 holds beside it, and exp of the gap is 0 in every float
    logits = ops.where(allowed, logits, ops.cast(-1e4, logits.dtype))
    return ops.where(allowed, ops.softmax(logits, axis=axis), ops.cast(0, logits.dtype))
