"""`norm="deescalate"`: Algorithm 1 plus de-escalation, eq. (21), `Y = (I - tau 11^T/n) X`, at the
block's `deescalate_at`: `"output"` (the ViT, Sec. 3.3) or `"pre_ffn"` (Transformer-XL, Sec. 3.4).
In a causal block the mean runs over positions <= t, so no position reads a later token."""

from keras_tse import _checks
from keras_tse.layouts.layout import Layout, register_layout


@register_layout
class Deescalate(Layout):
    name = "deescalate"
    rank = 2
    deescalates = True
    without_deescalation = "post"
    defaults = {"tau": 1.0, "trainable_tau": False}

    def check(self, options):
        return {"tau": _checks.unit_interval("tau", options["tau"]), "trainable_tau": bool(options["trainable_tau"])}
