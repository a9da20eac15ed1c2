"""Train the first step of a zoo ViT-12 in a fresh process, with the compile cache in argv[1] and the
blocks scanned where argv[2] is "True".

Run by tests/test_compile_cache.py with `KERAS_BACKEND=jax`. Prints one JSON line: the step's loss and
JAX's own count of the programs it asked the cache for during the step, found there (`cache_hits`) and not
(`cache_misses`), from its `/jax/compilation_cache/...` monitoring events.
"""

import json
import sys

import jax
import keras
import numpy as np

from keras_tse import zoo
from keras_tse.training.compile_cache import use_compile_cache

EVENTS = {"/jax/compilation_cache/cache_hits": "cache_hits", "/jax/compilation_cache/cache_misses": "cache_misses"}
counts = dict.fromkeys(EVENTS.values(), 0)


def count(name, **_):
    if name in EVENTS:
        counts[EVENTS[name]] += 1


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
jax.monitoring.register_event_listener(count)
loss = model.train_on_batch(x, np.arange(16) % 10)
print(json.dumps({"loss": float(loss), **counts}))
