import keras
from keras import ops

from keras_tse import _checks


@keras.saving.register_keras_serializable(package="keras_tse")
class StochasticDepth(keras.layers.Layer):
    """Drops a residual branch for whole examples while training (stochastic depth, "drop path").

    In training each example's branch is kept with probability `1 - rate` and then divided by
    `1 - rate`, so its expected value is the branch itself; at inference the layer is the identity.
    The form of Huang et al. 2016 ("Deep Networks with Stochastic Depth") as timm's deep ViTs and
    CaiT use it, on the branch before it joins the residual: a block whose branches are dropped passes
    its input on (pre-norm) or its input's LayerNorm (post-norm). Model builders take one
    `drop_path_rate` and give block `i` of `L` the rate `drop_path_rate * i / (L - 1)`, timm's linear
    rule: the first block is never dropped, the last at the full rate.

    Args:
        rate: float in [0, 1), the probability an example's branch is dropped. Defaults to `0.0`.
        seed: optional int, the seed of the drop draws.
        **kwargs: base layer keyword arguments such as `name` and `dtype`.

    Call arguments:
        inputs: a branch, `[batch, ...]`.
        training: bool, whether to drop.

    Example:

    >>> drop = keras_tse.layers.StochasticDepth(0.1)
    >>> drop(np.ones((4, 3, 8)), training=False)  # the identity at inference

    Reference:
        Huang et al. 2016; Touvron et al. 2021 (CaiT), Sec. 3.
    """

    def __init__(self, rate=0.0, seed=None, **kwargs):
        super().__init__(**kwargs)
        self.rate = _checks.dropout_rate("rate", rate)
        self.seed = seed
        self.seed_generator = keras.random.SeedGenerator(seed) if self.rate > 0 else None
        self.supports_masking = True

    def call(self, inputs, training=None):
        if not training or self.rate == 0:
            return inputs
        keep = 1.0 - self.rate
        shape = (ops.shape(inputs)[0],) + (1,) * (len(inputs.shape) - 1)  # one draw per example
        draw = keras.random.uniform(shape, seed=self.seed_generator, dtype=inputs.dtype)
        return inputs * ops.cast(draw < keep, inputs.dtype) / ops.cast(keep, inputs.dtype)

    def compute_output_shape(self, input_shape):
        return input_shape

    def get_config(self):
        return {**super().get_config(), "rate": self.rate, "seed": self.seed}


def linear_rates(drop_path_rate, depth):
    """Block `i`'s drop rate of `depth`: `drop_path_rate * i / (depth - 1)`, timm's rule."""
    rate = _checks.dropout_rate("drop_path_rate", drop_path_rate)
    return [rate * i / (depth - 1) if depth > 1 else 0.0 for i in range(depth)]
