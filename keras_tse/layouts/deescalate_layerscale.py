"""`norm="deescalate_layerscale"`: de-escalated post-norm (Algorithm 1 plus eq. 21 at the block output)
whose branches join through LayerScale's learned per-channel diagonal (CaiT eq. 5):
`Y2 = LN(X + diag(l_1) SA(X))`, `Y4 = LN(Y2 + diag(l_2) FFN(Y2))`, then `(I - tau 11^T/n) Y4`.

The paper's fix combined with a published one. The scales sit on the branches of the post-norm adds,
not on a pre-norm stream: so the block keeps Algorithm 1's LayerNorm after each add (the paper's setting)
and starts, at CaiT's small `l`, as `LN` followed by eq. (21). CaiT's depth rule picks `l`'s start."""

from keras_tse.layouts.deescalate import Deescalate
from keras_tse.layouts.layerscale import LayerScale, cait_layer_scale_init
from keras_tse.layouts.layout import Layout, register_layout


@register_layout
class DeescalateLayerScale(Layout):
    name = "deescalate_layerscale"
    rank = 6
    deescalates = True
    without_deescalation = "post"
    defaults = {**Deescalate.defaults, **LayerScale.defaults}

    def for_depth(self, depth):
        return {"layer_scale_init": cait_layer_scale_init(depth)}

    check = LayerScale.check  # eq. (21)'s options: `eq21_options`, as every de-escalating layout's

    add_weights = LayerScale.add_weights
    branch_scale = LayerScale.branch_scale
