"""The zoo's model families, each registered once where it is defined: its builder, and what its
models take as input.

A family is a builder of keywords (`vit`, `TransformerXL`) with its presets beside it (`vit_presets.py`:
the family with settings and metadata, as KerasHub keeps a model's presets), in a module of
`keras_tse/zoo/families/`: a module added there is found, nothing else to edit.
`keras_tse.zoo.create_model(name, **overrides)` builds either by name
and `keras_tse.zoo.list_models(pattern)` lists both, as timm's `create_model` and `list_models` do.

A family of another installed package joins through an entry point of the group `keras_tse.families`
naming its builder (registered by this module's decorator where it is defined); it then builds and
trains from the command line too (`keras-tse train NAME`, its builder's signature the flags it takes):

    [project.entry-points."keras_tse.families"]
    my_vit = "my_package.models:my_vit"
"""

import collections
import inspect

from keras_tse._registry import Registry

Family = collections.namedtuple(
    "Family",
    ["builder", "describe_input", "task", "tiny", "presets", "title", "base_preset", "smoke_preset"],
    defaults=(None, None, None),
)

TASKS = ("images", "text")  # what a family's models take, as the data registry names it
ENTRY_POINTS = "keras_tse.families"  # the group other packages register their families under


def register_family(
    name, describe_input, task="images", tiny=None, presets=None, title=None, base_preset=None, smoke_preset=None
):
    """Decorate the builder of family `name`; `describe_input(config)` says in words what one of its
    models takes, from every builder keyword (`config`). `task` is what it models: `"images"` (images
    to class logits) or `"text"` (token ids to next-token log-probabilities); `tiny` the builder
    keywords of a model small enough to build and train in a test (timm's test configs): the tests of
    every family run on each registered one with them. `presets`: preset name -> `preset(...)` entry.

    What `keras-tse train` asks of a family besides its builder: `title`, its name in a plot (default:
    `name`); `base_preset`, the preset a run starts from where the family has none of the run's layout
    (None: its builder's defaults); `smoke_preset`, the one `--smoke` starts from (default: `base_preset`)."""
    if task not in TASKS:
        raise ValueError(f"`task` must be one of {TASKS}. Received: task={task!r}")

    def register(builder):
        declared = (title or name, base_preset, smoke_preset or base_preset)
        FAMILIES.register(name, Family(builder, describe_input, task, dict(tiny or {}), dict(presets or {}), *declared))
        return builder

    return register


def preset(config, description, normalization, card, weights=None, learning_rate=None, dataset=None):
    """A preset's entry: its builder keywords (`config`), a line saying what it is, what the data path does
    to its inputs (`normalization`), its model card (`zoo/<card>.md`), the folder of its shipped weights
    (inside `keras_tse/zoo/`; None: none published) and, for a preset the training command builds for its
    layout, the `learning_rate` its recipe trains it at; for trained weights, the `dataset` they were trained on
    (the data registry's name: fine-tuning on it keeps the head)."""
    entry = dict(config=config, description=description, normalization=normalization, card=f"zoo/{card}.md")
    optional = {"learning_rate": learning_rate, "dataset": dataset}
    return {**entry, "weights": weights, **{key: value for key, value in optional.items() if value}}


def _registered(builder):
    """An entry point's builder must be one `register_family` registered (its module's import did)."""
    if not any(family.builder is builder for family in FAMILIES.items().values()):
        raise ValueError(f"{builder!r} is no builder that keras_tse.zoo.registry.register_family registered")


# Every module of `keras_tse.zoo.families` is imported when a family is first asked for: a module there that
# decorates its builder is a family, with no list to edit (as `keras_tse.layouts` finds its layouts).
FAMILIES = Registry(
    "model family", "family", package="keras_tse.zoo.families", entry_points=ENTRY_POINTS, on_entry_point=_registered
)


def list_families(task=None):
    """The registered families' names, in registration order: of one `task` if given."""
    return tuple(name for name, family in FAMILIES.items().items() if task is None or family.task == task)


def get_family(name):
    """The family registered as `name`."""
    return FAMILIES.get(name)


def has_training_presets(family):
    """Whether `family` has presets its training command builds (any with a `learning_rate`)."""
    return any("learning_rate" in entry for entry in FAMILIES.get(family).presets.values())


def preset_for_layout(family, norm):
    """(preset, learning rate, whether `norm` overrides the preset's layout): the preset of `family` that
    its training command builds for layout `norm` (the family's preset of that layout with a
    `learning_rate`), or, for a layout without one (ReZero, a registered layout), the family's such preset
    of its builder's default layout, `norm` over it, at that preset's rate."""
    family_of = FAMILIES.get(family)
    trained = {
        entry["config"]["norm"]: (name, entry["learning_rate"])
        for name, entry in family_of.presets.items()
        if "learning_rate" in entry
    }
    if norm in trained:
        return (*trained[norm], False)
    default = inspect.signature(family_of.builder).parameters["norm"].default
    return (*trained[default], True)


def family_config(family):
    """Every builder keyword of a model of `family` at its builder's defaults (a preset's: `zoo.full_config`)."""
    parameters = inspect.signature(FAMILIES.get(family).builder).parameters.values()
    return {p.name: p.default for p in parameters if p.default is not inspect.Parameter.empty}


def accepts(family, keyword):
    """Whether `family`'s builder takes `keyword`: its signature is the overrides a family declares (one
    with `**kwargs` takes every keyword)."""
    parameters = inspect.signature(FAMILIES.get(family).builder).parameters.values()
    return any(p.name == keyword or p.kind is inspect.Parameter.VAR_KEYWORD for p in parameters)
