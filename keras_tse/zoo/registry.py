"""The zoo's model families, each registered once where it is defined: its builder, and what its
models take as input.

A family is a builder of keywords (`vit`, `TransformerXL`); a preset (`presets.py`) is a family
with settings and metadata. `keras_tse.zoo.create_model(name, **overrides)` builds either by name
and `keras_tse.zoo.list_models(pattern)` lists both, as timm's `create_model` and `list_models` do.
"""

import collections

Family = collections.namedtuple("Family", ["builder", "describe_input", "task", "tiny"])

FAMILIES = {}
TASKS = ("images", "text")  # what a family's models take, as the data registry names it


def register_family(name, describe_input, task="images", tiny=None):
    """Decorate the builder of family `name`; `describe_input(config)` says in words what one of its
    models takes, from every builder keyword (`config`). `task` is what it models: `"images"` (images
    to class logits) or `"text"` (token ids to next-token log-probabilities); `tiny` the builder
    keywords of a model small enough to build and train in a test (timm's test configs): the tests of
    every family run on each registered one with them."""
    if task not in TASKS:
        raise ValueError(f"`task` must be one of {TASKS}. Received: task={task!r}")

    def register(builder):
        if name in FAMILIES:
            raise ValueError(f"A model family named {name!r} is registered already ({FAMILIES[name].builder}).")
        FAMILIES[name] = Family(builder, describe_input, task, dict(tiny or {}))
        return builder

    return register


def list_families(task=None):
    """The registered families' names, in registration order: of one `task` if given."""
    return tuple(name for name, family in FAMILIES.items() if task is None or family.task == task)


def get_family(name):
    """The family registered as `name`."""
    if name not in FAMILIES:
        raise ValueError(f"`family` must be one of {list_families()}. Received: family={name!r}")
    return FAMILIES[name]
