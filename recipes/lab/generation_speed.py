"""Time per generated token against its position: the GPT's key/value cache (`keras_tse.zoo.generate`)
against reading the whole window again for every token (what a layout without a causal mean does, and
what generation did before the cache).

A GPT of the language-model card's width (`zoo.gpt`: 6 blocks, width 128, 4 heads, FFN 512, a
256-row position table, vocabulary 10,000), random weights, batch 1, greedy, one token at a time from a
one-id prompt to the table's end; each token's wall time, eager (no compiled step: the loop a user's
`generate` call runs). The table gives the median milliseconds a token over three stretches of
positions. JAX unless KERAS_BACKEND says otherwise.

    KERAS_BACKEND=jax python -m recipes.lab.generation_speed --out zoo/figures/generation_speed.json
    KERAS_BACKEND=jax python -m recipes.lab.generation_speed --preset gpt4_ptb \
        --out zoo/figures/generation_gpt4_ptb.json

The second times the shipped `gpt4_ptb` at 200 and 1,000 tokens three ways: the compiled cache (what
`zoo.generate` does), a compiled re-read of the window for every token, and the eager steps generation
took before.

    for b in jax tensorflow torch; do KERAS_BACKEND=$b python -m recipes.lab.generation_speed --batches \
        --out zoo/figures/generation_batches.json; done

The third times `zoo.generate` itself on `gpt4_ptb` at batch 1 and 8, each backend adding its rows to the file:
greedy, no stop token, `BATCH_TOKENS` new tokens from a 3-word prompt (inside the 64-position window: the cached
step alone), with `jit_compile="auto"` and `True` (the same program on JAX and TensorFlow; `torch.compile` on
PyTorch); its first call (compiling) and a second, warm one.
"""

import argparse
import importlib
import json
import os
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
        read = generation.DecodeStep(model, eager=True).reader()  # eager, as this figure was measured
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


# The shipped preset's benchmark (`--preset`): greedy continuations of PROMPT, each way of reading timed from
# a warm start (its programs compiled by one earlier continuation) and, for the compiled ways, from cold too.
PROMPT = "the company said"
LENGTHS = (200, 1000)
COLD = 72  # tokens of the first continuation, timed with its compiling: past gpt4_ptb's 64-position window
WAYS = {
    "compiled cache": ("cache", True),  # what `zoo.generate` does: the cache in the window, compiled re-reads past it
    "compiled window re-read": ("window", True),  # every token a compiled pass over the window
    "eager (before)": ("cache", False),  # what `zoo.generate` did: the same reads, each step eager
}


def continuation_seconds(model, prompt, length, way):
    """Seconds to continue `prompt` greedily by `length` tokens, reading the ids by `way` (WAYS)."""
    generation = importlib.import_module("keras_tse.zoo.generate")
    kind, compiled = WAYS[way]
    jit_compile = "auto" if compiled else False
    reader = generation.gpt_reader if kind == "cache" else generation.window_reader
    read = reader(model, jit_compile)
    ids = np.asarray(prompt, "int32")[None]
    start = time.perf_counter()
    for _ in range(length):
        ids = np.concatenate([ids, np.argmax(read(ids), axis=-1)[:, None].astype("int32")], axis=1)
    return time.perf_counter() - start, ids[0, len(prompt) :].tolist()


def measure_preset(name):
    """{way: {"cold": s, "warm": {length: s}}, "same": whether every way continued alike} for preset `name`,
    each way on a model of its own."""
    from keras_tse import zoo

    runs, texts = {}, set()
    for way, (_, compiled) in WAYS.items():
        model = zoo.from_preset(name)  # its own: nothing another way compiled
        prompt = model.tokenizer.tokenize(PROMPT)
        # past the window, so that both programs (the cached step, the window's pass) are compiled in it
        first = continuation_seconds(model, prompt, COLD, way)[0]
        cold = first if compiled else None
        warm = {}
        for length in LENGTHS:
            warm[length], tokens = continuation_seconds(model, prompt, length, way)
            texts.add((length, tuple(tokens)))
        runs[way] = {"cold": cold, "warm": warm}
    return {"preset": name, "prompt": PROMPT, "runs": runs, "same_tokens": len(texts) == len(LENGTHS)}


def preset_table(results):
    """Tokens a second of each way at each length, and the speed-up over the eager way."""
    runs = results["runs"]
    eager = runs["eager (before)"]["warm"]
    header = " | ".join(f"{n:,} tokens" for n in LENGTHS)
    lines = [f"| reading | {header} | x eager at {LENGTHS[0]} | first {COLD} tokens, compiling |",
             "|---|" + "---:|" * (len(LENGTHS) + 2)]  # fmt: skip
    for way, run in runs.items():
        warm = run["warm"]
        cells = [f"{n / warm[str(n)]:.0f}/s ({warm[str(n)]:.2f} s)" for n in LENGTHS]
        cold = "" if run["cold"] is None else f"{run['cold']:.1f} s"
        lines.append(f"| {way} | {' | '.join(cells)} | {eager[str(LENGTHS[0])] / warm[str(LENGTHS[0])]:.1f} | {cold} |")
    same = "the same tokens every way" if results["same_tokens"] else "**the ways continued differently**"
    return "\n".join(lines) + (
        f'\n\n`{results["preset"]}`, greedy from "{results["prompt"]}", batch 1, {same}; {results["machine"]}, '
        f"Keras {results['keras']}, {results['backend']}, float32; warm (each way's programs compiled by an earlier "
        "continuation) but the last column."
    )


BATCH_TOKENS = 60
BATCHES = (1, 8)


def measure_batches(name="gpt4_ptb"):
    """[{"jit_compile", "batch", "cold_s", "warm_s", "tokens_per_s"}] for `zoo.generate` on preset `name`,
    each setting on a model of its own (nothing another compiled)."""
    import keras

    from keras_tse import zoo

    rows = []
    for jit_compile in ("auto", True):
        if jit_compile is True and keras.backend.backend() != "torch":
            continue  # JAX and TensorFlow compile the same program either way
        for batch in BATCHES:
            model = zoo.from_preset(name)
            prompt = [list(model.tokenizer.tokenize(PROMPT))] * batch
            options = dict(temperature=0, stop_token_ids=None, jit_compile=jit_compile)
            seconds = []
            for _ in range(2):
                start = time.perf_counter()
                ids = zoo.generate(model, prompt, BATCH_TOKENS, **options)
                seconds.append(time.perf_counter() - start)
            assert ids.shape == (batch, len(prompt[0]) + BATCH_TOKENS)
            rows.append({"jit_compile": jit_compile, "batch": batch, "cold_s": seconds[0], "warm_s": seconds[1],
                         "tokens_per_s": batch * BATCH_TOKENS / seconds[1]})  # fmt: skip
    return rows


def batches_table(results):
    """Tokens a second (all rows together) by backend, `jit_compile` and batch, and the first call's seconds."""
    header = " | ".join(f"batch {b}: tokens/s" for b in BATCHES) + " | " + " | ".join(f"batch {b}: first call"
                                                                                     for b in BATCHES)  # fmt: skip
    lines = [f"| backend | jit_compile | {header} |", "|---|---|" + "---:|" * (2 * len(BATCHES))]
    for backend in ("jax", "tensorflow", "torch"):
        if backend not in results["backends"]:
            continue
        run = results["backends"][backend]
        for jit_compile in dict.fromkeys(row["jit_compile"] for row in run["rows"]):
            cells = {row["batch"]: row for row in run["rows"] if row["jit_compile"] == jit_compile}
            rates = [f"{cells[b]['tokens_per_s']:.0f}" for b in BATCHES]
            firsts = [f"{cells[b]['cold_s']:.1f} s" for b in BATCHES]
            lines.append(f"| {backend} | {jit_compile} | {' | '.join(rates)} | {' | '.join(firsts)} |")
    machines = sorted({run["machine"] for run in results["backends"].values()})
    kerases = sorted({run["keras"] for run in results["backends"].values()})
    return "\n".join(lines) + (
        f'\n\n`{results["preset"]}`, `zoo.generate` greedy from "{PROMPT}", {BATCH_TOKENS} new tokens a row, no stop '
        f"token, float32; tokens/s from a second, warm call (all rows' tokens); {', '.join(machines)}, Keras "
        f"{', '.join(kerases)}."
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=None, help="the JSON file to write")
    parser.add_argument("--preset", default=None, help="time a shipped language model's continuations instead")
    parser.add_argument("--batches", action="store_true", help="time zoo.generate at batch 1 and 8 (adds this "
                        "backend's rows to --out)")  # fmt: skip
    args = parser.parse_args(argv)
    import keras

    from keras_tse.machine import machine_name

    about = {"machine": machine_name(), "keras": keras.__version__, "backend": keras.backend.backend()}
    if args.batches:
        results = {"preset": "gpt4_ptb", "backends": {}}
        if args.out and os.path.isfile(args.out):
            with open(args.out) as f:
                results = json.load(f)
        results["backends"][about["backend"]] = {**about, "rows": measure_batches(results["preset"])}
        print(batches_table(results))
    elif args.preset:
        results = json.loads(json.dumps({**about, **measure_preset(args.preset)}))  # lengths as the file keeps them
        print(preset_table(results))
    else:
        results = {**about, "config": CONFIG, "runs": measure()}
        print(markdown_table(results))
    if args.out:
        write_json(args.out, results, indent=1)  # whole, or not at all


if __name__ == "__main__":
    main()
