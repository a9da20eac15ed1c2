"""`keras-tse info`: what this install trains on: versions, the backend, the devices it sees, the dtype.

The one check a user needs after a GPU install: `accelerator` is the first non-CPU device the backend
reports, or `none (CPU only)` when training would run on the CPU. `environment()` imports the backend
(that is what it checks) but not Keras: importing Keras took 2.2 s on JAX and 4 s on TensorFlow on
the 2-core CPU, more than the whole answer should. Keras' settings are read the way Keras reads them
at import (`keras_settings`; tests/test_cli.py checks that Keras agrees, keras.json included).
"""

import importlib
import json
import os
import platform
from importlib.metadata import PackageNotFoundError, version


def package_version(name):
    try:
        return version(name)
    except PackageNotFoundError:  # e.g. keras_tse run from a checkout without installing
        return "unknown (not installed)"


def backend_devices(backend):
    """The devices the backend itself lists, as `kind:index name` strings, accelerators first."""
    if backend == "jax":
        jax = importlib.import_module("jax")
        return [f"{d.platform}:{d.id} {d.device_kind}" for d in jax.devices()]
    if backend == "torch":
        torch = importlib.import_module("torch")
        found = [f"cuda:{i} {torch.cuda.get_device_name(i)}" for i in range(torch.cuda.device_count())]
        if getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available():
            found.append("mps:0 Apple GPU")
        return [*found, "cpu:0"]
    if backend == "tensorflow":
        tf = importlib.import_module("tensorflow")
        listed = tf.config.list_physical_devices()
        listed = sorted(listed, key=lambda d: d.device_type == "CPU")
        return [f"{d.device_type.lower()}:{d.name.rsplit(':', 1)[-1]} {d.name}" for d in listed]
    return ["cpu:0"]  # numpy: no devices of its own


def keras_settings():
    """(backend, floatx, image_data_format) as `import keras` would set them in this process: the
    keras.json under $KERAS_HOME (else ~/.keras, or /tmp/.keras where home is not writable), then
    $KERAS_BACKEND over its backend (keras/src/backend/config.py)."""
    home = os.environ.get("KERAS_HOME")
    if home is None:
        base = os.path.expanduser("~")
        home = os.path.join(base if os.access(base, os.W_OK) else "/tmp", ".keras")
    config = {}
    path = os.path.expanduser(os.path.join(home, "keras.json"))
    if os.path.exists(path):
        try:
            with open(path) as f:
                config = json.load(f)
        except ValueError:  # Keras ignores an unreadable file too
            config = {}
    backend = os.environ.get("KERAS_BACKEND") or config.get("backend", "tensorflow")
    return backend, config.get("floatx", "float32"), config.get("image_data_format", "channels_last")


def environment():
    """The facts `keras-tse info` prints, as a dict of strings (and the device list)."""
    backend, floatx, data_format = keras_settings()
    devices = backend_devices(backend)
    accelerators = [d for d in devices if not d.startswith("cpu")]
    return {
        "keras_tse": package_version("keras_tse"),
        "keras": package_version("keras"),
        "backend": backend,
        "backend_version": importlib.import_module(backend).__version__,  # numpy's too, under "numpy"
        "devices": devices,
        "accelerator": accelerators[0] if accelerators else "none (CPU only)",
        "dtype_policy": floatx,  # a fresh process's global policy is floatx's until code sets another
        "image_data_format": data_format,
        "python": platform.python_version(),
    }


def format_environment(facts):
    width = max(len(key) for key in facts)
    lines = []
    for key, value in facts.items():
        shown = ", ".join(value) if isinstance(value, list) else value
        lines.append(f"{key:>{width}}: {shown}")
    return "\n".join(lines)
