"""Persistent compilation caches: a second run, a resume or another seed of the same model loads the
backend's compiled programs from disk instead of compiling them again.

Keras has no API for these caches, so this module reaches the backend module itself (as
`keras-tse info` does to list devices), only to point the backend's own cache at a folder; nothing
here computes.

- JAX: XLA executables, keyed by the program and its compile options (`jax_compilation_cache_dir`).
  Measured on the 2-core CPU (tests/test_compile_cache.py): the demo's 62 programs took 34 s of its
  48 s to compile; with a warm cache the same command took 12 s and printed the same numbers.
- PyTorch: inductor's FX-graph and AOTAutograd caches (`TORCHINDUCTOR_CACHE_DIR`); they serve
  `torch.compile` only (`--jit-compile`), the eager default compiles nothing.
- TensorFlow: none wired. Its default CPU path runs graphs, not XLA programs.

The folder holds one subfolder per backend. Default: `$KERAS_TSE_COMPILE_CACHE`, else
`$XDG_CACHE_HOME/keras_tse/compile` (`~/.cache/keras_tse/compile`); `off` compiles anew: on
PyTorch that points inductor at a new empty folder, since its own default (under the system's temp
folder) would otherwise serve what an earlier process compiled.
"""

import importlib
import os
import tempfile
import warnings

ENVIRONMENT_VARIABLE = "KERAS_TSE_COMPILE_CACHE"
OFF = "off"


def default_folder():
    if os.environ.get(ENVIRONMENT_VARIABLE):
        return os.environ[ENVIRONMENT_VARIABLE]
    cache_home = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache_home, "keras_tse", "compile")


def use_compile_cache(folder=None):
    """Point this process's backend at its persistent cache under `folder` (default: `default_folder()`).

    Returns the backend's cache folder, or None where it is off or the backend has none wired.
    Call it before the first `fit`; programs compiled earlier are not written back. A folder the user
    named that cannot be made is an error; the default one (a read-only home) is a warning, and the
    run goes on compiling as it would without the cache.
    """
    import keras  # here, not at the top: the CLI imports this module before it knows it will train

    named = folder is not None
    folder = str(folder) if named else default_folder()
    backend = keras.backend.backend()
    if folder == OFF and backend == "torch":
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = tempfile.mkdtemp(prefix="keras_tse_compile_off_")
    if folder == OFF or backend not in ("jax", "torch"):
        return None
    path = os.path.join(os.path.abspath(os.path.expanduser(folder)), backend)
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as error:
        message = f"The compile cache folder {path} cannot be made ({error}); name another, or '{OFF}'."
        if named:
            raise ValueError(message) from None
        warnings.warn(message + " Compiling without it.", stacklevel=2)
        return None
    if backend == "jax":
        config = importlib.import_module("jax").config
        config.update("jax_compilation_cache_dir", path)
        # JAX's default writes only programs that took over 1 s to compile; a small model's step is
        # many shorter ones (the demo's 62 averaged 0.54 s), so every program is kept.
        config.update("jax_persistent_cache_min_compile_time_secs", 0.0)
    else:
        # read when inductor first compiles, so setting it before the first `fit` is enough
        os.environ["TORCHINDUCTOR_CACHE_DIR"] = path
    return path
