"""What a residual layout is, and the registry of layouts by name.

A block has two bodies (`keras_tse.layers.TransformerBlock`): the post-norm body of Algorithm 1
(`Y2 = LN(alpha X + SA(X))`, `Y4 = LN(alpha Y2 + FFN(Y2))`) and the pre-norm body of eq. (19)
(`Y = X + l_1 SA(LN X)`, `Z = Y + l_2 FFN(LN Y)`). A layout says which body, and fills it in: the
residual factor `alpha` of a post-norm add, the scales `l_b` a pre-norm branch joins with, LayerNorms
or none, kernels redrawn at other gains, and eq. (21) at the block's de-escalation place. A layout
only describes; the block computes. So this package imports no Keras, and a command line lists the
layouts at no cost. Its options are keywords of the block (DeepNorm's `residual_scale`, ...), with
defaults, validated once here, and may follow from the depth of the stack (`for_depth`).

A builder resolves its `norm` once (`get_layout`) and hands the `Layout` itself to every block, which
takes a name or a `Layout` alike. A layout of another installed package joins through an entry point of
the group `keras_tse.layouts` naming its `Layout` subclass:

    [project.entry-points."keras_tse.layouts"]
    sandwich = "my_package.sandwich:Sandwich"
"""

from keras_tse import _checks
from keras_tse._registry import Registry

ENTRY_POINTS = "keras_tse.layouts"
# eq. (21)'s options, which every de-escalating layout takes with these defaults (`Layout.checked`)
EQ21_DEFAULTS = {"tau": 1.0, "trainable_tau": False}


class Layout:
    """One residual layout. Subclass it in a module, set `name` and what differs, and register it
    with `register_layout` (the built-in ones are the modules of `keras_tse.layouts`, one each)."""

    name = None
    rank = 100  # where `layout_names()` lists it: the paper's three first, then the baselines
    body = "post"  # "post": Algorithm 1, a LayerNorm after each add; "pre": eq. (19)
    layer_norm = True  # False: no LayerNorm inside the block (ReZero)
    deescalates = False  # True: eq. (21) at the block's `deescalate_at`
    causal_mean = True  # in a causal block, eq. (21)'s mean over positions <= t; False: over all (leaks)
    branch_norm = False  # True: a LayerNorm on each branch's output before it joins the stream (sandwich)
    places = False  # True: a layer of the layout's own (`placed_layer`) at the block's `deescalate_at`
    causal = True  # False: what the layout places reads every position, so a causal block refuses it
    centred_attention = False  # True: each head's attention is `(P - U) V`, its leading eigenspace removed
    sub_norm = False  # True: a LayerNorm inside each branch before its last projection (Sub-LN)
    sigma_reparam = False  # True: every kernel of the block used as `(gamma / sigma(W)) W` (sigma-reparam)
    without_deescalation = None  # the layout's twin without eq. (21), for a last block before mean pooling
    measurement_only = False  # True: left out of `layout_names()`, a layout that exists to be measured
    defaults = {}  # the layout's own block keywords and their defaults

    def for_depth(self, depth):
        """The options for a stack of `depth` blocks (the published constants that depend on it)."""
        return {}

    def check(self, options):
        """The layout's own `options` (every key of `defaults` but eq. (21)'s) validated: a ValueError
        names a bad one."""
        return options

    def checked(self, options):
        """`options` (every key of `defaults`) validated: eq. (21)'s by `eq21_options`, the rest by `check`."""
        eq21 = {key: options[key] for key in EQ21_DEFAULTS if key in options}
        own = self.check({key: value for key, value in options.items() if key not in EQ21_DEFAULTS})
        return {**(eq21_options(**eq21) if self.deescalates else {}), **own}

    def residual_factor(self, options):
        """The factor on the residual input of a post-norm add (DeepNet's alpha), 1.0 for none."""
        return 1.0

    def kernel_gains(self, options):
        """`None`, or the gain of each kernel redrawn Xavier-normal once the block is built:
        `{"query", "key", "value", "output", "ffn_inner", "ffn_outer"}` -> gain."""
        return None

    def add_weights(self, block, hidden, options):
        """Weights of the layout's own, added to the built block with `block.add_weight`; returns
        what `branch_scale` reads."""
        return None

    def placed_layer(self, options, dtype):
        """The layer a block of a layout that `places` applies at its `deescalate_at`, eq. (21)'s place, where
        the layout's transform of the tokens is compared with eq. (21) itself. Built by the block; imports
        Keras when called, never when the layout is listed."""
        return None

    def branch_scale(self, state, index):
        """The scale branch `index` (0: attention, 1: FFN) joins the residual with, or `None`."""
        return None

    def __repr__(self):
        return f"<layout {self.name!r}: {self.body}-norm body>"


def eq21_options(tau=1.0, trainable_tau=False):
    """Eq. (21)'s options checked, the one place that does: `tau` in [0, 1] (`(I - tau 11^T/n) X` removes
    at most the whole token mean), `trainable_tau` a flag. Returns them as a dict."""
    return {"tau": _checks.unit_interval("tau", tau), "trainable_tau": bool(trainable_tau)}


def register_layout(layout):
    """Register `layout` (a `Layout` subclass, or an instance) under its name and return it, so that
    it can decorate the class. A name is registered once."""
    instance = layout() if isinstance(layout, type) else layout
    if not isinstance(instance, Layout) or not isinstance(instance.name, str) or not instance.name.isidentifier():
        raise ValueError(f"A layout must be a keras_tse.layouts.Layout named by an identifier. Received: {layout!r}")
    if instance.deescalates and instance.places:  # one layer at `deescalate_at`: eq. (21), or the layout's own
        raise ValueError(f"A layout places eq. (21) (`deescalates`) or a layer of its own (`places`), not both. "
                         f"Received: {layout!r}")  # fmt: skip
    LAYOUTS.register(instance.name, instance, same=lambda old, new: type(old).__qualname__ == type(new).__qualname__)
    return layout


# one module of this package a layout (Keras-free): importing it registers it; another package's by entry point
LAYOUTS = Registry(
    "layout", "norm", package="keras_tse.layouts", skip={"layout"}, order=lambda layout: layout.rank,
    entry_points=ENTRY_POINTS, on_entry_point=register_layout,
)  # fmt: skip


def layout_names(measurement=False):
    """Every layout's name, the paper's first; `measurement=True` adds those only measured."""
    return tuple(layout.name for layout in LAYOUTS.items().values() if measurement or not layout.measurement_only)


def get_layout(norm):
    """The layout registered as `norm`, or `norm` itself when it is a `Layout` (resolved already)."""
    return norm if isinstance(norm, Layout) else LAYOUTS.get(norm)


def check_layout_options(norm, options):
    """`options` (a dict of layout `norm`'s own options, as a builder's `layout_options` or the command
    line's `--layout-option` give them) checked: each key one of the layout's, each value valid; a
    ValueError names the key or value and the layout's options. Returns them as a dict."""
    layout = get_layout(norm)
    given = dict(options or {})
    unknown = sorted(set(given) - set(layout.defaults))
    if unknown:
        own = ", ".join(sorted(layout.defaults)) or "none"
        raise ValueError(
            f"`layout_options` {', '.join(unknown)} are not options of norm={layout.name!r} (its options: {own}). "
            f"Received: layout_options={given!r}"
        )
    layout.checked({**layout.defaults, **given})
    return given


def split_options(layout, kwargs):
    """(The layout's options, validated; the other keywords). Another layout's option is dropped
    where it holds that layout's default (a block's config saved before layouts named their own
    options holds them all), and refused otherwise: a setting that silently does nothing is worse
    than an error."""
    options = {key: kwargs.pop(key, default) for key, default in layout.defaults.items()}
    for other in LAYOUTS.items().values():
        for key, default in other.defaults.items():
            if key in kwargs:
                value = kwargs.pop(key)
                if value != default:
                    raise ValueError(
                        f"`{key}` is an option of norm={other.name!r}, which norm={layout.name!r} does not "
                        f"take. Received: norm={layout.name!r}, {key}={value!r}"
                    )
    return layout.checked(options), kwargs
