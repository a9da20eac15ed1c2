"""Collect the seeds of a benchmark study into one committed result file, and print its table.

A study is one recipe command per seed, each into `<runs>/seed_<s>/` (the recipe writes one folder per
variant under it), for example

    for s in 0 1; do KERAS_BACKEND=jax python recipes/cifar10_vit.py --dataset fashion_mnist --depth 24 \\
        --hidden-dim 64 --train-size 12000 --epochs 3 --norm all --seed $s --out runs/fmnist_vit24/seed_$s; done
    python -m recipes.lab.benchmark_results runs/fmnist_vit24 --out zoo/fmnist_vit/depth24.json

The result file holds, per variant and seed, every number a card quotes: the summary of the run
(train loss, test loss and accuracy, or validation and test perplexity), the token similarity after
each block at the first measurement and at the end, the epochs and the wall time, and the run's
settings; its curves (Figure 6 or 7 layout, seed mean with the min-max band) go beside it as a PNG.
The card's tables are printed from the file (`markdown_table`), never typed.
"""

import argparse
import glob
import json
import math
import os
import re
import sys

import numpy as np

from keras_tse import run_files
from keras_tse.training import read_history

RESULTS = {  # the summary keys a card reports, by kind of study, with their column names
    "classification": (("train_loss", "train loss"), ("test_loss", "test loss"), ("test_accuracy", "test accuracy")),
    "language_model": (
        ("train_loss", "train loss"),
        ("train_perplexity", "train ppl"),
        ("valid_perplexity", "valid ppl"),
        ("test_perplexity", "test ppl"),
    ),
}


def collect(runs_root):
    """{"settings", "runs": {variant: [per-seed record]}} of every finished `seed_*/<variant>/` under runs_root."""
    runs, settings = {}, None
    for seed_dir in sorted(glob.glob(os.path.join(runs_root, "seed_*")), key=_seed):
        for summary_path in sorted(glob.glob(os.path.join(seed_dir, "*", "summary.json"))):
            run_dir = os.path.dirname(summary_path)
            with open(summary_path) as f:
                summary = json.load(f)
            with open(os.path.join(run_dir, "config.json")) as f:
                config = json.load(f)
            start, end = run_files.similarity_start_end(os.path.join(run_dir, "similarity.csv"))
            runs.setdefault(os.path.basename(run_dir), []).append(
                {
                    "seed": _seed(seed_dir),
                    "learning_rate": config.get("train", {}).get("learning_rate"),
                    "overrides": config.get("overrides", {}),  # an arm's own settings (tau, placement, ...)
                    **summary,
                    "tsim_start": start,
                    "tsim_end": end,
                }
            )
            settings = settings or {k: v for k, v in config.items() if k not in ("seed", "model")}
    order = ("post", "pre", "deescalate", "deescalate_leaky_global")
    runs = dict(sorted(runs.items(), key=lambda kv: (order.index(kv[0]) if kv[0] in order else len(order), kv[0])))
    if not runs:
        raise SystemExit(f"benchmark_results: no finished run (seed_*/<variant>/summary.json) under {runs_root}")
    kind = "language_model" if "test_perplexity" in next(iter(runs.values()))[0] else "classification"
    if kind == "language_model":  # the mean loss of the last evaluation interval, as a perplexity
        for record in (r for records in runs.values() for r in records):
            record["train_perplexity"] = math.exp(min(record["train_loss"], 700.0))
    return {"kind": kind, "settings": settings, "runs": runs}


def _seed(seed_dir):
    match = re.search(r"seed_(\d+)$", seed_dir.rstrip(os.sep))
    return int(match.group(1)) if match else -1


def markdown_table(results):
    """Per variant: each reported result as seed mean [min, max], the last block's t_sim start -> end, wall time."""
    columns = RESULTS[results["kind"]]
    lines = [
        "| variant | seeds | "
        + " | ".join(name for _, name in columns)
        + " | t_sim last block, start -> end | training time per run (s) |",
        "|---|---:|" + "---:|" * (len(columns) + 2),
    ]
    for variant, records in results["runs"].items():
        cells = []
        for key, _ in columns:
            values = np.array([r[key] for r in records], "float64")
            scale, unit, digits = (100, "%", 2) if key.endswith("accuracy") else (1, "", 4 if "loss" in key else 2)
            cells.append(
                f"{values.mean() * scale:.{digits}f}{unit} [{values.min() * scale:.{digits}f}, "
                f"{values.max() * scale:.{digits}f}]"
            )
        start = np.mean([r["tsim_start"][-1] for r in records])
        end = np.mean([r["tsim_end"][-1] for r in records])
        seconds = np.mean([r["seconds_this_session"] for r in records])
        lines.append(
            f"| {variant} | {len(records)} | " + " | ".join(cells) + f" | {start:.3f} -> {end:.3f} | {seconds:.0f} |"
        )
    return "\n".join(lines)


# A verdict's measures, by kind of study: (summary key, "lower" or "higher" is better).
MEASURES = {
    "classification": (("train_loss", "lower"), ("test_accuracy", "higher")),
    "language_model": (("train_loss", "lower"), ("test_perplexity", "lower")),
}


def compare(results, variant, other):
    """Per measure, how `variant` stands against `other` over the seeds, by the verdict rule of
    zoo/README.md (`recipes.lab.verdicts`), the measures one family: "beat", "fell short of",
    "equivalent to", or "inconclusive against" (with its seed count below the rule's 5 verdict seeds).
    These studies ran fixed rates, no rate selection, so every seed is a verdict seed."""
    from recipes.lab import verdicts

    words = {verdicts.BEATS: "beat", verdicts.LOSES: "fell short of", verdicts.EQUIVALENT: "equivalent to"}
    keys = [key for key, _ in MEASURES[results["kind"]]]
    comparisons = [
        verdicts.measure_seeds(
            {r.get("seed", i): r[key] for i, r in enumerate(results["runs"][variant])},
            {r.get("seed", i): r[key] for i, r in enumerate(results["runs"][other])},
            better == "lower",
            metric=key,
        )
        for key, better in MEASURES[results["kind"]]
    ]
    said = verdicts.stated(comparisons)
    return {key: words.get(verdict, "inconclusive against") for key, verdict in zip(keys, said)}


# What de-escalation is compared with, in this order, where a study trained them: the paper's two and
# the published depth methods (the leaky arm is a measurement, compared in `leak_table` instead).
COMPARED_WITH = ("post", "pre", "deepnorm", "layerscale", "rezero")


def verdicts(results, variant="deescalate", others=None):
    """One line per comparison: where de-escalation beat, was equivalent to or fell short of post- and pre-norm
    and of every published depth method the study trained (`COMPARED_WITH`)."""
    names = {"train_loss": "train loss", "test_accuracy": "test accuracy", "test_perplexity": "test perplexity"}
    if others is None:
        others = [other for other in COMPARED_WITH if other in results["runs"]]
    lines = []
    for other in others:
        verdict = compare(results, variant, other)
        parts = [f"{verdict[key]} {other} on {names[key]}" for key, _ in MEASURES[results["kind"]]]
        lines.append(f"- {variant} " + "; ".join(parts) + f" ({len(results['runs'][variant])} seeds each).")
    return "\n".join(lines)


def leak_table(results, causal="deescalate", leaky="deescalate_leaky_global"):
    """The causal de-escalation beside the leaky one (eq. 21's global segment mean): seed-mean train
    perplexity (the last evaluation interval's mean loss), validation and test perplexity with
    memory, and how far validation sits above training."""
    lines = ["| variant | train ppl | valid ppl | test ppl | valid / train |", "|---|---:|---:|---:|---:|"]
    for variant in (causal, leaky):
        records = results["runs"][variant]
        train, valid, test = (
            np.mean([r[k] for r in records]) for k in ("train_perplexity", "valid_perplexity", "test_perplexity")
        )
        lines.append(f"| {variant} | {train:.2f} | {valid:.2f} | {test:.2f} | {valid / train:.3f} |")
    return "\n".join(lines)


# The language-model study's arms: eq. (21) moved, weakened, learned, or with its mean over the segment
# only, and the leaky global mean trained again (then read causally); beside the card's first study.
STUDY_ARMS = {
    "deescalate_output": "causal eq. (21) at the block output",
    "deescalate_segment_mean": "causal eq. (21), mean over the segment only (no memory)",
    "deescalate_tau0.5": "causal eq. (21), tau 0.5",
    "deescalate_trainable_tau": "causal eq. (21), tau learned (from 1)",
    "deescalate_leaky_global": "the leaky global mean, trained again",
}


def _mean_range(records, key):
    values = np.array([r[key] for r in records], "float64")
    return f"{values.mean():.2f} [{values.min():.2f}, {values.max():.2f}]"


def study_table(base, study):
    """The first study's variants and the new arms in one table: seeds, train loss, validation and test
    perplexity (seed mean [min, max]), and for the leaky arm its weights read by the causal model."""
    lines = [
        "| variant | what | seeds | train loss | valid ppl | test ppl | test ppl read causally |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    rows = [(v, "first study", r) for v, r in base["runs"].items()]
    rows += [(v, STUDY_ARMS[v], r) for v, r in study["runs"].items()]
    for variant, what, records in rows:
        causal = _mean_range(records, "test_perplexity_causal") if "test_perplexity_causal" in records[0] else ""
        loss = np.mean([r["train_loss"] for r in records])
        lines.append(
            f"| {variant} | {what} | {len(records)} | {loss:.4f} | {_mean_range(records, 'valid_perplexity')} "
            f"| {_mean_range(records, 'test_perplexity')} | {causal} |"
        )
    return "\n".join(lines)


def study_verdicts(base, study, leaky="deescalate_leaky_global"):
    """The best causal de-escalation (lowest seed-mean test perplexity, first study's `deescalate`
    included) and its gap to pre-norm; the leaky arm's perplexity read leaky and read causally."""
    causal = {"deescalate": base["runs"]["deescalate"]}
    causal.update({v: r for v, r in study["runs"].items() if v != leaky})
    mean = {v: float(np.mean([r["test_perplexity"] for r in records])) for v, records in causal.items()}
    best = min(mean, key=mean.get)
    pre = float(np.mean([r["test_perplexity"] for r in base["runs"]["pre"]]))
    standing = compare(
        {"kind": "language_model", "runs": {best: causal[best], "pre": base["runs"]["pre"]}}, best, "pre"
    )
    lines = [
        f"- The best causal setting is {best} ({STUDY_ARMS.get(best, 'the first study')}): test perplexity "
        f"{mean[best]:.2f} against pre-norm's {pre:.2f}, {mean[best] - pre:+.2f} ({standing['test_perplexity']} "
        f"pre over the seeds; {len(causal[best])} and {len(base['runs']['pre'])} seeds)."
    ]
    if leaky in study["runs"]:
        records = study["runs"][leaky]
        read_leaky = np.mean([r["test_perplexity"] for r in records])
        read_causal = np.mean([r["test_perplexity_causal"] for r in records])
        lines.append(
            f"- The leaky global mean, trained again: test perplexity {read_leaky:.2f} read as trained, "
            f"{read_causal:.2f} with the same weights in the causal model ({len(records)} seeds)."
        )
    return "\n".join(lines)


def similarity_table(results, points=5):
    """t_sim after blocks spread over the depth, seed mean, at the first measurement -> at the end."""
    depth = len(next(iter(results["runs"].values()))[0]["tsim_start"])
    blocks = sorted({round(i * (depth - 1) / (points - 1)) for i in range(points)})
    lines = [
        "| variant | " + " | ".join(f"block {b + 1}" for b in blocks) + " |",
        "|---|" + "---:|" * len(blocks),
    ]
    for variant, records in results["runs"].items():
        cells = []
        for b in blocks:
            start = np.mean([r["tsim_start"][b] for r in records])
            end = np.mean([r["tsim_end"][b] for r in records])
            cells.append(f"{start:.3f} -> {end:.3f}")
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(runs_root, results, path, title):
    """Figure 6 layout (train / test loss per epoch) for a classifier, Figure 7 (training loss per step,
    validation perplexity) for a language model; one curve per variant: the seed mean and its range."""
    from keras_tse.training import plot_losses, plot_training_loss

    folders = {
        variant: [os.path.join(runs_root, f"seed_{r['seed']}", variant) for r in records]
        for variant, records in results["runs"].items()
    }
    if results["kind"] == "language_model":
        plot_training_loss(folders, path, title)
    else:
        plot_losses(
            {v: [read_history(os.path.join(d, "history.csv")) for d in ds] for v, ds in folders.items()}, path, title
        )


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", help="folder of seed_<s>/<variant>/ run folders")
    parser.add_argument("--out", required=True, help="the result JSON to write (curves go beside it as .png)")
    parser.add_argument("--title", default=None, help="the curves' title")
    args = parser.parse_args(argv)
    results = collect(args.runs)
    run_files.write_json(args.out, results)
    plot(args.runs, results, os.path.splitext(args.out)[0] + ".png", args.title or os.path.basename(args.runs))
    print(markdown_table(results))
    print(f"\nwrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
