"""Train a ViT on one device and under `--model-parallel 2` on a 2 x 2 mesh of four CPU devices.

Run by tests/test_scale.py in a fresh process, with `XLA_FLAGS=--xla_force_host_platform_device_count=4`
and `KERAS_BACKEND=jax` set before JAX starts. Prints one JSON line: the largest loss and weight
differences per model, and for each sharded kernel the bytes each device holds against its whole size.
"""

import json

import keras
import numpy as np

from keras_tse import zoo
from keras_tse.training import scale

STEPS, GLOBAL_BATCH = 4, 8


def vit_run(scan):
    keras.utils.set_random_seed(0)
    model = zoo.vit(
        depth=2, norm="deescalate", image_size=8, patch_size=2, channels=1, hidden_dim=16, ffn_dim=32, num_heads=2,
        scan=scan,
    )  # fmt: skip
    model.compile(keras.optimizers.AdamW(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(GLOBAL_BATCH * STEPS, 8, 8, 1)).astype("float32")
    y = rng.integers(0, 10, GLOBAL_BATCH * STEPS)
    loss = model.fit(x, y, batch_size=GLOBAL_BATCH, epochs=2, shuffle=False, verbose=0).history["loss"]
    return model, np.array(loss), [np.asarray(v.value) for v in model.trainable_variables]


def held(model):
    """{path: [bytes on each device, whole bytes]} of every variable the layout splits."""
    found = {}
    for v in model.trainable_variables:
        shards = v.value.addressable_shards
        sizes = sorted({shard.data.nbytes for shard in shards})
        if sizes != [v.value.nbytes]:
            found[v.path] = [max(sizes), int(v.value.nbytes)]
    return found


def main():
    single = {scan: vit_run(scan) for scan in (False, True)}
    mesh = scale.use_model_parallel(2)
    report = {"mesh": list(mesh.shape)}
    for scan in (False, True):
        model, loss, weights = vit_run(scan)
        name = "scanned" if scan else "blocks"
        report[f"{name}_loss"] = float(np.max(np.abs(loss - single[scan][1])))
        report[f"{name}_weights"] = max(float(np.max(np.abs(a - b))) for a, b in zip(weights, single[scan][2]))
        report[f"{name}_held"] = held(model)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
