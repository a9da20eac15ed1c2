"""Train a ViT on one device and under `--data-parallel` on TensorFlow (tf.distribute.MirroredStrategy)
over two logical CPU devices; print the largest differences as one JSON line.

Run by tests/test_scale.py in a fresh process with `KERAS_BACKEND=tensorflow`: the logical devices
must be made before TensorFlow starts.
"""

import json

import tensorflow as tf

cpu = tf.config.list_physical_devices("CPU")[0]
tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)

import keras  # noqa: E402
import numpy as np  # noqa: E402

from keras_tse import zoo  # noqa: E402
from keras_tse.training import scale  # noqa: E402

STEPS, GLOBAL_BATCH = 4, 8


def vit_run():
    with scale.replica_scope():
        keras.utils.set_random_seed(0)
        model = zoo.vit(
            depth=2, norm="deescalate", image_size=8, patch_size=2, channels=1, hidden_dim=16, ffn_dim=32,
            num_heads=2,
        )  # fmt: skip
        model.compile(keras.optimizers.AdamW(1e-3), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    rng = np.random.default_rng(0)
    x = rng.normal(size=(GLOBAL_BATCH * STEPS, 8, 8, 1)).astype("float32")
    y = rng.integers(0, 10, GLOBAL_BATCH * STEPS)
    data = tf.data.Dataset.from_tensor_slices((x, y)).batch(GLOBAL_BATCH)
    loss = model.fit(data, epochs=2, verbose=0).history["loss"]
    return np.array(loss), [np.asarray(v.value) for v in model.trainable_variables], model


def main():
    single = vit_run()
    devices = scale.use_data_parallel()
    mirrored = vit_run()
    print(
        json.dumps(
            {
                "devices": len(devices),
                "replicas": int(mirrored[2].distribute_strategy.num_replicas_in_sync),
                "loss": float(np.max(np.abs(single[0] - mirrored[0]))),
                "weights": max(float(np.max(np.abs(a - b))) for a, b in zip(single[1], mirrored[1])),
            }
        )
    )


if __name__ == "__main__":
    main()
