"""Time the first training step of a zoo ViT-12 in a fresh process, with the compile cache in argv[1]
and the blocks scanned where argv[2] is "True".

Run by tests/test_compile_cache.py with `KERAS_BACKEND=jax`. Prints one JSON line: the first step's
seconds, its loss, and the seconds of compiling JAX found in the cache (JAX's own
`/jax/compilation_cache/compile_time_saved_sec` events; 0 when nothing came from the cache).
"""

import json
import sys
import time

import jax
import keras
import numpy as np

from keras_tse import zoo
from keras_tse.training.compile_cache import use_compile_cache

SAVED = "/jax/compilation_cache/compile_time_saved_sec"
saved = []
jax.monitoring.register_event_duration_secs_listener(lambda name, s, **_: saved.append(s) if name == SAVED else None)
use_compile_cache(sys.argv[1])
keras.utils.set_random_seed(0)
model = zoo.vit(
    depth=12,
    image_size=8,
    patch_size=2,
    channels=1,
    hidden_dim=32,
    num_heads=2,
    ffn_dim=64,
    scan=sys.argv[2:] == ["True"],
)
model.compile(keras.optimizers.AdamW(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
x = np.random.default_rng(0).normal(size=(16, 8, 8, 1)).astype("float32")
start, start_cpu = time.perf_counter(), time.process_time()
loss = model.train_on_batch(x, np.arange(16) % 10)
step_s, step_cpu_s = time.perf_counter() - start, time.process_time() - start_cpu
print(json.dumps({"first_step_s": step_s, "first_step_cpu_s": step_cpu_s, "loss": float(loss), "saved_s": sum(saved)}))
