"""The shipped image presets quantized: each one's test accuracy as shipped (float32) and after
`model.quantize(mode)` for every mode `keras-tse export --quantize` offers, on the whole test split's raw
images (the preset's preprocessor first), with each model's weights file size.

    KERAS_BACKEND=jax python -m recipes.lab.quantized_presets --out zoo/figures/quantized_presets.json

The result file of the image cards' "Quantized" table (`recipes/lab/generated_tables.py`); a test scores
`vit6_digits` again and finds the file's numbers (tests/test_export.py).
"""

import argparse
import os
import sys
import tempfile

from keras_tse import run_files

PRESETS = {"vit6_digits": "digits", "vit6_fashion_mnist": "fashion_mnist"}  # preset -> its test split's data set


def measure(name, mode=None, folder=None):
    """{"mode", "right", "images", "accuracy", "weights_bytes"} of preset `name`, quantized to `mode` (None:
    as shipped), its weights file written under `folder` to be weighed."""
    from keras_tse import quantization, zoo
    from recipes.lab.ship_presets import evaluate_test_set

    model = zoo.from_preset(name)
    if mode is not None:
        quantization.quantize(model, mode)
    accuracy, images = evaluate_test_set(model, PRESETS[name])
    with tempfile.TemporaryDirectory(dir=folder) as scratch:
        path = os.path.join(scratch, "model.weights.h5")
        model.save_weights(path)
        size = os.path.getsize(path)
    right = round(accuracy * images)
    return {"mode": mode or "float32", "right": right, "images": images, "accuracy": accuracy, "weights_bytes": size}


def results():
    import keras

    from keras_tse.machine import machine_name
    from keras_tse.quantization import MODES

    rows = [measure(name, mode) for name in PRESETS for mode in (None, *MODES)]
    for row, name in zip(rows, [n for n in PRESETS for _ in range(1 + len(MODES))]):
        row["preset"] = name
    return {"backend": keras.backend.backend(), "machine": machine_name(), "rows": rows}


def markdown_table(result, presets=None):
    """The card's table: per preset and mode, test accuracy, its change from float32, and the weights file."""
    lines = [
        "| preset | weights | test accuracy | change | weights file |",
        "|---|---|---:|---:|---:|",
    ]
    floats = {row["preset"]: row for row in result["rows"] if row["mode"] == "float32"}
    for row in result["rows"]:
        if presets is not None and row["preset"] not in presets:
            continue
        base = floats[row["preset"]]
        change = "" if row is base else f"{100 * (row['right'] - base['right']) / row['images']:+.2f} pt"
        size = f"{row['weights_bytes'] / 2**10:,.0f} KiB"
        lines.append(
            f"| {row['preset']} | {row['mode']} | {100 * row['accuracy']:.2f}% ({row['right']:,} of "
            f"{row['images']:,}) | {change} | {size} |"
        )
    where = f"{result['machine']}, {result['backend']}"
    return "\n".join(lines) + (
        f"\n\nEvery quantized model within {largest_change(result, presets):.2f} points of its float32 one. "
        f"From `zoo/figures/quantized_presets.json` ({where}; "
        "`python -m recipes.lab.quantized_presets --out zoo/figures/quantized_presets.json`)."
    )


def largest_change(result, presets=None):
    """The largest change of test accuracy, in points, of a quantized preset from the same preset in float32."""
    floats = {row["preset"]: row["right"] for row in result["rows"] if row["mode"] == "float32"}
    rows = [row for row in result["rows"] if presets is None or row["preset"] in presets]
    return max(100 * abs(row["right"] - floats[row["preset"]]) / row["images"] for row in rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="the result file (.json)")
    args = parser.parse_args(argv)
    run_files.write_json(args.out, results())
    return 0


if __name__ == "__main__":
    sys.exit(main())
