"""The block of each residual layout (`keras_tse.layouts`) in a stack of a given depth, for the
model families: the layouts' depth-dependent constants (DeepNet's, CaiT's) are chosen here, once."""

import contextlib

import keras

from keras_tse.layers import TransformerBlock, TransformerXLBlock
from keras_tse.layouts import check_layout_options, get_layout
from keras_tse.layouts.layout import EQ21_DEFAULTS
from keras_tse.norms import ESCALATION_PLACED


def block_options(layout, depth, **given):
    """The block keywords of `layout` (a `Layout`) for a stack of `depth`: `given` (the layout's options a
    model was built with) over the layout's constants for that depth."""
    return {**layout.for_depth(depth), **{k: v for k, v in given.items() if k in layout.defaults}}


def checked_layout_options(layout, layout_options, **eq21):
    """The layout options a builder hands its blocks, checked once: eq. (21)'s keywords (`tau`,
    `trainable_tau`, which layouts without it ignore) and `layout_options`, a dict of `layout`'s own
    options (a gate's initial value, DeepNet's constants): each key one of the layout's, its value checked
    by the layout; another key is a ValueError naming the layout's options."""
    options = check_layout_options(layout, layout_options)
    twice = sorted(key for key in set(options) & set(eq21) if eq21[key] != EQ21_DEFAULTS[key])
    if twice:  # eq. (21)'s options enter once: a keyword, or the layout's options, not both
        raise ValueError(
            f"{', '.join(twice)} given twice: as a keyword and in `layout_options`; give one. Received: "
            + ", ".join(f"{key}={eq21[key]!r} and layout_options[{key!r}]={options[key]!r}" for key in twice)
        )
    return {**eq21, **options}


def stack_block(layout, depth, layout_options=None, remat=False, **kwargs):
    """A `TransformerBlock` of `layout` (a `Layout`, or its name) for a stack of `depth` (the ViT's, the
    GPT's); with `remat`,
    its activations are recomputed in the backward pass instead of kept (`keras.RematScope` on this
    block alone: its sublayers run inside its recomputation, so they need none of their own)."""
    layout = get_layout(layout)
    if remat and layout.sigma_reparam:  # JAX's checkpoint would let the vector written inside it escape
        raise ValueError(
            f"remat recomputes a block's call, and a sigma-reparametrised kernel writes its power-iteration vector "
            f"there. Received: remat=True with norm={layout.name!r}; use remat=False"
        )
    scope = keras.RematScope(mode="list_of_layers", layer_names=[kwargs.get("name")]) if remat else None
    with scope or contextlib.nullcontext():
        return TransformerBlock(norm=layout, **block_options(layout, depth, **(layout_options or {})), **kwargs)


def escalation_block(kind, depth, tau=1.0, **kwargs):
    """A block of the escalation measurement: a layout with de-escalation at the output (Sec. 3.3),
    or `"deescalate_pre_ffn"`, de-escalation at the FFN input (Sec. 3.4's placement)."""
    norm, place = ESCALATION_PLACED.get(kind, (kind, "output"))
    return stack_block(norm, depth, dict(tau=tau), deescalate_at=place, **kwargs)


def transformer_xl_block(layout, depth, layout_options=None, **kwargs):
    """Transformer-XL's block of `layout` (a `Layout`) for a stack of `depth`, DeepNet's decoder constants
    or CaiT's scale where the layout takes them."""
    layout = get_layout(layout)
    return TransformerXLBlock(norm=layout, **block_options(layout, depth, **(layout_options or {})), **kwargs)
