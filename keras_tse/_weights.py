"""Copying one model's weights into another's variables."""

import keras


def assign_copy(target, value):
    """`target.assign` of a copy of `value` (a variable or tensor). Under JAX, Keras's compiled steps donate
    the buffers of the variables they are given, and `assign` keeps the array it receives: two models sharing
    one buffer, the first step of one deletes the other's weights."""
    target.assign(keras.ops.copy(value))
