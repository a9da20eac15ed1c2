"""`norm="admin"`: Admin (Liu et al. 2020, "Understanding the Difficulty of Training Transformers", Sec. 4): the
post-norm block with each residual sub-layer's shortcut rescaled, `x_i = LN(omega x_{i-1} + f_i(x_{i-1}))`, so
that a change of the weights moves the output by O(log N), not O(N), over N residual sub-layers.

Omega: the paper profiles it on a first batch (omega_i^2 = sum over earlier sub-layers of Var[f_j]); the
authors' own package (`admin_torch` 0.1.0, `calculate_init`, its default "O(logn)") sets one omega for every
sub-layer from N alone, omega = sqrt((N + 1) / ln(N + 1) - 1), N = 2 per block (attention and FFN), and keeps
it constant (its `as_module` default, a buffer). That form is taken here: the model is what its config says, the
same on every backend and in a `.keras` file, with no pass over data before training; `residual_scale` sets
another value."""

import math

from keras_tse import _checks
from keras_tse.layouts.layout import Layout, register_layout


def admin_omega(num_layers):
    """Omega of `admin_torch.calculate_init(2 * num_layers)` ("O(logn)"): N = 2 residual sub-layers a block."""
    n = 2 * _checks.positive_int("num_layers", num_layers)
    return math.sqrt((n + 1) / math.log(n + 1) - 1)


@register_layout
class Admin(Layout):
    name = "admin"
    rank = 11
    defaults = {"residual_scale": 1.0}

    def for_depth(self, depth):
        return {"residual_scale": admin_omega(depth)}

    def check(self, options):
        return {"residual_scale": _checks.positive_float("residual_scale", options["residual_scale"])}

    def residual_factor(self, options):
        return options["residual_scale"]
