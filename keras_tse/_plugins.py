"""Plug-ins: what other installed packages declare under one of keras_tse's entry-point groups
(`keras_tse.datasets`, `keras_tse.families`), read once each, so that it works on the command line too."""

import importlib.metadata
import warnings

_READ = set()  # (group, name, value) of the entry points read already


def load(group, register):
    """`register(obj)` for each entry point of `group` not read yet, `obj` what it names. One that does not
    load, or that `register` refuses, is left out with a warning naming it: a broken plug-in must not stop
    every command."""
    for point in importlib.metadata.entry_points(group=group):
        if (group, point.name, point.value) in _READ:
            continue
        _READ.add((group, point.name, point.value))
        try:
            register(point.load())
        except Exception as error:
            where = f"entry point {point.name!r} = {point.value!r} of {group}"
            warnings.warn(f"{where} is left out: {type(error).__name__}: {error}", stacklevel=3)
