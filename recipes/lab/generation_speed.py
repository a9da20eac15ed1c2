"""Time per generated token against its position: the GPT's key/value cache (`keras_tse.zoo.generate`)
against reading the whole window again for every token (what a layout without a causal mean does, and
what generation did before the cache).

A GPT of the language-model card's width (`zoo.gpt`: 6 blocks, width 128, 4 heads, FFN 512, a
256-row position table, vocabulary 10,000), random weights, batch 1, greedy, one token at a time from a
one-id prompt to the table's end; each token's wall time, eager (no compiled step: the loop a user's
`generate` call runs). The table gives the median milliseconds a token over three stretches of
positions. JAX unless KERAS_BACKEND says otherwise.

    KERAS_BACKEND=jax python -m recipes.lab.generation_speed --out zoo/figures/generation_speed.json
"""

import argparse
import importlib
import time

import numpy as np

from keras_tse.run_files import write_json

CONFIG = dict(depth=6, vocab_size=10_000, segment_len=256, hidden_dim=128, num_heads=4, ffn_dim=512, cutoffs=())
STRETCHES = ((1, 32), (112, 144), (224, 256))  # positions of the token read, 1-based, inclusive


def token_times(model, cached):
    """Seconds for each token, the k-th generated from a context of k ids."""
    import keras

    generation = importlib.import_module("keras_tse.zoo.generate")
    ids = np.zeros((1, 1), "int32")
    if cached:
        read = generation.cached_gpt_reader(model)
    else:
        window = model.input.shape[1]

        def read(ids):
            padded = np.pad(ids, ((0, 0), (0, window - ids.shape[1])))
            return keras.ops.convert_to_numpy(model(padded, training=False)[:, ids.shape[1] - 1])

    times = []
    while ids.shape[1] <= model.input.shape[1]:
        start = time.perf_counter()
        log_probs = read(ids)
        times.append(time.perf_counter() - start)
        ids = np.concatenate([ids, np.argmax(log_probs, axis=-1)[:, None].astype("int32")], axis=1)
    return times


def measure():
    import keras

    from keras_tse import zoo

    keras.utils.set_random_seed(0)
    model = zoo.gpt(norm="deescalate", **CONFIG)
    runs = {}
    for name, cached in (("cache", True), ("whole window", False)):
        token_times(model, cached)  # a warm pass: the backend's first calls of each shape
        runs[name] = token_times(model, cached)
    return runs


def markdown_table(results):
    header = " | ".join(f"tokens {a}-{b}" for a, b in STRETCHES)
    lines = [f"| reading | {header} |", "|---|" + "---:|" * len(STRETCHES)]
    for name, times in results["runs"].items():
        cells = [f"{1000 * float(np.median(times[a - 1 : b])):.1f} ms" for a, b in STRETCHES]
        lines.append(f"| {name} | {' | '.join(cells)} |")
    config = results["config"]
    return "\n".join(lines) + (
        f"\n\n{results['machine']}, Keras {results['keras']}, {results['backend']}, float32, batch 1, eager; GPT "
        f"{config['depth']} blocks, width {config['hidden_dim']}, {config['segment_len']} positions; median of each "
        "stretch."
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="the JSON file to write")
    args = parser.parse_args(argv)
    import keras

    from keras_tse.cli.info import machine_name

    results = {
        "machine": machine_name(),
        "keras": keras.__version__,
        "backend": keras.backend.backend(),
        "config": CONFIG,
        "runs": measure(),
    }
    print(markdown_table(results))
    if args.out:
        write_json(args.out, results, indent=1)  # whole, or not at all


if __name__ == "__main__":
    main()
