"""Train the same models on one device and under DataParallel over two; print the largest differences.
Then run both training commands with `--mixed-precision --data-parallel --jit-compile` in this process
(the two devices are already here) into the folder given as the first argument.

Run by tests/test_scale.py in a fresh process, with
`XLA_FLAGS=--xla_force_host_platform_device_count=2` and `KERAS_BACKEND=jax` set before JAX starts.
Prints one JSON line: {name: max |difference|} for losses, weights and Transformer-XL log-probs, and each
command's exit code.
"""

import json
import os
import sys

import keras
import numpy as np

from keras_tse import zoo
from keras_tse.cli import train_lm, train_vit
from keras_tse.losses import LogProbabilityCrossentropy
from keras_tse.training import scale

STEPS = 4
GLOBAL_BATCH = 8


def vit_run():
    keras.utils.set_random_seed(0)
    model = zoo.vit(
        depth=3, norm="deescalate", image_size=8, patch_size=2, channels=1, hidden_dim=16, ffn_dim=32, num_heads=2
    )
    model.compile(keras.optimizers.AdamW(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(GLOBAL_BATCH * STEPS, 8, 8, 1)).astype("float32")
    y = rng.integers(0, 10, GLOBAL_BATCH * STEPS)
    history = model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=2, shuffle=False, verbose=0)
    return np.array(history.history["loss"]), [v.numpy() for v in model.trainable_variables]


def txl_run():
    keras.utils.set_random_seed(0)
    model = zoo.transformer_xl(
        depth=2,
        norm="deescalate",
        vocab_size=50,
        hidden_dim=16,
        num_heads=2,
        head_dim=8,
        ffn_dim=32,
        segment_len=6,
        mem_len=6,
        batch_size=GLOBAL_BATCH,
        cutoffs=(20,),
    )
    model.compile(keras.optimizers.Adam(1e-3), LogProbabilityCrossentropy())
    ids = np.random.default_rng(1).integers(0, 50, (GLOBAL_BATCH * 3, 7)).astype("int32")
    # the segments of one row follow each other: batch i holds rows [i*B, (i+1)*B)
    history = model.fit(ids[:, :-1], ids[:, 1:], batch_size=GLOBAL_BATCH, epochs=1, verbose=0)
    memory = np.concatenate([v.numpy().ravel() for v in model.non_trainable_variables if "memory" in v.path])
    model.reset_memory()
    first = model.predict(ids[:GLOBAL_BATCH, :-1], batch_size=GLOBAL_BATCH, verbose=0)
    return np.array(history.history["loss"]), memory, first


def commands_run(out):
    """Each task's smoke run at one block under bfloat16, DataParallel and XLA: {task: exit code}."""
    flags = ["--smoke", "--norm", "deescalate", "--depth", "1", "--mixed-precision", "--data-parallel", "--jit-compile"]
    budgets = {"vit": (train_vit, ["--epochs", "1"]), "lm": (train_lm, ["--steps", "10"])}
    return {
        task: command.main([*flags, *budget, "--out", os.path.join(out, task)])
        for task, (command, budget) in budgets.items()
    }


def main():
    single = vit_run(), txl_run()
    devices = scale.use_data_parallel()
    parallel = vit_run(), txl_run()
    probe = zoo.vit(depth=1, image_size=8, patch_size=2, channels=1, hidden_dim=16, ffn_dim=32, num_heads=2)
    replicas = len(probe.trainable_variables[0].value.sharding.device_set)  # variables live on every device
    diff = lambda a, b: float(np.max(np.abs(np.asarray(a) - np.asarray(b))))  # noqa: E731
    report = {
        "devices": len(devices),
        "replicas": replicas,
        "vit_loss": diff(single[0][0], parallel[0][0]),
        "vit_weights": max(diff(a, b) for a, b in zip(single[0][1], parallel[0][1])),
        "txl_loss": diff(single[1][0], parallel[1][0]),
        "txl_memory": diff(single[1][1], parallel[1][1]),
        "txl_log_probs": diff(single[1][2], parallel[1][2]),
        "txl_memory_size": int(single[1][1].size),
        "commands": commands_run(sys.argv[1]),
    }
    print(json.dumps(report))


if __name__ == "__main__":
    main()
