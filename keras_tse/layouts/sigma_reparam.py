"""`norm="sigma_reparam"`: Algorithm 1 with every linear map of the block sigma-reparametrised (Zhai et al., ICML
2023, "Stabilizing Transformer Training by Preventing Attention Entropy Collapse"): each kernel `W` used as
`(gamma / sigma(W)) W`, its spectral norm divided out and one learned scalar put back
(`keras_tse.layers.SigmaReparamDense`).

Choices where the paper leaves one: the post-norm body, the setting of its deep machine-translation models
(post-LN to 100 layers); the block's kernels only (query, key, value, output, both FFN kernels, and
Transformer-XL's fused projection and position kernel), the embeddings and the head staying plain, as they
stay for every other layout; the zoo's initialisation of the kernels kept (the authors' vision code draws
N(0, 0.02)), `gamma` starting at each kernel's spectral norm, so the model starts as Algorithm 1's.
"""

from keras_tse.layouts.layout import Layout, register_layout


@register_layout
class SigmaReparam(Layout):
    name = "sigma_reparam"
    rank = 10
    sigma_reparam = True
