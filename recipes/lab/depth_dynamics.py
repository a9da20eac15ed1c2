"""Why a rate that trains de-escalation at 80 blocks fails it at 160: the first epoch's steps measured.

The depth ladder (zoo/depth80_fashion_mnist.md) ran de-escalation at 160 blocks at the rate chosen at 80
(1e-3) and it failed; the `depth_rates` study found it trains at 160 blocks at 1e-4 and 3e-4. This recipe
trains the ladder's model (width 32, 4 heads, 7x7 patches, 10,000 Fashion-MNIST images, batch 128,
AdamW, every weight decayed, the step schedule of a 2-epoch cell, remat) for one epoch (79 steps) in
three cells: 80 blocks at 1e-3, 160 blocks at 1e-3 and at 3e-4, seed 0, and records at every step the
training loss, each of the first, middle and last blocks' update-to-weight ratio (the norm of the step's
change of the block's weights over their norm before it), and every fourth step DeepNet's model update
(Wang et al. 2022): the change of the model's logits on 64 fixed training images since initialisation,
over their norm at initialisation. Before steps `PROFILE_STEPS`, every block: the norm of the loss gradient
with respect to its weights on that step's batch (`keras_tse.analysis.block_gradient_norms`), and on the 64
images its output's root-mean-square token norm (the residual stream a block hands on) and token similarity
(Definition 1). JAX, float32; a result file and a figure; nothing chooses a rate here.

    KERAS_BACKEND=jax python -m recipes.lab.depth_dynamics --out zoo/depth80_fashion_mnist/depth_dynamics.json
"""

import argparse
import os

import numpy as np

from keras_tse.run_files import new_figure, save_figure, write_json
from recipes.lab import markdown

CELLS = ((80, 1e-3), (160, 1e-3), (160, 3e-4))  # (blocks, learning rate), de-escalation at each
MODEL = dict(norm="deescalate", image_size=28, patch_size=7, channels=1, num_classes=10, hidden_dim=32, ffn_dim=64,
             num_heads=4, initializer="torch", remat=True)  # fmt: skip
TRAIN_SIZE, BATCH, EPOCHS_OF_THE_CELL, PROBE, EVERY = 10_000, 128, 2, 64, 4
PROFILE_STEPS = (0, 1, 5, 20, 40, 78)  # before these steps, every block profiled (step 78: the epoch's last)


def data():
    """The ladder's 10,000 training images (class-balanced, seed 0), normalised as the recipe does."""
    from keras_tse import data as datasets
    from keras_tse.data import balanced_subset

    spec = datasets.get_dataset("fashion_mnist")
    (x, y), _ = spec.load_data(download=False)
    keep = balanced_subset(y, TRAIN_SIZE, 0)
    mean, std = np.asarray(spec.mean, "float32"), np.asarray(spec.std, "float32")
    return datasets.normalized(x[keep], mean, std, spec.value_range), y[keep].astype("int32")


def measure(depth, learning_rate, x, y, steps=None):
    """One cell's per-step records (the whole epoch, or its first `steps`)."""
    import keras

    from keras_tse import zoo
    from keras_tse.training import TrainConfig
    from keras_tse.training.runner import make_optimizer
    from keras_tse.training.tasks import IMAGE_CLASSIFICATION

    keras.utils.set_random_seed(0)
    model = zoo.vit(depth=depth, **MODEL)
    epoch = -(-len(y) // BATCH)
    config = TrainConfig(learning_rate=learning_rate, batch_size=BATCH, epochs=EPOCHS_OF_THE_CELL,
                         weight_decay_rule="all")  # fmt: skip
    IMAGE_CLASSIFICATION.compile(model, make_optimizer(config, epoch, model), jit_compile=True)
    blocks = [layer for layer in model.layers if layer.name.startswith("block_")]
    watched = {"first": blocks[0], "middle": blocks[depth // 2], "last": blocks[-1]}
    probe = x[:PROBE]
    start = model.predict(probe, verbose=0)
    records = {"loss": [], "model_update": [], **{f"update_{k}": [] for k in watched}, "profiles": []}
    before = {k: [np.asarray(w) for w in layer.get_weights()] for k, layer in watched.items()}
    rng = np.random.default_rng(0)
    order = rng.permutation(len(y))
    for step in range(steps or epoch):
        rows = order[step * BATCH : (step + 1) * BATCH]
        if step in PROFILE_STEPS:
            records["profiles"].append({"step": step, **block_profile(model, blocks, x[rows], y[rows], probe)})
        loss = model.train_on_batch(x[rows], y[rows], return_dict=True)["loss"]
        records["loss"].append(float(loss))
        for k, layer in watched.items():
            after = [np.asarray(w) for w in layer.get_weights()]
            change = np.sqrt(sum(float(np.sum((a - b) ** 2)) for a, b in zip(after, before[k])))
            size = np.sqrt(sum(float(np.sum(b**2)) for b in before[k]))
            records[f"update_{k}"].append(change / size)
            before[k] = after
        if step % EVERY == EVERY - 1:
            now = model.predict(probe, verbose=0)
            records["model_update"].append(float(np.linalg.norm(now - start) / np.linalg.norm(start)))
    return records


def block_profile(model, blocks, x, y, probe):
    """Every block of `model` now: its weights' gradient norm on (x, y), and its output's RMS token norm and token
    similarity on `probe`, lists in block order."""
    import keras

    from keras_tse.analysis.gradients import block_gradient_norms
    from keras_tse.analysis.similarity import block_outputs_model, token_similarity

    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)  # the recipe's (no label smoothing here)
    gradients = block_gradient_norms(model, x, y, loss, [block.name for block in blocks])
    outputs = block_outputs_model(model, blocks).predict(probe, batch_size=len(probe), verbose=0)
    return {
        "gradient_norm": [float(g) for g in gradients],
        "stream_norm": [float(np.sqrt(np.mean(np.sum(np.square(o), axis=-1)))) for o in outputs],
        "similarity": [float(np.mean(keras.ops.convert_to_numpy(token_similarity(o)))) for o in outputs],
    }


def plot(results, path):
    fig, axes = new_figure((17, 3.8), ncols=4)
    for cell in results["cells"]:
        label = f"{cell['depth']} blocks, lr {cell['learning_rate']:g}"
        r = cell["records"]
        axes[0].plot(r["loss"], label=label)
        axes[1].semilogy(r["update_last"], label=label)
        axes[2].semilogy(np.arange(1, len(r["model_update"]) + 1) * EVERY, r["model_update"], marker="o", label=label)
        for profile, style in zip((r["profiles"][0], r["profiles"][-1]), ("--", "-")):
            axes[3].semilogy(profile["gradient_norm"], style, color=axes[0].lines[-1].get_color(),
                             label=f"{label}, before step {profile['step'] + 1}")  # fmt: skip
    axes[0].set(xlabel="step", ylabel="training loss")
    axes[1].set(xlabel="step", ylabel="last block: |dW| / |W| a step")
    axes[2].set(xlabel="step", ylabel="model update |f_t - f_0| / |f_0|")
    axes[3].set(xlabel="block", ylabel="|d loss / d W_block|")
    for ax in axes:
        ax.legend(fontsize=7)
    fig.suptitle("De-escalation, ViT width 32, Fashion-MNIST 10k, the first epoch", fontsize=9)
    save_figure(fig, path, dpi=100)


def markdown_table(results):
    """Per cell: the loss at steps 1, 20, 40 and 79; the last block's update ratio, median of the first and
    of the last 20 steps; the model update at steps 20, 40 and 76."""
    lines = [
        "| blocks | lr | loss at step 1 / 20 / 40 / 79 | last block's update ratio, steps 1-20 / 60-79 (median) "
        "| first block's, the same | model update at step 20 / 40 / 76 |",
        "|---:|---:|---|---|---|---|",
    ]
    for cell in results["cells"]:
        r = cell["records"]
        loss = " / ".join(f"{r['loss'][i]:.3f}" for i in (0, 19, 39, len(r["loss"]) - 1))

        update = " / ".join(f"{r['model_update'][i]:.2f}" for i in (4, 9, len(r["model_update"]) - 1))
        lines.append(
            f"| {cell['depth']} | {cell['learning_rate']:g} | {loss} | {_ratio(r, 'update_last')} | "
            f"{_ratio(r, 'update_first')} | {update} |"
        )
    return "\n".join(lines) + (
        f"\n\nSeed 0, batch {BATCH}, {results['machine']}, Keras {results['keras']}, {results['backend']}, float32 "
        "(`zoo/depth80_fashion_mnist/depth_dynamics.json`)."
    )


def profile_table(results):
    """Per cell and profiled step: the gradient norm of the first, middle and last block, its median over the
    blocks and the largest over the smallest; the stream norm's range over the blocks; the largest token
    similarity of any block."""
    header = ("blocks", "lr", "before step", "gradient norm, first / middle / last block", "median block",
              "largest / smallest", "stream norm, every block", "largest similarity")  # fmt: skip
    rows = [_profile_row(cell, p) for cell in results["cells"] for p in cell["records"]["profiles"]]
    return markdown.table(header, rows, right=(0, 1, 2, 4, 5, 7))


def _profile_row(cell, profile):
    g = profile["gradient_norm"]
    return (
        f"{cell['depth']}", f"{cell['learning_rate']:g}", f"{profile['step'] + 1}",
        f"{g[0]:.2e} / {g[len(g) // 2]:.2e} / {g[-1]:.2e}", f"{np.median(g):.3f}", f"{max(g) / min(g):.1f}",
        f"{min(profile['stream_norm']):.2f}-{max(profile['stream_norm']):.2f}", f"{max(profile['similarity']):.1e}",
    )  # fmt: skip


def _ratio(records, key):
    return f"{np.median(records[key][:20]):.2e} / {np.median(records[key][-20:]):.2e}"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="the JSON file to write (its figure beside it, .png)")
    parser.add_argument("--cells", default=None, help="blocks:rate,... (default: the three above); a dry run's")
    parser.add_argument("--steps", type=int, default=None, help="the first N steps only (a dry run)")
    args = parser.parse_args(argv)
    cells = (
        CELLS if args.cells is None else [(int(c.split(":")[0]), float(c.split(":")[1])) for c in args.cells.split(",")]
    )
    import keras

    from keras_tse.machine import machine_name

    x, y = data()
    cells = [{"depth": d, "learning_rate": lr, "records": measure(d, lr, x, y, args.steps)} for d, lr in cells]
    results = {
        "machine": machine_name(),
        "keras": keras.__version__,
        "backend": keras.backend.backend(),
        "cells": cells,
    }
    print(markdown_table(results))
    print(profile_table(results))
    if args.out:
        write_json(args.out, results, indent=1)
        plot(results, os.path.splitext(args.out)[0] + ".png")


if __name__ == "__main__":
    main()
