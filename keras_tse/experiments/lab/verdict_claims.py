"""Check every verdict sentence of README.md and the cards against its result file.

A sentence that says one arm beats (or ties with, or loses to) another carries its claim in a comment
right after it, in words the checker reads:

    <!-- verdict depth_study: deepnorm, layerscale beat deescalate(*) at depth 24, 48 -->
    <!-- verdict depth80 train_loss: deescalate beats post -->

`SOURCE [METRIC]: ARMS RELATION ARMS [at KEY VALUES]`: RELATION is `beats`/`beat`, `ties`/`tie` (tied
within seeds) or `loses to`/`lose to`; each side is a comma-separated list of arms, and the claim must
hold for every pair and every value. Arms are named as in their result file: `norm` or `norm(tau)` in
the depth study (`deescalate(*)`: every tau), the arm names of the lab's `depth80_study` in depth80, the
variants of `zoo/gpu/<figure>.json` in gpu_<figure> (a GPU plan's runs, one learning rate each), the arm names
of `keras_tse/experiments/lab/ptb_warmup_study.py` in ptb_warmup (test perplexity unless a metric is named) and of
`keras_tse/experiments/lab/tau_sweep_study.py` in tau_sweep (`tau_0` ... `tau_1`, `tau_learned`). Each
arm is taken at its best learning rate, every seed of that cell, and judged by the verdict rule
(`keras_tse.experiments.verdicts`, zoo/README.md).

    python -m keras_tse.experiments.lab.verdict_claims    # each claim and whether it holds; exit 1 if one fails
"""

import os
import re
import sys

from keras_tse.experiments.lab import ROOT  # noqa: E402

DOCUMENTS = (
    "README.md",
    os.path.join("zoo", "depth_study.md"),
    os.path.join("zoo", "depth80_fashion_mnist.md"),
    os.path.join("zoo", "ptb_transformer_xl16.md"),
)
CLAIM = re.compile(r"<!-- verdict (?P<source>\w+)(?: (?P<metric>\w+))?: (?P<claim>.+?) -->")
RELATIONS = {"beats": "beats", "beat": "beats", "ties": "tied within seeds", "tie": "tied within seeds"}
RELATIONS.update({"loses to": "loses to", "lose to": "loses to"})
SENTENCE = re.compile(
    r"^(?P<a>.+?) (?P<relation>beats|beat|ties|tie|loses to|lose to) (?P<b>.+?)"
    r"(?: at (?P<key>\w+) (?P<values>[\d, ]+))?$"
)
LOWER_IS_BETTER = ("loss", "perplexity")  # every other metric (accuracy) is better higher


def _depth_study_seeds(metric, arm, key, value):
    """(arm, every seed) of the depth study's cells (torch init) of `arm` at `depth`, each at its best rate."""
    from keras_tse.experiments import sweep
    from keras_tse.experiments.lab import generated_tables

    if key != "depth":
        raise ValueError(f"depth_study claims are made at a depth, got 'at {key}'")
    rows = generated_tables.depth_study_rows()
    best = sweep.best_over_learning_rates(rows)
    norm, _, tau = arm.partition("(")
    tau = tau.rstrip(")")
    taus = sorted({k[1] for k in best if k[0] == norm}) if tau == "*" else [tau]
    arms = []
    for tau in taus:
        if (norm, tau, "torch", value) not in best:
            raise ValueError(f"the depth study has no arm {arm!r} at depth {value}")
        lr = best[(norm, tau, "torch", value)][1]
        label = f"{norm}({tau})" if tau else norm
        arms.append((label, sweep.seed_values(rows, (norm, tau, "torch"), value, lr, metric or "final_loss")))
    return arms


def _gpu_seeds(figure):
    """(arm, every seed) of one of the GPU plan's result files, `zoo/gpu/<figure>.json` (`gpu_plan`)."""

    def seeds(metric, arm, key, value):
        import json

        if key is not None:
            raise ValueError(f"gpu_{figure} claims take no 'at', got 'at {key}'")
        with open(os.path.join(ROOT, "zoo", "gpu", f"{figure}.json")) as f:
            runs = json.load(f)["runs"]
        if arm not in runs:
            raise ValueError(f"zoo/gpu/{figure}.json has no arm {arm!r}: it has {sorted(runs)}")
        return [(arm, [float(r[metric or "train_loss"]) for r in runs[arm]])]

    return seeds


def _cell_study_seeds(module, metric_by_default):
    """(arm, every seed) of a cell study's arm at its best rate (the lab's `<module>`, the engine's plan)."""

    def seeds(metric, arm, key, value):
        import importlib

        from keras_tse.experiments.lab import engine

        study = importlib.import_module(f"keras_tse.experiments.lab.{module}")
        if key is not None:
            raise ValueError(f"{module} claims take no 'at', got 'at {key}'")
        rate, members = engine.at_best(study.read_rows(), arm, study.plan_of(arm))
        if rate is None:
            raise ValueError(f"{study.RESULTS} has no row of arm {arm!r}")
        return [(arm, [float(r[metric or metric_by_default]) for r in members])]

    return seeds


SOURCES = {
    "depth_study": _depth_study_seeds,
    "depth80": _cell_study_seeds("depth80_study", "train_loss"),
    "gpu_fig6": _gpu_seeds("fig6"),
    "gpu_fig6_stopped": _gpu_seeds("fig6_stopped"),
    "ptb_warmup": _cell_study_seeds("ptb_warmup_study", "test_perplexity"),
    "tau_sweep": _cell_study_seeds("tau_sweep_study", "train_loss"),
}


def claims(text):
    """The (source, metric, claim) of each verdict comment in `text`."""
    return [(m["source"], m["metric"], m["claim"]) for m in CLAIM.finditer(text)]


def check(source, metric, claim):
    """The list of failures of one claim (empty when it holds)."""
    from keras_tse.experiments import verdicts

    if source not in SOURCES:
        return [f"unknown source {source!r}: expected one of {sorted(SOURCES)}"]
    parsed = SENTENCE.match(claim)
    if parsed is None:
        return [f"cannot read {claim!r}: expected 'ARMS beats|ties|loses to ARMS [at KEY VALUES]'"]
    expected = RELATIONS[parsed["relation"]]
    values = [int(v) for v in parsed["values"].replace(",", " ").split()] if parsed["values"] else [None]
    lower = any(word in (metric or "loss") for word in LOWER_IS_BETTER)
    failures = []
    for value in values:
        for a in parsed["a"].split(", "):
            for b in parsed["b"].split(", "):
                for name_a, seeds_a in SOURCES[source](metric, a, parsed["key"], value):
                    for name_b, seeds_b in SOURCES[source](metric, b, parsed["key"], value):
                        found = verdicts.compare(seeds_a, seeds_b, lower_is_better=lower)
                        if found != expected:
                            where = "" if value is None else f" at {parsed['key']} {value}"
                            failures.append(f"{name_a} {found} {name_b}{where}, not '{expected}' ({source})")
    return failures


def check_text(text):
    """Every failure of every claim in `text`."""
    return [failure for claim in claims(text) for failure in check(*claim)]


def main():
    failed = False
    for document in DOCUMENTS:
        path = os.path.join(ROOT, document)
        if not os.path.exists(path):
            continue
        with open(path) as handle:
            for source, metric, claim in claims(handle.read()):
                failures = check(source, metric, claim)
                failed |= bool(failures)
                print(f"{document}: {claim}: " + ("holds" if not failures else "FAILS: " + "; ".join(failures)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
