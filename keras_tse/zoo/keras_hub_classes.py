"""Classes built on KerasHub's, made on first use: KerasHub (and TensorFlow with it) is imported then, not with
keras_tse. Each is registered with Keras under its name at once, through a loader whose `from_config` makes
the class and returns the object, so `keras.saving.load_model` needs only `import keras_tse`. Once KerasHub is
imported whole, in either order with keras_tse, every class is made: KerasHub's `Backbone.from_preset` checks
the registered class itself (a subclass of `Backbone`), which a loader is not. Not while KerasHub's import is
under way (it imports Keras, which registers keras_tse's classes): its modules are half made then."""

import importlib
import sys

import keras

from keras_tse._lazy import waiting_for

_MADE = {}
_MAKERS = []


def lazy_class(name, define):
    """A function returning the class `define()` makes (once); `keras_tse>name` registered now."""

    def made():
        if name not in _MADE:
            # KerasHub's import makes every class (`make_all`), in the order declared, each made before the
            # classes built on it: imported here, not inside `define`, no class is asked for half made
            importlib.import_module("keras_hub")
        if name not in _MADE:
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
    _MAKERS.append(made)
    if "keras_hub" in sys.modules and not waiting_for("keras_hub"):
        made()
    return made


def make_all():
    """Make every class registered so far (`keras_tse/__init__.py` calls it once KerasHub is imported)."""
    for made in _MAKERS:
        made()
