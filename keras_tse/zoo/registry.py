"""The zoo's model families, each registered once where it is defined: its builder, and what its
models take as input.

A family is a builder of keywords (`vit`, `TransformerXL`); a preset (`presets.py`) is a family
with settings and metadata. `keras_tse.zoo.create_model(name, **overrides)` builds either by name
and `keras_tse.zoo.list_models(pattern)` lists both, as timm's `create_model` and `list_models` do.
"""

import collections

Family = collections.namedtuple("Family", ["builder", "describe_input"])

FAMILIES = {}


def register_family(name, describe_input):
    """Decorate the builder of family `name`; `describe_input(config)` says in words what one of its
    models takes, from every builder keyword (`config`)."""

    def register(builder):
        if name in FAMILIES:
            raise ValueError(f"A model family named {name!r} is registered already ({FAMILIES[name].builder}).")
        FAMILIES[name] = Family(builder, describe_input)
        return builder

    return register
