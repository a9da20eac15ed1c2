"""Classes built on KerasHub's, made on first use: KerasHub (and TensorFlow with it) is imported then, not with
keras_tse. Each is registered with Keras under its name at once, through a loader whose `from_config` makes
the class and returns the object, so `keras.saving.load_model` needs only `import keras_tse`. Where KerasHub is
imported already, the class is made at once: KerasHub's `Backbone.from_preset` checks the registered class
itself (a subclass of `Backbone`), which a loader is not."""

import sys

import keras

_MADE = {}


def lazy_class(name, define):
    """A function returning the class `define()` makes (once); `keras_tse>name` registered now."""

    def made():
        if name not in _MADE:
            _MADE[name] = keras.saving.register_keras_serializable(package="keras_tse", name=name)(define())
        return _MADE[name]

    class Loader:
        def get_config(self):  # the registry asks for one; the made class has its own
            return {}

        @classmethod
        def from_config(cls, config):
            return made().from_config(config)

    Loader.__name__ = Loader.__qualname__ = f"{name}Loader"
    keras.saving.register_keras_serializable(package="keras_tse", name=name)(Loader)
    if "keras_hub" in sys.modules:
        made()
    return made
