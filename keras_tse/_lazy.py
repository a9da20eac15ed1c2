"""The one way keras_tse loads a name on first use: a package's names (PEP 562, `lazy_exports`: `import
keras_tse.data` costs nothing until `data.load_cifar10` is read) and a name written as "module:name"
(`attribute`: a data set's loader), so that a recipe's `--help` or `keras-tse info` starts without Keras
and its backend (2-4 s on the 2-core CPU, most of it TensorFlow's or JAX's own import). A command's
module imports what only its `run` needs inside `run`, for the same reason."""

import importlib
import importlib.util
import sys


def attribute(path):
    """The object "module:name" names, its module imported now."""
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def lazy_exports(package, exports, submodules=()):
    """`(__getattr__, __dir__)` for `package`: `exports` maps each module (a full dotted name) to the public
    names it defines; any other name is tried as a submodule (`data.cifar10`); `submodules` are listed by
    `dir` too."""
    exports = {name: module for module, names in exports.items() for name in names}

    def __getattr__(name):
        if name in exports:
            value = getattr(importlib.import_module(exports[name]), name)
            # kept on the package, so later reads find it without this hook
            setattr(sys.modules[package], name, value)
            return value
        if not name.startswith("__") and importlib.util.find_spec(f"{package}.{name}") is not None:
            return importlib.import_module(f"{package}.{name}")
        raise AttributeError(f"module {package!r} has no attribute {name!r}")

    def __dir__():
        return sorted([*exports, *submodules])

    return __getattr__, __dir__


def load_all(module):
    """Import every name `module.__all__` lists: the eager package it would otherwise be."""
    for name in getattr(module, "__all__", ()):
        getattr(module, name)


def wrapped_spec(hook, fullname, path, target, wrap):
    """For an import hook (a `sys.meta_path` finder): the spec the other finders give for `fullname`, its
    loader's `exec_module` replaced by `wrap(exec_module)`; `None` where none has one."""
    others = (finder for finder in sys.meta_path if finder is not hook and hasattr(finder, "find_spec"))
    spec = next((s for s in (f.find_spec(fullname, path, target) for f in others) if s is not None), None)
    if spec is not None and hasattr(getattr(spec, "loader", None), "exec_module"):
        spec.loader.exec_module = wrap(spec.loader.exec_module)
    return spec


class _AfterImport:
    """A `sys.meta_path` finder that calls `then()` once module `name` has been imported whole (its own
    imports done) and no import of a submodule of package `inside` is under way, then leaves
    `sys.meta_path`; every other import passes it untouched. It counts the imports under way of `name` and
    of `inside`'s submodules: `then()` in the middle of one (`name` imported by such a submodule) would
    re-enter a half-initialised module."""

    def __init__(self, name, then, inside=None):
        self.name, self.then, self.inside, self.depth = name, then, inside, 0

    def _watched(self, fullname):
        return fullname == self.name or (self.inside is not None and fullname.startswith(f"{self.inside}."))

    def find_spec(self, fullname, path=None, target=None):
        return wrapped_spec(self, fullname, path, target, self._counting) if self._watched(fullname) else None

    def _counting(self, exec_module):
        def exec_then(module):
            self.depth += 1
            try:
                exec_module(module)
            finally:
                self.depth -= 1
            if self.depth == 0 and self.name in sys.modules and self in sys.meta_path:
                sys.meta_path.remove(self)
                self.then()

        return exec_then


def after_import(name, then, inside=None):
    """Call `then()` once module `name`, not imported yet, has been imported whole, at a moment when no
    import of a submodule of package `inside` is under way."""
    if not waiting_for(name):
        sys.meta_path.insert(0, _AfterImport(name, then, inside))


def waiting_for(name):
    """Whether an `after_import(name, ...)` has yet to run: `name` is not imported whole."""
    return any(isinstance(f, _AfterImport) and f.name == name for f in sys.meta_path)
