"""The machine a result belongs to, described once: its CPU and GPU as the operating system names them
(`machine_name`, asking no backend: a process that trains nothing, a study's, can say where its cells
train), and the devices a backend lists (`backend_devices`, `accelerator_name`).

Listing a backend's devices is the one reason this module imports a backend: Keras has no API for it, and
the listing computes nothing.
"""

import ctypes
import importlib
import importlib.util
import os
import platform
import shutil
import subprocess
import sys


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
        return [f"{d.device_type.lower()}:{d.name.rsplit(':', 1)[-1]} {_tensorflow_name(tf, d)}" for d in listed]
    return ["cpu:0"]  # numpy: no devices of its own


def _tensorflow_name(tf, device):
    """A GPU's model name where TensorFlow gives one, else its device path (the CPU's is always the path)."""
    details = tf.config.experimental.get_device_details(device) if device.device_type == "GPU" else {}
    return details.get("device_name", device.name)


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


def accelerator_name(backend):
    """The first accelerator `backend` lists (`backend_devices`), by its name; the machine where it lists none."""
    accelerators = [device for device in backend_devices(backend) if not device.startswith("cpu:")]
    return accelerators[0].split(" ", 1)[1] if accelerators else machine_name()
