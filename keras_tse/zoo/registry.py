"""The zoo's model families, each registered once where it is defined: its builder, and what its
models take as input.

A family is a builder of keywords (`vit`, `TransformerXL`); a preset (`presets.py`) is a family
with settings and metadata. `keras_tse.zoo.create_model(name, **overrides)` builds either by name
and `keras_tse.zoo.list_models(pattern)` lists both, as timm's `create_model` and `list_models` do.

A family of another installed package joins through an entry point of the group `keras_tse.families`
naming its builder (registered by this module's decorator where it is defined); it then builds and
trains from the command line too (`keras-tse train vit --model NAME` for an image family):

    [project.entry-points."keras_tse.families"]
    my_vit = "my_package.models:my_vit"
"""

import collections

from keras_tse._registry import Registry

Family = collections.namedtuple("Family", ["builder", "describe_input", "task", "tiny"])

TASKS = ("images", "text")  # what a family's models take, as the data registry names it
ENTRY_POINTS = "keras_tse.families"  # the group other packages register their families under


def register_family(name, describe_input, task="images", tiny=None):
    """Decorate the builder of family `name`; `describe_input(config)` says in words what one of its
    models takes, from every builder keyword (`config`). `task` is what it models: `"images"` (images
    to class logits) or `"text"` (token ids to next-token log-probabilities); `tiny` the builder
    keywords of a model small enough to build and train in a test (timm's test configs): the tests of
    every family run on each registered one with them."""
    if task not in TASKS:
        raise ValueError(f"`task` must be one of {TASKS}. Received: task={task!r}")

    def register(builder):
        FAMILIES.register(name, Family(builder, describe_input, task, dict(tiny or {})))
        return builder

    return register


def _registered(builder):
    """An entry point's builder must be one `register_family` registered (its module's import did)."""
    if not any(family.builder is builder for family in FAMILIES.items().values()):
        raise ValueError(f"{builder!r} is no builder that keras_tse.zoo.registry.register_family registered")


FAMILIES = Registry("model family", "family", entry_points=ENTRY_POINTS, on_entry_point=_registered)


def list_families(task=None):
    """The registered families' names, in registration order: of one `task` if given."""
    return tuple(name for name, family in FAMILIES.items().items() if task is None or family.task == task)


def get_family(name):
    """The family registered as `name`."""
    return FAMILIES.get(name)
