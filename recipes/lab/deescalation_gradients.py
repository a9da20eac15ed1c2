"""The depth study's open question, at initialisation: does de-escalation's gradient growth towards the
input depend on tau, on where it sits in the block, or on the width?

In the depth study (zoo/depth_study.md) the gradient norm of the first block's weights at init grows
with depth under de-escalation (tau = 1 at every block output) and the deep cells do not train. This
recipe measures that gradient for each combination below on the study's first batch (8x8 digits,
batch 64) with the study's ViT (`zoo.vit`, 2x2 patches, FFN = 2 x width; 4 heads, or the paper's 8
at width 192), and prints one markdown row per combination: mean over seeds of the first and last
block's gradient norm, the growth per block (first / last) ** (1 / (depth - 1)), and t_sim after the
last block. It trains nothing. Each weight scheme (`--inits`: "torch" is the paper's code's,
"glorot" the first study's; keras_tse.layers.initializers) gets its own rows; `--csv` also writes
them to a file, from which the card's table is printed.

    KERAS_BACKEND=jax python -m recipes.lab.deescalation_gradients --csv zoo/depth_study/gradients.csv
"""

import argparse
import csv
import itertools

import keras
import numpy as np

from keras_tse import run_files, zoo
from keras_tse.analysis.gradients import block_gradient_norms
from keras_tse.analysis.similarity import token_similarity_profile
from keras_tse.data import load_digits


def measure(depth, width, tau, place, initializer, seed, x, y):
    keras.utils.set_random_seed(seed)
    norm = "post" if tau == 0 else "deescalate"  # tau 0 is no de-escalation (eq. 21): the post-norm block
    heads = 8 if width == 192 else 4  # 192: the paper's ViT (Table 1: 8 heads of 24, FFN 384); 32: the study's
    model = zoo.vit(
        depth=depth,
        norm=norm,
        tau=tau or 1.0,
        deescalate_at=place,
        image_size=8,
        patch_size=2,
        channels=1,
        hidden_dim=width,
        ffn_dim=2 * width,
        num_heads=heads,
        initializer=initializer,
    )
    loss = keras.losses.SparseCategoricalCrossentropy(from_logits=True)
    grads = block_gradient_norms(model, x, y, loss, [f"block_{i:02d}" for i in range(depth)])
    tsim = token_similarity_profile(model, x)
    return grads[0], grads[-1], tsim[-1]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depths", default="24,48,80")
    parser.add_argument("--widths", default="32,192")
    parser.add_argument("--taus", default="1,0.5,0.25,0", help="0 = no de-escalation (post-norm)")
    parser.add_argument("--places", default="output,pre_ffn")
    parser.add_argument("--seeds", default="0,1")
    parser.add_argument("--inits", default="torch,glorot", help="weight schemes (keras_tse.layers.initializers)")
    parser.add_argument("--csv", help="also write the rows to this CSV file")
    args = parser.parse_args(argv)
    (x, y), _ = load_digits()
    x, y = x[:64].reshape(-1, 8, 8, 1).astype("float32"), y[:64]  # the sweep's first batch (batch 64)
    print(HEADER)
    rows = []
    for initializer, depth, width, tau, place in itertools.product(
        args.inits.split(","),
        [int(v) for v in args.depths.split(",")],
        [int(v) for v in args.widths.split(",")],
        [float(v) for v in args.taus.split(",")],
        args.places.split(","),
    ):
        if tau == 0 and place != "output":
            continue  # no de-escalation has no placement
        values = np.array([measure(depth, width, tau, place, initializer, int(s), x, y) for s in args.seeds.split(",")])
        first, last, tsim = values.mean(axis=0)
        row = dict(
            init=initializer,
            depth=depth,
            width=width,
            tau=tau,
            place=place if tau else "-",
            grad_first=float(first),
            grad_last=float(last),
            tsim_last=float(tsim),
        )
        rows.append(row)
        print(markdown_row(row), flush=True)
    if args.csv:
        run_files.write_csv(args.csv, list(rows[0]), rows)


HEADER = (
    "| init | depth | width | tau | placement | grad norm, first block | last block | growth per block "
    "| t_sim after last block |\n|---|---:|---:|---:|---|---:|---:|---:|---:|"
)


def markdown_row(row):
    """One table row; growth per block = (first / last) ** (1 / (depth - 1))."""
    first, last, depth = float(row["grad_first"]), float(row["grad_last"]), int(row["depth"])
    growth = (first / last) ** (1.0 / (depth - 1))
    return (
        f"| {row['init']} | {depth} | {row['width']} | {float(row['tau']):g} | {row['place']} | {first:.3g} "
        f"| {last:.3g} | {growth:.3f} | {float(row['tsim_last']):.3g} |"
    )


def markdown_table(path):
    """The card's gradient table from the CSV `--csv` wrote."""
    with open(path, newline="") as f:
        return "\n".join([HEADER, *(markdown_row(row) for row in csv.DictReader(f))])


if __name__ == "__main__":
    main()
