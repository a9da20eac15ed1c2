"""Peak memory training on an image folder larger than a small model needs: decoded into memory against read
batch by batch (`keras-tse train vit --dataset folder --stream`).

A generated folder of `--images` JPEGs (10 classes, 160 x 160, a smooth colour field and noise each), resized
to `--image-size` on reading; one epoch of a one-block ViT (width 16, patches of 16) in batches of 250, NumPy's
pipeline, each way in a fresh process whose peak resident memory (`ru_maxrss`) and wall time are taken. The
decoded size is what the in-memory path holds: images x size x size x 3 bytes.

    KERAS_BACKEND=jax python -m recipes.lab.stream_memory --images 50000 --image-size 192 \
        --out zoo/figures/stream_memory.json
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

from keras_tse.run_files import write_json

CLASSES, SOURCE_SIDE = 10, 160
WAYS = {"in memory": [], "streamed": ["--stream"]}
MEASURED = """
import resource, subprocess, sys, time
start = time.perf_counter()
code = subprocess.run(sys.argv[1:]).returncode
print(code, time.perf_counter() - start, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
"""


def make_folder(root, images, seed=0):
    """`images` JPEGs in `CLASSES` class folders under `root`."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    for i in range(images):
        label = i % CLASSES
        folder = os.path.join(root, f"class_{label}")
        os.makedirs(folder, exist_ok=True)
        colour = rng.integers(0, 256, 3).astype("float32")
        noise = rng.normal(0, 24, (SOURCE_SIDE // 8, SOURCE_SIDE // 8, 3))
        small = np.clip(colour + noise, 0, 255).astype("uint8")
        Image.fromarray(small).resize((SOURCE_SIDE, SOURCE_SIDE), Image.BILINEAR).save(
            os.path.join(folder, f"{i}.jpg"), quality=85
        )


def measure(folder, image_size, out):
    """{way: {"peak_rss_mib", "seconds"}}, each way one epoch in a fresh process."""
    argv = [sys.executable, "-m", "keras_tse.cli.main", "train", "vit", "--dataset", "folder", "--data-dir", folder]
    argv += ["--image-size", str(image_size), "--patch-size", "16", "--depth", "1", "--hidden-dim", "16"]
    argv += ["--num-heads", "2", "--epochs", "1", "--batch-size", "250", "--norm", "deescalate", "--verbose", "0"]
    argv += ["--data-pipeline", "numpy", "--validation-fraction", "0"]
    runs = {}
    for way, more in WAYS.items():
        done = subprocess.run(
            [sys.executable, "-c", MEASURED, *argv, *more, "--out", os.path.join(out, way.replace(" ", "_"))],
            capture_output=True, text=True, check=True,
        )  # fmt: skip
        code, seconds, kib = done.stdout.strip().splitlines()[-1].split()  # after the command's own output
        if code != "0":
            raise RuntimeError(f"{way}: the training command failed (exit {code}): {done.stderr[-2000:]}")
        runs[way] = {"peak_rss_mib": int(kib) / 1024, "seconds": float(seconds)}
    return runs


def markdown_table(results):
    decoded = results["images"] * results["image_size"] ** 2 * 3 / 2**20
    lines = ["| reading | peak resident memory | of the decoded images | the command's time |", "|---|---:|---:|---:|"]
    for way, run in results["runs"].items():
        share = run["peak_rss_mib"] / decoded
        lines.append(f"| {way} | {run['peak_rss_mib']:,.0f} MiB | {share:.2f}x | {run['seconds']:.0f} s |")
    return "\n".join(lines) + (
        f"\n\n{results['images']:,} JPEGs ({SOURCE_SIDE} x {SOURCE_SIDE}, {CLASSES} classes) resized to "
        f"{results['image_size']} x {results['image_size']}: {decoded:,.0f} MiB decoded as uint8; one epoch of a "
        f"one-block ViT, batch 250, NumPy's pipeline, the test split scored; the whole process's peak "
        f"(`ru_maxrss`, Keras and {results['backend']} included); {results['machine']}, Keras {results['keras']}."
    )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=50_000)
    parser.add_argument("--image-size", type=int, default=192)
    parser.add_argument("--out", default=None, help="the JSON file to write")
    args = parser.parse_args(argv)
    import keras

    from keras_tse.machine import machine_name

    with tempfile.TemporaryDirectory(prefix="stream_memory_") as scratch:
        start = time.perf_counter()
        make_folder(os.path.join(scratch, "images"), args.images)
        print(f"made {args.images:,} images in {time.perf_counter() - start:.0f} s", flush=True)
        runs = measure(os.path.join(scratch, "images"), args.image_size, os.path.join(scratch, "runs"))
    results = {"machine": machine_name(), "keras": keras.__version__, "backend": keras.backend.backend(),
               "images": args.images, "image_size": args.image_size, "runs": runs}  # fmt: skip
    print(markdown_table(json.loads(json.dumps(results))))
    if args.out:
        write_json(args.out, results, indent=1)


if __name__ == "__main__":
    main()
