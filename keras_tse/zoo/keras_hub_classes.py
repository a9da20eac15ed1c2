"""Classes built on KerasHub's, made on first use: KerasHub (and TensorFlow with it) is imported then, not with
keras_tse. Each is registered with Keras under its name at once, through a loader whose `from_config` makes
the class and returns the object, so `keras.saving.load_model` needs only `import keras_tse`. Once KerasHub is
imported whole, in either order with keras_tse, every class is made: KerasHub's `Backbone.from_preset` checks
the registered class itself (a subclass of `Backbone`), which a loader is not. Not while KerasHub's import is
under way (it imports Keras, which registers keras_tse's classes): its modules are half made then.
A class built on a KerasHub class that the installed KerasHub lacks (its tasks differ from version to version)
is not made: asked for, it is refused in one line."""

import importlib
import importlib.util
import sys

import keras

from keras_tse._lazy import waiting_for

_MADE = {}
_MAKERS = []


def lazy_class(name, define, needs=()):
    """A function returning the class `define()` makes (once); `keras_tse>name` registered now. `needs`: the
    KerasHub classes ("module:ClassName") it is built on beyond `Backbone` and `Task`."""

    def made():
        if name not in _MADE:
            # KerasHub's import makes every class (`make_all`), in the order declared, each made before the
            # classes built on it: imported here, not inside `define`, no class is asked for half made
            importlib.import_module("keras_hub")
        if name not in _MADE:
            lacking = [kind for kind in needs if not installed(kind)]
            if lacking:
                version = getattr(sys.modules["keras_hub"], "__version__", "?")
                raise ImportError(f"{name} is built on KerasHub's {lacking[0].replace(':', '.')}, which the "
                                  f"installed KerasHub {version} lacks")  # fmt: skip
            _MADE[name] = None  # being made
            try:
                _MADE[name] = keras.saving.register_keras_serializable(package="keras_tse", name=name)(define())
            except BaseException:
                del _MADE[name]
                raise
        return _MADE[name]

    class Loader:
        def get_config(self):  # the registry asks for one; the made class has its own
            return {}

        @classmethod
        def from_config(cls, config):
            return made().from_config(config)

    Loader.__name__ = Loader.__qualname__ = f"{name}Loader"
    keras.saving.register_keras_serializable(package="keras_tse", name=name)(Loader)
    _MAKERS.append((made, needs))
    if "keras_hub" in sys.modules and not waiting_for("keras_hub"):
        _make((made, needs))
    return made


def make_all():
    """Make every class registered so far whose KerasHub classes are installed (`keras_tse/__init__.py` calls
    it once KerasHub is imported)."""
    for maker in _MAKERS:
        _make(maker)


def _make(maker):
    made, needs = maker
    if all(installed(kind) for kind in needs):
        made()


def installed(kind):
    """Whether the installed KerasHub has the class "module:ClassName"."""
    module, _, name = kind.partition(":")
    try:
        found = importlib.util.find_spec(module) is not None
    except ModuleNotFoundError:  # a parent package is missing too
        found = False
    return found and hasattr(importlib.import_module(module), name)
