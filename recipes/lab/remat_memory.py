"""What `remat=True` saves and costs: the train step's memory with and without recomputation, read from
JAX's compiled program, its time, and whether the losses agree.

For each depth, the zoo ViT (`scan=True`: one compiled block whatever the depth; width 32, 4 heads,
FFN 64, 8x8 single-channel images in 2x2 patches, batch 64, the depth-80 card's width) with and without
`remat`, the same weights: XLA's memory analysis of the compiled gradient step (its temporary buffers:
what grows with the kept activations; the arguments and outputs, the weights and gradients, are the
same in both), the median of 5 steps after a warm one, and the largest difference of the losses of 3
SGD steps. JAX only (the compiled program's analysis is JAX's); a CPU answers it as a GPU would in
bytes, not in seconds.

    KERAS_BACKEND=jax python -m recipes.lab.remat_memory --depths 48,80 \\
        --out zoo/figures/remat_memory.json
"""

import argparse
import time

import numpy as np

from keras_tse.run_files import write_json

CONFIG = dict(image_size=8, patch_size=2, channels=1, num_classes=10, hidden_dim=32, ffn_dim=64, num_heads=4)
BATCH = 64


def _step(model):
    """A jitted SGD step over the model's stateless call: (weights, images, labels) -> (loss, weights)."""
    import jax
    import jax.numpy as jnp

    frozen = [v.value for v in model.non_trainable_variables]

    def loss_of(weights, images, labels):
        logits = model.stateless_call(weights, frozen, images)[0]
        picked = jnp.take_along_axis(jax.nn.log_softmax(logits), labels[:, None], axis=-1)
        return -jnp.mean(picked)

    @jax.jit
    def step(weights, images, labels):
        loss, grads = jax.value_and_grad(loss_of)(weights, images, labels)
        return loss, [w - 0.01 * g for w, g in zip(weights, grads)]

    return step


def measure(depth, remat, weights=None):
    import keras

    from keras_tse import zoo

    keras.utils.set_random_seed(0)
    model = zoo.vit(depth=depth, norm="post", scan=True, remat=remat, **CONFIG)
    if weights is not None:
        model.set_weights(weights)
    rng = np.random.default_rng(0)
    images = rng.normal(size=(BATCH, 8, 8, 1)).astype("float32")
    labels = rng.integers(0, 10, BATCH).astype("int32")
    trainable = [v.value for v in model.trainable_variables]
    step = _step(model)
    compiled = step.lower(trainable, images, labels).compile()
    memory = compiled.memory_analysis()
    losses, current = [], trainable
    for _ in range(3):
        loss, current = step(current, images, labels)
        losses.append(float(loss))
    times = []
    for _ in range(5):
        start = time.perf_counter()
        loss, _ = step(trainable, images, labels)
        loss.block_until_ready()
        times.append(time.perf_counter() - start)
    record = {
        "depth": depth,
        "remat": remat,
        "temp_bytes": int(memory.temp_size_in_bytes),
        "argument_bytes": int(memory.argument_size_in_bytes),
        "step_ms": 1000 * float(np.median(times)),
        "losses": losses,
    }
    return record, model.get_weights()


def markdown_table(results):
    lines = [
        "| blocks | remat | step's temporary memory (MiB) | saved | step (ms) | cost | loss difference, 3 steps |",
        "|---:|---|---:|---:|---:|---:|---:|",
    ]
    for depth in sorted({r["depth"] for r in results["runs"]}):
        plain, kept = (
            next(r for r in results["runs"] if r["depth"] == depth and r["remat"] is m) for m in (False, True)
        )
        gap = max(abs(a - b) for a, b in zip(plain["losses"], kept["losses"]))
        for r in (plain, kept):
            saved = f"{1 - r['temp_bytes'] / plain['temp_bytes']:.0%}" if r["remat"] else ""
            cost = f"{r['step_ms'] / plain['step_ms'] - 1:+.0%}" if r["remat"] else ""
            lines.append(
                f"| {depth} | {'yes' if r['remat'] else 'no'} | {r['temp_bytes'] / 2**20:.1f} | {saved} | "
                f"{r['step_ms']:.0f} | {cost} | {f'{gap:.1e}' if r['remat'] else ''} |"
            )
    return "\n".join(lines) + f"\n\n{results['machine']}, JAX {results['jax']}, float32, batch {BATCH}, width 32."


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="48,80", help="comma-separated depths (default: 48,80)")
    parser.add_argument("--out", default=None, help="the JSON file to write")
    args = parser.parse_args(argv)
    import jax
    import keras

    if keras.backend.backend() != "jax":
        parser.error(f"KERAS_BACKEND: received {keras.backend.backend()}; expected jax (XLA's memory analysis)")
    runs = []
    for depth in (int(d) for d in args.depths.split(",")):
        plain, weights = measure(depth, False)
        kept, _ = measure(depth, True, weights)
        runs += [plain, kept]
    from keras_tse.machine import machine_name

    results = {"machine": machine_name(), "jax": jax.__version__, "runs": runs}
    print(markdown_table(results))
    if args.out:
        write_json(args.out, results, indent=1)  # whole, or not at all


if __name__ == "__main__":
    main()
