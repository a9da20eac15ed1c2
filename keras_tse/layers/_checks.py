"""Argument and shape checks shared by the layers: each error names what it received."""

ACTIVATIONS = ("relu", "gelu", "silu", "tanh")


def unit_interval(name, value):
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 <= value <= 1.0:
        raise ValueError(f"`{name}` must be a number in [0, 1]. Received: {name}={value!r}")
    return float(value)


def dropout_rate(name, value):
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0.0 <= value < 1.0:
        raise ValueError(f"`{name}` must be a number in [0, 1). Received: {name}={value!r}")
    return float(value)


def positive_int(name, value, allow_none=False):
    if value is None and allow_none:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"`{name}` must be a positive integer. Received: {name}={value!r}")
    return value


def positive_float(name, value):
    if not isinstance(value, (int, float)) or isinstance(value, bool) or not value > 0:
        raise ValueError(f"`{name}` must be a positive number. Received: {name}={value!r}")
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
            f"{type(layer).__name__} expects a mask of shape [batch, tokens] = {expected}. "
            f"Received: mask.shape={shape}"
        )
