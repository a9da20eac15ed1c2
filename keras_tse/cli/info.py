"""`keras-tse info`: what this install trains on: versions, the backend, the devices it sees, the dtype.

The one check a user needs after a GPU install: `accelerator` is the first non-CPU device the backend
reports, or `none (CPU only)` when training would run on the CPU. `environment()` imports the backend
(that is what it checks) but not Keras: importing Keras took 2.2 s on JAX and 4 s on TensorFlow on
the 2-core CPU, more than the whole answer should. Keras' settings are read the way Keras reads them
at import (`keras_settings`; tests/test_cli.py checks that Keras agrees, keras.json included).

TensorFlow is the exception: importing it takes 3.4-4.5 s on that CPU (3.4 s even with its eager load
of Keras blocked), so on Linux it is imported only where it could see a device beyond the CPU: a CUDA
or ROCm build with the GPU driver loadable, or a device plug-in installed. Without the driver a CUDA
build lists the CPU alone ("Could not find cuda drivers on your machine, GPU will not be used", its
own start-up line), and that is the answer given then, without the import.
"""

import importlib
import json
import os
import platform
from importlib.metadata import PackageNotFoundError, packages_distributions, version

from keras_tse.cli.flags import BACKENDS
from keras_tse.machine import backend_devices


def package_version(name):
    try:
        return version(name)
    except PackageNotFoundError:  # e.g. keras_tse run from a checkout without installing
        return "unknown (not installed)"


def backend_version(backend):
    """The backend's version from its package's metadata, so TensorFlow need not be imported; the
    distribution is whichever installed the module (tensorflow, tensorflow-cpu, tf-nightly...)."""
    try:
        return version(backend)
    except PackageNotFoundError:
        pass
    for distribution in packages_distributions().get(backend, []):
        return version(distribution)
    return importlib.import_module(backend).__version__


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


def process_of(backend):
    """`index of count` among the processes JAX's distributed runtime joined (`0 of 1` alone or
    on another backend), with the devices all of them see together."""
    if backend != "jax":
        return "0 of 1"
    jax = importlib.import_module("jax")
    devices = jax.device_count()
    return f"{jax.process_index()} of {jax.process_count()} ({devices} device{'s' if devices > 1 else ''} in all)"


def environment():
    """The facts `keras-tse info` prints, as a dict of strings (and the device list)."""
    backend, floatx, data_format = keras_settings()
    devices = backend_devices(backend)
    accelerators = [d for d in devices if not d.startswith("cpu")]
    return {
        "keras_tse": package_version("keras_tse"),
        "keras": package_version("keras"),
        "backend": backend,
        "backend_version": backend_version(backend),  # numpy's too, under "numpy"
        # Keras's numpy and openvino backends run a model but cannot fit one
        "trains": "yes"
        if backend in BACKENDS
        else f"no: {backend} runs inference only; train with KERAS_BACKEND={' or '.join(BACKENDS)}",
        "devices": devices,
        "accelerator": accelerators[0] if accelerators else "none (CPU only)",
        "process": process_of(backend),
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
