"""Speed and scale settings the recipes share: mixed precision, XLA/torch.compile, data parallelism.

Each recipe takes the flags of `keras_tse.experiments.flags.add_scale_arguments` and, before it builds a
model, calls `configure(**flags.scale_settings(args))`, one keyword a flag:

- `--mixed-precision`: the global dtype policy `mixed_bfloat16` (bfloat16 compute, float32
  variables). The zoo keeps what must stay exact in float32: LayerNorm (Keras computes it in float32
  under a 16-bit policy), the explicit attention softmax of the probe path, the token mean of
  DeEscalation, the ViT's logits and the adaptive softmax's log-probabilities. The fused
  `ops.dot_product_attention` path takes the flash / cuDNN kernel on a GPU with 16-bit inputs
  (JAX and PyTorch); those kernels accumulate the softmax in float32.
- `--jit-compile`: `compile(jit_compile=True)`; on PyTorch that is `torch.compile`. Without it
  Keras's default applies: XLA on JAX, and on TensorFlow when a GPU is
  present; eager PyTorch.
- `--compile-cache DIR` (the flag is `keras_tse.experiments.flags`'s, shared with the CLI): the
  backend's persistent compilation cache (`compile_cache.py`), on by default, so a resume or a
  second seed loads its compiled programs instead of compiling them again.
- `--data-parallel`: `keras.distribution.DataParallel` over every device JAX sees (GPUs, or CPU
  devices made with `XLA_FLAGS=--xla_force_host_platform_device_count=N` before JAX starts). Each
  device takes `batch / N` of every batch; variables are replicated and gradients all-reduced.
  Transformer-XL's memory variables are replicated too: every device holds the whole
  `[batch, mem_len, d]` memory, computed in the one global program, so segments keep their order.
"""

import keras

from keras_tse.training import compile_cache

MIXED_POLICY = "mixed_bfloat16"


def configure(mixed_precision=False, jit_compile=False, data_parallel=False, compile_cache_dir=None):
    """Set the global policy, compile cache and distribution asked for; returns the `jit_compile` to use.

    `compile_cache_dir`: a folder, "off", or None for the default (`compile_cache.use_compile_cache`).
    """
    configure_precision(mixed_precision)
    compile_cache.use_compile_cache(compile_cache_dir)
    if data_parallel:
        use_data_parallel()
    return True if jit_compile else "auto"


def configure_precision(mixed):
    keras.config.set_dtype_policy(MIXED_POLICY if mixed else "float32")


def use_data_parallel(devices=None):
    """Distribute every later `fit` over `devices` (default: all) by the batch; returns the device list."""
    if keras.backend.backend() != "jax":
        raise ValueError(
            "Data parallelism here uses keras.distribution, which runs on the JAX backend. "
            f"Received: KERAS_BACKEND={keras.backend.backend()!r}; set KERAS_BACKEND=jax."
        )
    devices = devices or keras.distribution.list_devices()
    keras.distribution.set_distribution(keras.distribution.DataParallel(devices=devices))
    return devices
