"""Argument and shape checks shared by the layers: each error names what it received.

NumPy scalars pass wherever Python numbers do (config files and sweeps hand them over); every check
returns a plain Python int or float, so `get_config` stays JSON.
"""

import numbers


class InputError(ValueError):
    """Bad input to a command or loader (a flag, a file, a folder), as one line:
    `<flag or file>: received <value>; expected <what>`. The commands print it as `<prog>: error: ...`
    and exit with status 2 (`keras_tse.cli.flags.exit_code_of`)."""

    def __init__(self, what, received, expected):
        super().__init__(f"{what}: received {received}; expected {expected}")


class TrainingStopped(Exception):
    """Variants whose training loss became non-finite (`keras_tse.callbacks.StopOnNonFinite`): they stopped,
    their folders keep the last finite epoch's checkpoint and no finished run's numbers. The commands print
    it as one line and exit with status `STOPPED_STATUS`."""


STOPPED_STATUS = 3  # the exit status of a training stopped on a non-finite loss: a study reads its row as diverged


ACTIVATIONS = ("relu", "gelu", "silu", "tanh")


def is_real(value):
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def is_integer(value):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def non_negative_int(name, value):
    if not is_integer(value) or value < 0:
        raise ValueError(f"`{name}` must be an integer >= 0. Received: {name}={value!r}")
    return int(value)


def unit_interval(name, value):
    if not is_real(value) or not 0.0 <= value <= 1.0:
        raise ValueError(f"`{name}` must be a number in [0, 1]. Received: {name}={value!r}")
    return float(value)


def dropout_rate(name, value):
    if not is_real(value) or not 0.0 <= value < 1.0:
        raise ValueError(f"`{name}` must be a number in [0, 1). Received: {name}={value!r}")
    return float(value)


def positive_int(name, value, allow_none=False):
    if value is None and allow_none:
        return None
    if not is_integer(value) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value!r}")
    return int(value)


def positive_float(name, value):
    if not is_real(value) or not 0 < value < float("inf"):
        raise ValueError(f"`{name}` must be a positive number. Received: {name}={value!r}")
    return float(value)


def non_negative_float(name, value):
    if not is_real(value) or not 0.0 <= value < float("inf"):
        raise ValueError(f"`{name}` must be a number >= 0. Received: {name}={value!r}")
    return float(value)


def one_of(name, value, choices):
    if value not in choices:
        raise ValueError(f"`{name}` must be one of {choices}. Received: {name}={value!r}")
    return value


def rank3(layer, shape):
    if len(shape) != 3:
        raise ValueError(
            f"{type(layer).__name__} expects inputs of rank 3, [batch, tokens, dim]. "
            f"Received: inputs.shape={tuple(shape)}"
        )


def token_mask(layer, mask, input_shape):
    """A padding mask must be [batch, tokens], matching the inputs where both are known."""
    if mask is None:
        return
    shape = tuple(mask.shape)
    expected = tuple(input_shape[:2])
    known_equal = all(m is None or e is None or m == e for m, e in zip(shape, expected))
    if len(shape) != 2 or not known_equal:
        raise ValueError(
            f"{type(layer).__name__} expects a mask of shape [batch, tokens] = {expected}. Received: mask.shape={shape}"
        )


def subset_of(name, values, choices):
    """`values` as a tuple, each one of `choices`; else a ValueError naming the unknown ones."""
    unknown = [v for v in values if v not in choices]
    if unknown:
        raise ValueError(f"Unknown {name} {unknown}; choose from {list(choices)}. Received: {name}={values!r}")
    return tuple(values)


def config_fields(config, positive_ints=(), positive_floats=()):
    """Check a settings dataclass in place (its `__post_init__`): each named field a positive int
    or a positive float, stored as a plain Python number. One place for every config's checks."""
    for name in positive_ints:
        setattr(config, name, positive_int(name, getattr(config, name)))
    for name in positive_floats:
        setattr(config, name, positive_float(name, getattr(config, name)))


def unused_options(norm, uses, given, defaults):
    """A ValueError naming the options of `given` that differ from `defaults` when `norm` (not in
    `uses`) would ignore them: a setting that silently does nothing is worse than an error."""
    if norm in uses:
        return
    changed = {key: value for key, value in given.items() if value != defaults[key]}
    if changed:
        settings = ", ".join(f"{key}={value!r}" for key, value in changed.items())
        raise ValueError(
            f"{', '.join(changed)} set(s) de-escalation (eq. 21), which norm={norm!r} does not apply; "
            f"leave them at their defaults or use norm in {uses}. Received: norm={norm!r}, {settings}"
        )
