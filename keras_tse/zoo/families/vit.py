"""The deep Vision Transformer of Yu & Zhang, Sec. 3.3 (CIFAR-10, depth 80, Table 1)."""

import keras

from keras_tse import _checks
from keras_tse.layers import PatchEmbedding, ScannedBlocks, initializers
from keras_tse.layers.self_attention import resolve_head_dim
from keras_tse.layers.stochastic_depth import linear_rates
from keras_tse.layouts import get_layout
from keras_tse.layouts.layout import EQ21_DEFAULTS
from keras_tse.norms import DEESCALATE_AT
from keras_tse.zoo.blocks import checked_layout_options, stack_block
from keras_tse.zoo.families.vit_presets import PRESETS
from keras_tse.zoo.registry import register_family

POOLS = ("cls", "mean")
BLOCK_KEYS = ("num_heads", "ffn_dim", "alpha", "activation", "dropout", "initializer")


# The keywords grouped by what they set, one group a line.
# fmt: off
@register_family(
    "vit",
    lambda config: f"{config['image_size']}x{config['image_size']}x{config['channels']} images",
    task="images",
    tiny=dict(depth=2, image_size=8, patch_size=4, channels=1, hidden_dim=16, ffn_dim=32, num_heads=2, num_classes=3),
    presets=PRESETS,
    title="ViT",
)
def vit(
    depth=80, norm="deescalate", *,
    image_size=32, patch_size=4, channels=3, num_classes=10, pool="cls",  # input and head
    hidden_dim=192, ffn_dim=384, num_heads=8, activation="relu", alpha=1.0, dropout=0.0,  # blocks (Table 1)
    drop_path_rate=0.0,  # stochastic depth, linear in depth (timm's rule)
    tau=1.0, trainable_tau=False, deescalate_at="output",  # de-escalation, eq. (21)
    layout_options=None,  # the layout's own options: {"layer_scale_init": 1e-4}, {"gate_init": 0.5}, ...
    initializer="torch", embedding_initializer="timm", scan=False, remat=False, name=None,
):
    # fmt: on
    """A ViT classifier, images `[batch, image_size, image_size, channels]` to class logits.

    Patch embedding (strided convolution), a learned class token and learned
    position embeddings, `depth` Transformer blocks, a final LayerNorm and a
    linear head on the class token (`pool="cls"`) or on the token mean
    (`pool="mean"`): the layout of vit-pytorch, the code the paper's
    experiments build on, with a final LayerNorm for every `norm` as there.

    `norm` picks the block: `"post"` is Algorithm 1, `"pre"` is eq. (19),
    `"deescalate"` is Algorithm 1 plus `DeEscalation(tau)` (eq. 21) at
    `deescalate_at` (the paper's ViT uses `"output"`, Sec. 3.3). The other
    published depth-enabling methods, for comparison (the depth study):
    `"deepnorm"` (DeepNet: `DeepNormBlock` with the encoder constants
    `alpha = (2 depth)^(1/4)`, `beta = (8 depth)^(-1/4)`), `"rezero"`
    (`ReZeroBlock`: no LayerNorm in the blocks, residual weight 0 at init) and
    `"layerscale"` (CaiT: `LayerScaleBlock` with CaiT's depth-dependent
    initial scale). Every variant keeps the final LayerNorm before the head,
    ReZero's included, so the variants differ in their blocks only.

    De-escalation at the output of the last block followed by mean pooling
    would hand the head `(1 - tau)` times the token mean, identically zero at
    the paper's tau = 1: a model that cannot learn. With `pool="mean"` and
    `deescalate_at="output"` the last block therefore does not de-escalate
    (there is no later attention whose input it would diversify). Class-token
    pooling, the paper's, needs no such exception.

    Args:
        depth: int, number of blocks. Defaults to `80` (Table 1).
        norm: `"post"`, `"pre"`, `"deescalate"`, `"deepnorm"`, `"rezero"`,
            `"layerscale"`, `"contranorm"` or another registered layout.
            Defaults to `"deescalate"`.
        image_size: int, side of the square input images. Defaults to `32`.
        patch_size: int, side of a patch. Defaults to `4` (Sec. 3.3).
        channels: int, image channels. Defaults to `3`.
        hidden_dim: int, token width. Defaults to `192` (Table 1).
        ffn_dim: int, FFN width. Defaults to `384` (Table 1).
        num_heads: int, attention heads. Defaults to `8` (head size 24, Table 1).
        num_classes: int, number of classes. Defaults to `10`. `0`: no head, the model returns the
            pooled features `[batch, hidden_dim]` after the final LayerNorm (timm's `num_classes=0`).
        tau: float in [0, 1], de-escalation strength. Defaults to `1.0`.
        trainable_tau: bool, whether tau is learned. Defaults to `False`.
        deescalate_at: `"output"` or `"pre_ffn"`. Defaults to `"output"`.
        pool: `"cls"` or `"mean"`. Defaults to `"cls"`.
        dropout: float in [0, 1), dropout on the embeddings and in every
            block. Defaults to `0.0`.
        drop_path_rate: float in [0, 1), stochastic depth: block `i` drops
            each branch for an example with probability
            `drop_path_rate * i / (depth - 1)` while training (`StochasticDepth`).
            Defaults to `0.0`, the paper's (none).
        activation: FFN activation. Defaults to `"relu"`.
        alpha: positive float scaling self-attention (Algorithm 1). Defaults
            to `1.0`.
        initializer: weight scheme of every kernel and bias (patch
            projection, attention, FFN, head): `"torch"` (PyTorch's
            `nn.Linear`/`nn.Conv2d` default, U(+-1/sqrt(fan_in)) for kernels
            and biases: the code the paper's experiments ran on, Sec. 3.3),
            `"glorot"` (Xavier-uniform kernels, zero biases), `"normal"`
            (N(0, 1/fan_in), Sec. 2.4) or `"transformer_xl"` (N(0, 0.02)).
            Defaults to `"torch"`; zoo/depth_study.md measures the choice.
        embedding_initializer: class token and positions, `"timm"` (std
            0.02) or `"vit_pytorch"` (N(0, 1), `torch.randn`). Defaults to
            `"timm"`.
        scan: bool, run the blocks as one loop over stacked weights (`ScannedBlocks`): the same
            model, compiled as one block (several times less compile time, zoo/speed.md);
            the per-block probes read the loop's outputs. Needs identical blocks: no dropout, and
            not `pool="mean"` with de-escalation at the output (the last block differs there).
            Defaults to `False`: one layer per block.
        remat: bool, recompute each block's activations in the backward pass instead of keeping
            them (`keras.RematScope` on every block): the train step's memory no longer grows with
            every block's activations, for more compute. With `scan=True`, on JAX only. Defaults to
            `False`.
        name: model name. Defaults to `f"vit{depth}_{norm}"`.

    Returns:
        A functional `keras.Model`.

    Example:

    >>> model = keras_tse.zoo.vit(depth=80, norm="deescalate")
    >>> model.count_params()  # 23,8xx,xxx

    Reference:
        Yu & Zhang, Sec. 3.3 and Table 1; Dosovitskiy et al. 2021.
    """
    # the keywords every block receives as they are
    block_options = {key: value for key, value in locals().items() if key in BLOCK_KEYS}
    _checks.positive_int("depth", depth)
    layout = get_layout(norm)  # resolved here once: the blocks receive the `Layout` itself
    norm = layout.name
    _checks.one_of("pool", pool, POOLS)
    _checks.one_of("deescalate_at", deescalate_at, DEESCALATE_AT)
    given = dict(tau=tau, trainable_tau=trainable_tau, deescalate_at=deescalate_at)
    used = (*EQ21_DEFAULTS, "deescalate_at") if layout.deescalates else ("deescalate_at",) if layout.places else ()
    ignored = {key: value for key, value in given.items() if key not in used}  # `deescalate_at`: where it places
    _checks.unused_options(norm, (), ignored, {**EQ21_DEFAULTS, "deescalate_at": "output"})
    _checks.non_negative_int("num_classes", num_classes)
    _checks.positive_int("channels", channels)
    resolve_head_dim(hidden_dim, num_heads)  # a hidden size that does not divide fails up front
    initializers.check(initializer)
    embedding = PatchEmbedding(
        image_size,
        patch_size,
        hidden_dim,
        use_class_token=pool == "cls",
        initializer=initializer,
        embedding_initializer=embedding_initializer,
        name="patch_embedding",
    )
    places = _deescalate_places(layout, depth, deescalate_at, pool)
    drop_rates = linear_rates(drop_path_rate, depth)
    if scan and (dropout or drop_path_rate or len(set(places)) > 1):
        obstacle = _scan_obstacle(dropout, drop_path_rate)
        raise ValueError(f"scan=True needs identical blocks without dropout. Received: {obstacle}")
    if scan and remat and keras.backend.backend() != "jax":
        # measured with Keras 3.15: PyTorch's checkpoint inside the loop gave other gradients, and
        # TensorFlow's recompute_grad fails to trace through the while loop
        raise ValueError(
            f"remat=True with scan=True runs on the JAX backend only. Received: backend "
            f"{keras.backend.backend()!r}; use scan=False there (remat then works per block)"
        )
    layout_options = checked_layout_options(layout, layout_options, tau=tau, trainable_tau=trainable_tau)
    blocks = [
        _vit_block(layout, depth, place, layout_options, {**block_options, "drop_path": rate, "remat": remat}, i)
        for i, (place, rate) in enumerate(list(zip(places, drop_rates))[:1] if scan else zip(places, drop_rates))
    ]

    inputs = keras.Input((image_size, image_size, channels), name="images")
    x = keras.layers.Dropout(dropout, name="embedding_dropout")(embedding(inputs))
    for block in [ScannedBlocks(blocks[0], depth, name="blocks")] if scan else blocks:
        x = block(x)
    x = keras.layers.LayerNormalization(epsilon=1e-5, name="final_norm")(x)
    features = x[:, 0] if pool == "cls" else keras.layers.GlobalAveragePooling1D(name="mean_pool")(x)
    if num_classes == 0:
        return keras.Model(inputs, features, name=name or f"vit{depth}_{norm}_features")
    # float32 logits under a mixed policy: the loss and its softmax see full precision (Keras mixed-precision guide)
    logits = keras.layers.Dense(
        num_classes,
        name="head",
        dtype="float32",
        kernel_initializer=initializers.kernel_initializer(initializer),
        bias_initializer=initializers.bias_initializer(initializer, hidden_dim),
    )(features)
    return keras.Model(inputs, logits, name=name or f"vit{depth}_{norm}")


def _vit_block(layout, depth, place, layout_options, block_options, index):
    """Block `index`: the layout's, or (the last block under mean pooling, `place=None`) its twin without
    eq. (21)."""
    name = f"block_{index:02d}"
    if place is None and layout.deescalates:
        if layout.without_deescalation is None:
            raise ValueError(f"pool='mean' needs a last block without eq. (21). Received: norm={layout.name!r}")
        layout = get_layout(layout.without_deescalation)
    return stack_block(layout, depth, layout_options, deescalate_at=place or "output", **block_options, name=name)


def _scan_obstacle(dropout, drop_path_rate):
    if dropout:
        return f"dropout={dropout}"
    if drop_path_rate:
        return f"drop_path_rate={drop_path_rate} (each block drops at its own rate)"
    return "pool='mean' with deescalate_at='output' (the last block differs)"


def _deescalate_places(layout, depth, deescalate_at, pool):
    """Where each block de-escalates; see `vit`'s docstring for the last block under mean pooling."""
    places = [deescalate_at if layout.deescalates or layout.places else None] * depth
    if pool == "mean" and places[-1] == "output" and layout.deescalates:
        places[-1] = None
    return places
