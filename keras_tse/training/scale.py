"""Speed and scale settings the recipes share: mixed precision, XLA/torch.compile, data parallelism.

Each recipe takes the flags of `keras_tse.cli.flags.add_scale_arguments` and, before it builds a
model, calls `configure(**flags.scale_settings(args))`, one keyword a flag:

- `--mixed-precision [bfloat16|float16]`: the global dtype policy `mixed_bfloat16` (bfloat16 compute,
  float32 variables), or `mixed_float16`, whose training Keras wraps in loss scaling. The zoo keeps
  what must stay exact in float32: LayerNorm (Keras computes it in float32
  under a 16-bit policy), the explicit attention softmax of the probe path, the token mean of
  DeEscalation, the ViT's logits and the adaptive softmax's log-probabilities. The fused
  `ops.dot_product_attention` path takes the flash / cuDNN kernel on a GPU with 16-bit inputs
  (JAX and PyTorch); those kernels accumulate the softmax in float32.
- `--jit-compile`: `compile(jit_compile=True)`: XLA on JAX and TensorFlow; on PyTorch `torch.compile`
  of each block (`block_compile.py`), or of the whole step with `--jit-compile whole_model` (Keras's
  own, slow to compile at depth). Without it Keras's default applies: XLA on JAX, and on TensorFlow
  when a GPU is present; eager PyTorch.
- `--compile-cache DIR` (the flag is `keras_tse.cli.flags`'s, shared with the CLI): the
  backend's persistent compilation cache (`compile_cache.py`), on by default, so a resume or a
  second seed loads its compiled programs instead of compiling them again.
- `--data-parallel`: `keras.distribution.DataParallel` over every device JAX sees (GPUs, or CPU
  devices made with `XLA_FLAGS=--xla_force_host_platform_device_count=N` before JAX starts). Each
  device takes `batch / N` of every batch; variables are replicated and gradients all-reduced.
  Transformer-XL's memory variables are replicated too: every device holds the whole
  `[batch, mem_len, d]` memory, computed in the one global program, so segments keep their order.
- `--coordinator HOST:PORT --num-processes N --process-id I` (or `--distributed auto`, where JAX finds
  the cluster itself: SLURM and the other launchers it knows): N processes, one a host, train as one
  through JAX's distributed runtime (`keras.distribution.initialize`), data parallel over every device
  of every process. Each process feeds its part of every global batch (`data.image_dataset(shard=)`);
  the global batch, learning rate and losses are one process's. On CPU the collectives run on gloo.
- `--model-parallel K`: `keras.distribution.ModelParallel` on a (devices / K, K) mesh of axes
  ("batch", "model"): the batch split over the first axis, and over the second the kernels of
  attention and feed-forward (Megatron's split: the first projection by its output columns, the second
  by its input rows, so each device computes its heads and its part of the hidden layer) and the
  vocabulary of the adaptive embedding (`MODEL_PARALLEL_LAYOUT`). Every other weight is replicated.
"""

import atexit
import contextlib
import functools
import importlib
import os
import shutil
import tempfile

import keras

from keras_tse import peers, run_files
from keras_tse.processes import process
from keras_tse.training import compile_cache
from keras_tse.training.block_compile import WHOLE_MODEL

# --mixed-precision's choices: the global dtype policy of each (float16 trains with Keras's loss scaling,
# which `model.compile` adds under mixed_float16)
MIXED_POLICIES = {"bfloat16": "mixed_bfloat16", "float16": "mixed_float16"}


def configure(
    mixed_precision=False,
    jit_compile=False,
    data_parallel=False,
    compile_cache_dir=None,
    processes=None,
    model_parallel=1,
):
    """Set the global policy, compile cache and distribution asked for; returns the `jit_compile` to use.

    `compile_cache_dir`: a folder, "off", or None for the default (`compile_cache.use_compile_cache`).
    `processes`: None (this process alone), "auto", or `dict(coordinator=, num_processes=, process_id=)`
    (`join_processes`). `model_parallel`: devices on the model axis (`use_model_parallel`), 1 for none.
    """
    if processes is not None:  # first: JAX's runtime must start before anything touches a device
        join_processes(processes)
    configure_precision(mixed_precision)
    compile_cache.use_compile_cache(compile_cache_dir)
    if model_parallel > 1:
        use_model_parallel(model_parallel)
    elif data_parallel or processes is not None:
        use_data_parallel()
    return jit_compile if jit_compile == WHOLE_MODEL else (True if jit_compile else "auto")


def join_processes(processes):
    """Join the other processes of a multi-process run (JAX's distributed runtime); returns `process()`.

    Blocks until every process has joined, so what a process reads before this (a run folder to
    resume) no other process has written yet. With a coordinator, `processes` may also carry the
    `settings` every process must share and the `join_timeout` in seconds (`keras_tse.peers.agree`)."""
    if keras.backend.backend() != "jax":
        raise ValueError(
            "Training over several processes uses keras.distribution, which runs on the JAX backend. "
            f"Received: KERAS_BACKEND={keras.backend.backend()!r}; set KERAS_BACKEND=jax."
        )
    # XLA's CPU collectives across processes need an implementation (gloo ships with jaxlib); GPUs use
    # NCCL whatever this says. Asking which devices there are would start JAX too early.
    importlib.import_module("jax").config.update("jax_cpu_collectives_implementation", "gloo")
    if processes == "auto":
        keras.distribution.initialize()
    else:  # all present, one set of settings, or one line on every process (`keras_tse.peers`)
        peers.agree(
            processes["coordinator"],
            processes["num_processes"],
            processes["process_id"],
            processes.get("settings", {}),
            processes.get("join_timeout", peers.DEFAULT_JOIN_TIMEOUT_S),
        )
        keras.distribution.initialize(
            job_addresses=processes["coordinator"],
            num_processes=processes["num_processes"],
            process_id=processes["process_id"],
        )
        peers.watch()  # a process that ends mid-run stops the others in one line
    return process()


PRIVATE_PREFIX = "keras_tse_process{index}_"  # a process's private copy of the run, in the temp folder
OWNER = "owner.pid"


def remove_stale_copies(root=None):
    """Delete the private copies that killed processes left in the temp folder (`root`): a copy whose
    owner's pid no longer runs. Returns the folders removed."""
    root = root or tempfile.gettempdir()
    removed = []
    for name in sorted(os.listdir(root)):
        folder = os.path.join(root, name)
        if not (name.startswith("keras_tse_process") and os.path.isdir(folder)):
            continue
        try:
            with open(os.path.join(folder, OWNER)) as f:
                pid = int(f.read().strip())
        except (OSError, ValueError):
            continue  # not ours to judge (an older run's copy, or one being made)
        if not _running(pid):
            shutil.rmtree(folder, ignore_errors=True)
            removed.append(folder)
    return removed


def _running(pid):
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # another user's process: it runs
        return True
    return True


def writer_folder(out):
    """The folder this process writes a run into: `out` on process 0 (or alone); on the others a private
    copy of `out` as it is before process 0 writes anything, deleted at exit. Every process then reads
    the same run to resume from, and only process 0's files remain. Call it on every process."""
    index, count = process()
    if count == 1:
        return out
    private = None
    if index > 0:
        remove_stale_copies()
        folder = tempfile.mkdtemp(prefix=PRIVATE_PREFIX.format(index=index))
        run_files.write_text(os.path.join(folder, OWNER), str(os.getpid()))
        private = os.path.join(folder, "run")
        if os.path.isdir(out):
            shutil.copytree(out, private)
        atexit.register(shutil.rmtree, folder, True)
        peers.on_stop(functools.partial(shutil.rmtree, folder, True))  # os._exit skips atexit
    # process 0 writes only once every other process has its copy
    importlib.import_module("jax.experimental.multihost_utils").sync_global_devices("keras_tse run folder")
    return out if private is None else private


def configure_precision(mixed):
    """The global dtype policy: float32 for None or False, else `MIXED_POLICIES[mixed]` (True: bfloat16)."""
    keras.config.set_dtype_policy(MIXED_POLICIES["bfloat16" if mixed is True else mixed] if mixed else "float32")


def use_data_parallel(devices=None):
    """Distribute every later `fit` over `devices` (default: all) by the batch; returns the device list.

    JAX: `keras.distribution.DataParallel`. TensorFlow: `tf.distribute.MirroredStrategy` over the local
    devices, whose models must be built and compiled inside `replica_scope()`. PyTorch: not supported by
    Keras's `fit` (Keras 3.15); a ValueError says so."""
    backend = keras.backend.backend()
    if backend == "tensorflow":
        global _strategy
        _strategy = importlib.import_module("tensorflow").distribute.MirroredStrategy(devices)
        return list(_strategy.extended.worker_devices)
    if backend != "jax":
        raise ValueError(
            "Data parallelism with Keras's fit runs on JAX (keras.distribution) and TensorFlow "
            f"(MirroredStrategy), not yet on PyTorch. Received: KERAS_BACKEND={backend!r}; "
            "set KERAS_BACKEND=jax or tensorflow."
        )
    devices = devices or keras.distribution.list_devices()
    # Each process feeds its own part of every batch (`data.image_dataset(shard=)`), so Keras must not
    # shard the datasets again; with one process there is nothing to shard either way.
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices, auto_shard_dataset=False))
    return devices


_strategy = None  # TensorFlow's MirroredStrategy, once `use_data_parallel` made one


def batch_divisor():
    """What every batch's size must be a multiple of to be split: the devices under data parallelism
    (`keras.distribution` or the MirroredStrategy), else the processes training together."""
    if _strategy is not None:
        return _strategy.num_replicas_in_sync
    distribution = keras.distribution.distribution() if keras.backend.backend() == "jax" else None
    if isinstance(distribution, keras.distribution.DataParallel):
        return len(distribution.device_mesh.devices.reshape(-1))
    return process()[1]


def replica_scope():
    """Where a model is built and compiled: the MirroredStrategy's scope on TensorFlow with data
    parallelism (its variables are then mirrored on every device), else nothing."""
    return _strategy.scope() if _strategy is not None else contextlib.nullcontext()


# variable path (a regex, as keras.distribution.LayoutMap reads it) -> how it is split over "model".
# Blocks built one by one name a kernel `block_07/ffn_inner/kernel`; scanned blocks stack them into
# `blocks/block_00_ffn_inner_kernel` with the depth first, which stays whole.
MODEL_PARALLEL_LAYOUT = {  # LayoutMap matches a whole path (re.fullmatch)
    r".*/(query|key|value|qkv|position)/kernel": (None, "model"),  # by heads: output columns
    r".*/attention_output/kernel": ("model", None),  # by heads: input rows
    r".*/ffn_inner/kernel": (None, "model"),
    r".*/ffn_inner/bias": ("model",),
    r".*/ffn_outer/kernel": ("model", None),
    r".*_(query|key|value|qkv|position)_kernel": (None, None, "model"),
    r".*_attention_output_kernel": (None, "model", None),
    r".*_ffn_inner_kernel": (None, None, "model"),
    r".*_ffn_inner_bias": (None, "model"),
    r".*_ffn_outer_kernel": (None, "model", None),
    r"embedding/embeddings_\d+": ("model", None),  # the adaptive embedding, by vocabulary rows
}


def use_model_parallel(model_devices, devices=None):
    """Distribute every model built after this over a ("batch", "model") mesh with `model_devices` on
    the model axis; returns the mesh. JAX only, as `keras.distribution` is. Attention and feed-forward
    widths (and an adaptive embedding's vocabulary parts) must divide by `model_devices`."""
    if keras.backend.backend() != "jax":
        raise ValueError(
            "Model parallelism here uses keras.distribution, which runs on the JAX backend. "
            f"Received: KERAS_BACKEND={keras.backend.backend()!r}; set KERAS_BACKEND=jax."
        )
    devices = devices or keras.distribution.list_devices()
    if len(devices) % model_devices:
        raise ValueError(
            f"`model_devices` must divide the {len(devices)} devices. Received: model_devices={model_devices}"
        )
    mesh = keras.distribution.DeviceMesh((len(devices) // model_devices, model_devices), ("batch", "model"), devices)
    layout_map = keras.distribution.LayoutMap(mesh)
    for pattern, axes in MODEL_PARALLEL_LAYOUT.items():
        layout_map[pattern] = axes
    keras.distribution.set_distribution(
        keras.distribution.ModelParallel(layout_map=layout_map, batch_dim_name="batch", auto_shard_dataset=False)
    )
    return mesh
