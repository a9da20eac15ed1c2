"""`norm="deescalate_leaky_global"`: **leaks future tokens; for measurement only.** Eq. (21) taken
literally in a causal model: the mean over every position of the segment, so position t reads later
positions through it and a next-token loss can fall for a reason that is not language modelling. It
exists to measure how much of a training curve that leak explains; never report a perplexity of it."""

from keras_tse.layouts.deescalate import Deescalate
from keras_tse.layouts.layout import register_layout


@register_layout
class DeescalateLeakyGlobal(Deescalate):
    name = "deescalate_leaky_global"
    rank = 50
    causal_mean = False
    measurement_only = True
