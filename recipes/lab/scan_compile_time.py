"""Would one scanned loop over the identical blocks compile the deep ViT faster than the unrolled stack?

The 80-block ViT compiles for about 100 s on JAX (an H100, measured by a user), and XLA compiles each
of the 80 blocks anew although they are the same program. JAX codebases run such stacks as one loop,
`scan` over weights stacked along a leading depth axis, so the compiler sees one block. This measures
that on the zoo's model before anything is built on it: the zoo ViT as it is ("unrolled") against the
same embedding and head around one `keras.ops.scan` over its blocks' stacked weights ("scanned",
`keras_tse.layers.ScannedBlocks`),
each in a fresh process (the first compile of a process pays the compiler's own start-up), the
persistent compile cache off. Printed and written to `--out`: the first train step (tracing + compile
+ the step), the median of the next steps, and the largest difference of the two models' logits on
the same weights (they must agree to 1e-5 for the loop to be the same model), and the losses of the
steps on one batch (the same first loss; both falling shows the gradients reach the stacked weights).

    KERAS_BACKEND=jax python -m recipes.lab.scan_compile_time --depth 80 \\
        --out zoo/figures/scan_compile.json

The scanned model is `keras_tse.layers.ScannedBlocks.from_blocks` over the unrolled model's own blocks,
so both start from the same weights; `zoo.vit(scan=True)` builds such a model directly.
"""

import argparse
import os
import sys
import time

import numpy as np

from recipes.lab import fresh_processes

VARIANTS = ("unrolled", "scanned")


def build(variant, depth, hidden_dim):
    import keras

    from keras_tse import zoo
    from keras_tse.layers import ScannedBlocks

    keras.utils.set_random_seed(0)
    model = zoo.vit(depth=depth, norm="deescalate", hidden_dim=hidden_dim, ffn_dim=2 * hidden_dim, num_heads=8)
    if variant == "unrolled":
        return model, model
    blocks = [model.get_layer(f"block_{i:02d}") for i in range(depth)]
    inputs = keras.Input(model.input_shape[1:])
    x = model.get_layer("embedding_dropout")(model.get_layer("patch_embedding")(inputs))
    x = ScannedBlocks.from_blocks(blocks, name="scanned_blocks")(x)
    x = model.get_layer("final_norm")(x)
    return keras.Model(inputs, model.get_layer("head")(x[:, 0]), name="vit_scanned"), model


def measure(variant, depth, hidden_dim, batch_size, steps):
    import keras

    from keras_tse.training.compile_cache import use_compile_cache

    use_compile_cache("off")  # the compile itself is what is measured
    model, unrolled = build(variant, depth, hidden_dim)
    rng = np.random.default_rng(0)
    x = rng.normal(size=(batch_size, 32, 32, 3)).astype("float32")
    y = np.arange(batch_size) % 10
    difference = float(np.max(np.abs(model.predict(x, verbose=0) - unrolled.predict(x, verbose=0))))
    model.compile(keras.optimizers.AdamW(1e-4), keras.losses.SparseCategoricalCrossentropy(from_logits=True))
    start = time.perf_counter()
    losses = [float(model.train_on_batch(x, y))]
    first = time.perf_counter() - start
    times = []
    for _ in range(steps):
        start = time.perf_counter()
        losses.append(float(model.train_on_batch(x, y)))
        times.append(time.perf_counter() - start)
    return {
        "first_step_s": first,
        "step_s": float(np.median(times)),
        "max_logit_difference": difference,
        "losses": losses,  # the same batch each step: equal first losses, then both fall if both train
    }


def run(args):
    import keras  # the backend's name and version, for the record

    argv = ["--depth", str(args.depth), "--hidden-dim", str(args.hidden_dim), "--batch-size", str(args.batch_size)]
    results = fresh_processes.measure_apart(os.path.abspath(__file__), VARIANTS, argv + ["--steps", str(args.steps)])
    settings = {k: getattr(args, k) for k in ("depth", "hidden_dim", "batch_size", "steps")}
    return {"settings": settings, "backend": keras.backend.backend(), "keras": keras.__version__, **results}


def markdown_table(result):
    s = result["settings"]
    lines = [
        f"| ViT-{s['depth']}, width {s['hidden_dim']}, batch {s['batch_size']} | first train step (s) "
        "| later step, median (s) | compile: the first less a later (s) | max logit difference "
        f"| loss at steps 1 and {len(result['unrolled']['losses'])} |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for variant in VARIANTS:
        r = result[variant]
        lines.append(
            f"| {variant} | {r['first_step_s']:.1f} | {r['step_s']:.3f} | {r['first_step_s'] - r['step_s']:.1f} "
            f"| {r['max_logit_difference']:.1e} | {r['losses'][0]:.6f}, {r['losses'][-1]:.4f} |"
        )
    unrolled, scanned = (result[v]["first_step_s"] - result[v]["step_s"] for v in VARIANTS)
    slower = result["scanned"]["step_s"] / result["unrolled"]["step_s"]
    lines.append(f"\nThe scanned loop compiles {unrolled / scanned:.1f}x faster; its later step takes {slower:.2f}x.")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=80, help="blocks (default 80, Table 1)")
    parser.add_argument("--hidden-dim", type=int, default=192, help="width, FFN 2x, 8 heads (default 192, Table 1)")
    parser.add_argument("--batch-size", type=int, default=16, help="images per step (default 16: a CPU's size)")
    parser.add_argument("--steps", type=int, default=5, help="later steps timed (default 5)")

    def measure_variant(variant, args):
        return measure(variant, args.depth, args.hidden_dim, args.batch_size, args.steps)

    return fresh_processes.main(parser, VARIANTS, measure_variant, run, markdown_table, argv)


if __name__ == "__main__":
    sys.exit(main())
