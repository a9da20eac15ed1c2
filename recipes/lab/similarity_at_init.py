"""Token similarity after each block of a zoo preset at initialisation, mean of a few seeds.

    python -m recipes.lab.similarity_at_init --preset transformer_xl60_wt103_post --batch-size 4 --seeds 3

Transformer-XL presets read real text (CPython's docs, ids below the vocabulary size) and are
measured on the second segment of each stream, after the first has filled the memory, as in
training; ViT presets read synthetic CIFAR-shaped images (`data.synthetic_cifar10`).
"""

import argparse
import time

import keras
import numpy as np

from keras_tse import data, zoo
from keras_tse.analysis.similarity import block_outputs_model, measure_blocks, token_similarity


def probe_batch(model, batch_size):
    """(warm-up inputs or None, probe inputs) for `model`."""
    if isinstance(model, zoo.TransformerXL):
        ids, _ = data.load_python_docs(max_vocab=model.get_config()["vocab_size"])
        x, _ = data.lm_segments(ids["valid"], batch_size, model.input.shape[1])
        return x[:batch_size], x[batch_size : 2 * batch_size]
    (_, _), (images, _) = data.synthetic_cifar10(num_train=1, num_test=batch_size)
    return None, data.normalized(images, data.cifar10.MEAN, data.cifar10.STD)


def profile(preset, batch_size, seeds):
    """NumPy `[seeds, blocks]` of token similarity, and the seconds it took."""
    start, rows = time.perf_counter(), []
    for seed in range(seeds):
        keras.utils.set_random_seed(seed)
        overrides = {"batch_size": batch_size} if zoo.presets()[preset]["builder"] == "transformer_xl" else {}
        model = zoo.from_preset(preset, **overrides)
        warmup, probe = probe_batch(model, batch_size)
        rows.append(measure_blocks(block_outputs_model(model), probe, (token_similarity,), warmup)[0])
    return np.array(rows), time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--preset", required=True, choices=sorted(zoo.presets()))
    parser.add_argument("--batch-size", type=int, default=4)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--blocks", default="1,5,10,20,30,40,50,60,80", help="blocks to print (1-based)")
    args = parser.parse_args(argv)
    values, seconds = profile(args.preset, args.batch_size, args.seeds)
    blocks = [b for b in map(int, args.blocks.split(",")) if b <= values.shape[1]]
    print(
        f"{args.preset}: t_sim after block, mean (min-max) of {args.seeds} seeds, batch {args.batch_size}, "
        f"{keras.backend.backend()}, {seconds:.0f} s"
    )
    for b in blocks:
        column = values[:, b - 1]
        print(f"  block {b:>3}: {column.mean():.4f} ({column.min():.4f}-{column.max():.4f})")
    return values


if __name__ == "__main__":
    main()
