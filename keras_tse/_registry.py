"""One registry of named things of a kind, used by every kind the project names: the residual layouts, the
zoo's model families, the data sets, the `keras-tse` subcommands and the lab's studies.

A registry fills itself on its first read, from two places:
- the modules of its own package (`package`): each imported in name order, so that what it defines
  registers itself (a layout's module), or, with `module_is_entry`, the module itself registered under
  its name (a subcommand's module, a study's);
- the entry points other installed packages declare under `entry_points` (`_plugins`), each read once.
"""

import importlib
import pkgutil

from keras_tse import _plugins


class Registry:
    """Named entries of one kind, in registration order."""

    def __init__(
        self, kind, keyword, *, package=None, skip=(), suffix="", module_is_entry=False, entry_points=None,
        on_entry_point=None, order=None,
    ):  # fmt: skip
        """`kind` names the entries in messages ("layout"), `keyword` the argument that picks one ("norm").
        `package`: the dotted package whose modules are discovered (`skip`: modules that are not entries;
        `suffix`: only modules whose name ends so, the suffix dropped from the entry's name).
        `on_entry_point(obj)`: what an entry point's object does (it registers itself, or is checked).
        `order(entry)`: the key `names` and `items` sort by (stable: registration order among equals)."""
        self.kind, self.keyword = kind, keyword
        self.package, self.skip, self.suffix, self.module_is_entry = package, set(skip), suffix, module_is_entry
        self.entry_points, self.on_entry_point, self.order = entry_points, on_entry_point, order
        self._entries, self._discovered = {}, False

    def register(self, name, entry, same=None):
        """Register `entry` as `name` and return it. A name is registered once: again only with an entry
        that `same(old, new)` (default: equality) says is the one registered."""
        known = self._entries.get(name)
        if known is not None and not (same or (lambda old, new: old == new))(known, entry):
            raise ValueError(f"A {self.kind} named {name!r} is registered already: {known!r}")
        self._entries[name] = entry
        return entry

    def unregister(self, name):
        """Remove the entry `name`, if any: a registration meant for a while (a test's)."""
        self._entries.pop(name, None)

    def get(self, name):
        """The entry registered as `name`; any other name is one line listing the names there are."""
        if name not in self._entries:
            self._fill()
        if not isinstance(name, str) or name not in self._entries:
            raise ValueError(f"`{self.keyword}` must be one of {self.names()}. Received: {self.keyword}={name!r}")
        return self._entries[name]

    def names(self):
        return tuple(self.items())

    def items(self):
        """{name: entry}, in registration order (or by `order`)."""
        self._fill()
        if self.order is None:
            return dict(self._entries)
        return dict(sorted(self._entries.items(), key=lambda item: self.order(item[1])))

    def _fill(self):
        if not self._discovered and self.package is not None:
            self._discovered = True  # first, so that a module reading its own registry does not recurse
            folder = importlib.import_module(self.package).__path__
            for found in sorted(pkgutil.iter_modules(folder), key=lambda module: module.name):
                name = found.name
                if name in self.skip or name.startswith("_") or not name.endswith(self.suffix):
                    continue
                module = importlib.import_module(f"{self.package}.{name}")
                if self.module_is_entry:
                    self.register(name.removesuffix(self.suffix) if self.suffix else name, module, same=_same_module)
        if self.entry_points is not None:
            _plugins.load(self.entry_points, self.on_entry_point)


def _same_module(old, new):
    return old.__name__ == new.__name__
