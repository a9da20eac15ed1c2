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

import ctypes
import importlib
import importlib.util
import json
import os
import platform
import shutil
import subprocess
import sys
from importlib.metadata import PackageNotFoundError, packages_distributions, version

from keras_tse.cli.flags import BACKENDS


def cpu_model():
    """The CPU's model name (`/proc/cpuinfo`, else what Python's platform module says), without (R) and (TM)."""
    names = []
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as handle:
            names = [line.split(":", 1)[1].strip() for line in handle if line.startswith("model name")]
    model = names[0] if names else platform.processor() or "unknown CPU"
    return " ".join(model.replace("(R)", "").replace("(TM)", "").split())


def gpu_name():
    """The first GPU's name as `nvidia-smi` lists it, or "" on a machine without one; asks no backend, so a
    process that trains nothing (a study's) can say where its cells train."""
    if shutil.which("nvidia-smi") is None:
        return ""
    result = subprocess.run(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"], capture_output=True, text=True)
    names = result.stdout.split("\n") if result.returncode == 0 else []
    return names[0].strip() if names else ""


def machine_name():
    """ "<cores>-core <CPU model>", and ", <GPU>" where there is one: the machine a measured time belongs to."""
    gpu = gpu_name()
    return f"{os.cpu_count()}-core {cpu_model()}" + (f", {gpu}" if gpu else "")


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
        if not tensorflow_could_see_a_gpu():
            return ["cpu:0 /physical_device:CPU:0"]  # the name TensorFlow gives its CPU
        tf = importlib.import_module("tensorflow")
        listed = tf.config.list_physical_devices()
        listed = sorted(listed, key=lambda d: d.device_type == "CPU")
        return [f"{d.device_type.lower()}:{d.name.rsplit(':', 1)[-1]} {d.name}" for d in listed]
    return ["cpu:0"]  # numpy: no devices of its own


def tensorflow_could_see_a_gpu():
    """False only where TensorFlow, once imported, could list nothing but the CPU: Linux, no device
    plug-in, and either a build for neither CUDA nor ROCm or no GPU driver to load."""
    if sys.platform != "linux" or os.environ.get("TF_PLUGGABLE_DEVICE_LIBRARY_PATH"):
        return True
    spec = importlib.util.find_spec("tensorflow")
    if spec is None or not spec.submodule_search_locations:
        return True  # not a normal install: let the import say what it is
    package = spec.submodule_search_locations[0]
    if os.path.isdir(os.path.join(os.path.dirname(package), "tensorflow-plugins")):
        return True
    build = _tensorflow_build_info(os.path.join(package, "python", "platform", "build_info.py"))
    if build is None:
        return True
    if build.get("is_cuda_build"):
        return _loadable("libcuda.so.1")
    if build.get("is_rocm_build"):
        return _loadable("libamdhip64.so")
    return False


def _tensorflow_build_info(path):
    """The build's `build_info` dict, read from its one-line generated module without importing
    TensorFlow; None (so TensorFlow is asked) where the file is missing or no longer holds it."""
    try:
        loader = importlib.util.spec_from_file_location("_tensorflow_build_info", path)
        module = importlib.util.module_from_spec(loader)
        loader.loader.exec_module(module)
        return dict(module.build_info)
    except (OSError, ImportError, AttributeError, SyntaxError, TypeError, ValueError):
        return None


def _loadable(library):
    try:
        ctypes.CDLL(library)
    except OSError:
        return False
    return True


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
