"""Peak memory training a language model on a text folder of `--tokens` training tokens: the splits encoded into
memory against into token files read memory-mapped (`keras_tse.data.token_file`, what `keras-tse train lm
--dataset text` does).

A generated corpus: `--words` distinct words drawn with Zipf's law (the probability of the word of rank r
proportional to 1/r), 20 words a line, so 21 tokens a line with its `<eos>`; valid.txt and test.txt a hundredth
of train.txt each. Each way runs `keras-tse train lm --model gpt` (one block, width 16, 20 steps, the test split
scored) in a fresh process, one after the other; the in-memory way is the same command with the text folder's
loader given no token folder. Two peaks a process: its resident memory as `ru_maxrss` counts it, which takes in
the token files' pages it has read (the kernel's to drop again, as they are the file's), and its own memory, the
largest `RssAnon` of /proc/self/status sampled every 20 ms. The ids take 4 bytes a token.

    KERAS_BACKEND=jax python -m recipes.lab.text_memory --tokens 1000000 --out zoo/figures/text_memory_1m.json
    KERAS_BACKEND=jax python -m recipes.lab.text_memory --tokens 100000000 --out zoo/figures/text_memory.json
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from keras_tse.run_files import replacing
from recipes.lab import fresh_processes

WORDS_A_LINE = 20
WAYS = ("in memory", "token files")
MEASURED = """
import resource, sys, threading, time
way, argv = sys.argv[1], sys.argv[2:]
peak = [0]
def sample():
    while True:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("RssAnon:"):
                    peak[0] = max(peak[0], int(line.split()[1]))
        time.sleep(0.02)
threading.Thread(target=sample, daemon=True).start()
from keras_tse.training import text_runs
if way == "in memory":
    text_runs.token_folder = lambda plan: None  # the text folder's loader then returns its ids in memory
from keras_tse.cli import main as cli
start = time.perf_counter()
code = cli.main(argv)
print(code, time.perf_counter() - start, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss, peak[0])
"""


def write_corpus(folder, tokens, words, seed=0):
    """train.txt of about `tokens` tokens (lines of `WORDS_A_LINE` words and their `<eos>`), valid.txt and
    test.txt a hundredth of it each, written a block of lines at a time. Returns the training tokens."""
    rng = np.random.default_rng(seed)
    vocabulary = np.array([f"w{i}" for i in range(words)])
    zipf = 1 / np.arange(1, words + 1)
    zipf /= zipf.sum()
    os.makedirs(folder, exist_ok=True)
    lines = {"train": tokens // (WORDS_A_LINE + 1)}
    lines["valid"] = lines["test"] = lines["train"] // 100
    for split, count in lines.items():
        with replacing(os.path.join(folder, f"{split}.txt")) as f:
            for first in range(0, count, 100_000):
                drawn = vocabulary[rng.choice(words, (min(100_000, count - first), WORDS_A_LINE), p=zipf)]
                f.write("\n".join(" ".join(row) for row in drawn) + "\n")
    return lines["train"] * (WORDS_A_LINE + 1)


def measure(folder, out):
    """{way: {"peak_rss_mib", "peak_own_mib", "seconds"}}, each way in a fresh process."""
    argv = ["train", "lm", "--model", "gpt", "--dataset", "text", "--data-dir", folder, "--depth", "1"]
    argv += ["--hidden-dim", "16", "--steps", "20", "--eval-interval", "20"]
    argv += ["--norm", "deescalate", "--verbose", "0"]
    runs = {}
    for way in WAYS:
        done = subprocess.run(
            [sys.executable, "-c", MEASURED, way, *argv, "--out", os.path.join(out, way.replace(" ", "_"))],
            capture_output=True, text=True,
        )  # fmt: skip
        last = done.stdout.strip().splitlines()[-1].split() if done.stdout.strip() else []
        if done.returncode or len(last) != 4 or last[0] != "0":
            raise RuntimeError(f"{way}: the training command failed: {done.stdout[-1000:]} {done.stderr[-2000:]}")
        _, seconds, rss_kib, own_kib = last
        runs[way] = {"peak_rss_mib": int(rss_kib) / 1024, "peak_own_mib": int(own_kib) / 1024}
        runs[way]["seconds"] = float(seconds)
        print(way, runs[way], flush=True)
    return runs


def markdown_table(sizes):
    """The table of one or more result files (`sizes`: a list of them, each one corpus size)."""
    head = "| training tokens | the splits read | peak resident memory | own memory (RssAnon) | the command's time |"
    lines = [head, "|---:|---|---:|---:|---:|"]
    for results in sizes:
        for way, run in results["runs"].items():
            lines.append(f"| {results['train_tokens']:,} | {way} | {run['peak_rss_mib']:,.0f} MiB | "
                         f"{run['peak_own_mib']:,.0f} MiB | {run['seconds']:.0f} s |")  # fmt: skip
    last = sizes[-1]
    ids = last["train_tokens"] * 4 / 2**20
    return "\n".join(lines) + (
        f"\n\nAt {last['train_tokens']:,} training tokens: {ids:,.0f} MiB of int32 ids, {last['text_mib']:,.0f} MiB of "
        f"text in train.txt. {last['words']:,} words drawn with Zipf's law, {WORDS_A_LINE} a line; a one-block GPT of "
        f"width 16, 20 steps, the test split scored; the whole process's peaks, Keras and {last['backend']} included; "
        f"{last['machine']}, Keras {last['keras']}."
    )


def run(args):
    """The corpus written to a scratch folder, both ways measured on it; the result file's record."""
    import keras

    from keras_tse.machine import machine_name

    with tempfile.TemporaryDirectory(prefix="text_memory_") as scratch:
        folder, start = os.path.join(scratch, "text"), time.perf_counter()
        train_tokens = write_corpus(folder, args.tokens, args.words)
        text_mib = os.path.getsize(os.path.join(folder, "train.txt")) / 2**20
        print(f"wrote {train_tokens:,} training tokens in {time.perf_counter() - start:.0f} s", flush=True)
        runs = measure(folder, os.path.join(scratch, "runs"))
    provenance = {"machine": machine_name(), "keras": keras.__version__, "backend": keras.backend.backend()}
    return {**provenance, "train_tokens": train_tokens, "words": args.words, "text_mib": text_mib, "runs": runs}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tokens", type=int, default=100_000_000)
    parser.add_argument("--words", type=int, default=10_000)
    parser.add_argument("--out", default=None, help="the JSON file to write")
    args = parser.parse_args(argv)
    result = run(args)
    return fresh_processes.report(result, markdown_table([result]), args.out)


if __name__ == "__main__":
    main()
