"""What TokenSimilarityMetric costs during `fit`, at its default frequency (train begin + epoch ends).

Two measurements, both printed:
1. direct: a real `fit` of `--preset` on synthetic CIFAR-shaped data (`--train-size` images,
   `--epochs` epochs), with the callback's own clock: seconds measuring / seconds training;
2. for a paper-size epoch: one probe measurement (64 images through every block) against the
   median train step of `--preset` at batch 128, scaled to CIFAR-10's 391 steps per epoch.

    KERAS_BACKEND=jax python -m recipes.lab.similarity_overhead --preset vit12_cifar10_small
    KERAS_BACKEND=jax python -m recipes.lab.similarity_overhead --preset vit80_cifar10_deescalate \\
        --steps 5 --direct 0
"""

import argparse
import time

import keras
import numpy as np

from keras_tse import data
from keras_tse.analysis.similarity import block_outputs_model, measure_blocks
from keras_tse.callbacks import TokenSimilarityMetric
from keras_tse.zoo import from_preset

CIFAR_STEPS_PER_EPOCH = 391  # 50,000 images / batch 128


def _compiled(preset):
    keras.utils.set_random_seed(0)
    model = from_preset(preset)
    model.compile(
        keras.optimizers.AdamW(1e-4, weight_decay=0.1), keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    )
    return model


def direct(preset, train_size, epochs, batch_size=128):
    (x, y), (xt, _) = data.synthetic_cifar10(num_train=train_size, num_test=64)
    x, xt = (data.normalized(a, data.cifar10.MEAN, data.cifar10.STD) for a in (x, xt))
    model = _compiled(preset)
    metric = TokenSimilarityMetric(xt)
    model.fit(x, y, batch_size=batch_size, epochs=epochs, callbacks=[metric], verbose=0)
    return metric.overhead


def per_epoch_estimate(preset, steps, batch_size=128):
    (x, y), (xt, _) = data.synthetic_cifar10(num_train=batch_size, num_test=64)
    x, xt = (data.normalized(a, data.cifar10.MEAN, data.cifar10.STD) for a in (x, xt))
    model = _compiled(preset)
    model.train_on_batch(x, y)  # compile
    step_times = []
    for _ in range(steps):
        start = time.perf_counter()
        model.train_on_batch(x, y)
        step_times.append(time.perf_counter() - start)
    probe = block_outputs_model(model)
    measure_blocks(probe, xt)  # compile
    start = time.perf_counter()
    measure_blocks(probe, xt)
    probe_seconds = time.perf_counter() - start
    step = float(np.median(step_times))
    return step, probe_seconds, probe_seconds / (CIFAR_STEPS_PER_EPOCH * step)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", default="vit12_cifar10_small")
    parser.add_argument("--train-size", type=int, default=5120)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10, help="timed train steps for the per-epoch estimate")
    parser.add_argument("--direct", type=int, default=1, help="1: also run the direct measurement")
    args = parser.parse_args()
    print(f"backend {keras.backend.backend()}, preset {args.preset}")
    if args.direct:
        overhead = direct(args.preset, args.train_size, args.epochs)
        print(f"direct: {args.epochs} epochs of {args.train_size} images, batch 128: overhead {overhead:.2%}")
    step, probe, fraction = per_epoch_estimate(args.preset, args.steps)
    print(
        f"train step (batch 128, median of {args.steps}): {step:.3f} s; one probe measurement (64 images): "
        f"{probe:.3f} s; per {CIFAR_STEPS_PER_EPOCH}-step CIFAR-10 epoch: {fraction:.3%}"
    )


if __name__ == "__main__":
    main()
