"""`norm="centred_attention"`: Algorithm 1 with each head's attention matrix centred, `(P - U) V` for `P V`,
`U` the uniform distribution over the keys a query may read ("Mind the Gap", Naderi, Nait Saada and Tanner
2024; "Centered Self-Attention", Ali, Galanti and Wolf 2023, centre the same operator).

The paper's diagnosis, acted on where it arises: `P` is row-stochastic, so `1` is an eigenvector of eigenvalue
1, the invariant leading eigenspace whose spectral gap drives token similarity escalation (Sec. 2); `P - U`
has `(P - U) 1 = 0`. Eq. (21) removes the token mean from the block's output instead; this layout removes it
from what attention adds, `P V - U V`, which equals eq. (21) on `P V` only where `P` is doubly stochastic.
A causal query's `U` is uniform over positions `<= t`, a Transformer-XL query's over the filled memory and the
segment up to it, so no position reads a later one and the layout decodes with a cache.
"""

from keras_tse.layouts.layout import Layout, register_layout


@register_layout
class CentredAttention(Layout):
    name = "centred_attention"
    rank = 8
    centred_attention = True
