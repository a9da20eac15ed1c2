"""Check every verdict sentence of README.md and the cards against its result file.

A sentence that says one arm beats (or ties with, or loses to) another carries its claim in a comment
right after it, in words the checker reads:

    <!-- verdict depth_study: deepnorm, layerscale beat deescalate(*) at depth 24, 48 -->
    <!-- verdict depth80 train_loss: deescalate beats post -->

`SOURCE [METRIC]: ARMS RELATION ARMS [at KEY VALUES]`: RELATION is `beats`/`beat`, `is equivalent to`/
`are equivalent to`, `loses to`/`lose to` or `is inconclusive against`/`are inconclusive against`; each
side is a comma-separated list of arms, and the claim must
hold for every pair and every value. Arms are named as in their result file: `norm` or `norm(tau)` in
the depth study (`deescalate(*)`: every tau), the arm names of the lab's `depth80_study` in depth80, the
variants of `zoo/gpu/<figure>.json` in gpu_<figure> (the GPU's first Fig. 6 runs, one learning rate each), the arm names
of `recipes/lab/bert_ptb_study.py` in bert_ptb (`post_24`, ...: test loss unless a metric is named), of
`recipes/lab/ptb_warmup_study.py` in ptb_warmup (test perplexity unless a metric is named) and of
`recipes/lab/tau_sweep_study.py` in tau_sweep (`tau_0` ... `tau_1`, `tau_learned`). Each
arm is taken at the learning rate its selection seed (seed 0) chose, with every other seed of that cell
(the verdict seeds), and judged by the verdict rule (`recipes.lab.verdicts`, zoo/README.md):
paired by seed where both arms ran the same seeds, every comparison of one document decided together
(one family, Holm's correction). A verdict other than "inconclusive" needs `verdicts.VERDICT_SEEDS`
verdict seeds per arm.

    python -m recipes.lab.verdict_claims    # each claim and whether it holds; exit 1 if one fails
"""

import os
import re
import sys

from recipes.lab import ROOT  # noqa: E402

CLAIM = re.compile(r"<!-- verdict (?P<source>\w+)(?: (?P<metric>\w+))?: (?P<claim>.+?) -->")
RELATIONS = {"beats": "beats", "beat": "beats", "loses to": "loses to", "lose to": "loses to"}
RELATIONS.update({"is equivalent to": "equivalent to", "are equivalent to": "equivalent to"})
RELATIONS.update({"is inconclusive against": "inconclusive", "are inconclusive against": "inconclusive"})
SENTENCE = re.compile(
    r"^(?P<a>.+?) (?P<relation>" + "|".join(sorted(RELATIONS, key=len, reverse=True)) + r") (?P<b>.+?)"
    r"(?: at (?P<key>\w+) (?P<values>[\d, ]+))?$"
)
LOWER_IS_BETTER = ("loss", "perplexity")  # every other metric (accuracy) is better higher


def _depth_study_seeds(metric, arm, key, value):
    """(arm, {seed: value}) of the depth study's cells (torch init) of `arm` at `depth`, each at the rate
    its selection seed chose."""
    from recipes.lab import engine, generated_tables, sweep

    if key != "depth":
        raise ValueError(f"depth_study claims are made at a depth, got 'at {key}'")
    rows = generated_tables.depth_study_rows()
    best = sweep.rates_chosen_by_seed(rows, engine.SELECTION_SEED)
    norm, _, tau = arm.partition("(")
    tau = tau.rstrip(")")
    taus = sorted({k[1] for k in best if k[0] == norm}) if tau == "*" else [tau]
    arms = []
    for tau in taus:
        if (norm, tau, "torch", value) not in best:
            raise ValueError(f"the depth study has no arm {arm!r} at depth {value}")
        lr = best[(norm, tau, "torch", value)]
        label = f"{norm}({tau})" if tau else norm
        cell = sweep.cell_rows(rows, (norm, tau, "torch"), value, lr)
        arms.append((label, engine.verdict_seeds(cell, metric)))
    return arms


def _gpu_seeds(figure):
    """(arm, {seed: value}) of one of the GPU's first Fig. 6 result files, `zoo/gpu/<figure>.json` (`gpu_cells_card`):
    fixed rates, no selection, so every seed is a verdict seed."""

    def seeds(metric, arm, key, value):
        import json

        if key is not None:
            raise ValueError(f"gpu_{figure} claims take no 'at', got 'at {key}'")
        with open(os.path.join(ROOT, "zoo", "gpu", f"{figure}.json")) as f:
            runs = json.load(f)["runs"]
        if arm not in runs:
            raise ValueError(f"zoo/gpu/{figure}.json has no arm {arm!r}: it has {sorted(runs)}")
        return [(arm, {int(r.get("seed", i)): float(r[metric]) for i, r in enumerate(runs[arm])})]

    return seeds


def _cell_study_seeds(module):
    """(arm, {seed: value}) of a cell study's arm at the rate its seed 0 chose (the lab's `<module>`)."""

    def seeds(metric, arm, key, value):
        import importlib

        from recipes.lab import engine

        study = importlib.import_module(f"recipes.lab.{module}")
        if key is not None:
            raise ValueError(f"{module} claims take no 'at', got 'at {key}'")
        rate, members = engine.at_best(study.STUDY.read_rows(), arm, study.STUDY.plan_of(arm))
        if rate is None:
            raise ValueError(f"{study.RESULTS} has no row of arm {arm!r}")
        return [(arm, engine.verdict_seeds(members, metric))]

    return seeds


# source -> (its arms' seeds: (metric, arm, key, value) -> [(arm, {seed: value}), ...], the metric a claim
# without one is judged on)
SOURCES = {
    "bert_ptb": (_cell_study_seeds("bert_ptb_study"), "test_loss"),
    "depth_study": (_depth_study_seeds, "final_loss"),
    "depth80": (_cell_study_seeds("depth80_study"), "train_loss"),
    "gpu_fig6": (_gpu_seeds("fig6"), "train_loss"),
    "gpu_fig6_stopped": (_gpu_seeds("fig6_stopped"), "train_loss"),
    "ptb_warmup": (_cell_study_seeds("ptb_warmup_study"), "test_perplexity"),
    "tau_sweep": (_cell_study_seeds("tau_sweep_study"), "train_loss"),
}


def metric_of(source, metric):
    """The metric a claim of `source` is judged on: `metric`, or the source's own where the claim names none."""
    return metric or SOURCES[source][1]


def arm_seeds(source, metric, arm, key=None, value=None):
    """[(arm, {seed: value}), ...] of `arm` in `source`, on `metric_of(source, metric)`."""
    return SOURCES[source][0](metric_of(source, metric), arm, key, value)


def claims(text):
    """The (source, metric, claim) of each verdict comment in `text`."""
    return [(m["source"], m["metric"], m["claim"]) for m in CLAIM.finditer(text)]


def _pairs(source, metric, claim):
    """(expected verdict, [(where, name A, name B, seeds A, seeds B), ...]) of one claim, or a failure line."""
    if source not in SOURCES:
        return f"unknown source {source!r}: expected one of {sorted(SOURCES)}"
    parsed = SENTENCE.match(claim)
    if parsed is None:
        relations = "beats|is equivalent to|loses to|is inconclusive against"
        return f"cannot read {claim!r}: expected 'ARMS {relations} ARMS [at KEY VALUES]'"
    values = [int(v) for v in parsed["values"].replace(",", " ").split()] if parsed["values"] else [None]
    pairs = []
    for value in values:
        where = "" if value is None else f" at {parsed['key']} {value}"
        for a in parsed["a"].split(", "):
            for b in parsed["b"].split(", "):
                for name_a, seeds_a in arm_seeds(source, metric, a, parsed["key"], value):
                    for name_b, seeds_b in arm_seeds(source, metric, b, parsed["key"], value):
                        pairs.append((where, name_a, name_b, seeds_a, seeds_b))
    return RELATIONS[parsed["relation"]], pairs


def _measure(source, metric, seeds_a, seeds_b):
    """The rule's `Comparison` of two arms' {seed: value}."""
    from recipes.lab import verdicts

    metric = metric_of(source, metric)
    lower = any(word in metric for word in LOWER_IS_BETTER)
    return verdicts.measure_seeds(seeds_a, seeds_b, lower, metric=metric)


def check_claims(found_claims):
    """Every failure of the (source, metric, claim) triples, decided as one family."""
    from recipes.lab import verdicts

    failures, entries = [], []
    for source, metric, claim in found_claims:
        parsed = _pairs(source, metric, claim)
        if isinstance(parsed, str):
            failures.append(parsed)
            continue
        expected, pairs = parsed
        for where, name_a, name_b, seeds_a, seeds_b in pairs:
            entries.append((source, expected, where, name_a, name_b, _measure(source, metric, seeds_a, seeds_b)))
    said = verdicts.stated([entry[-1] for entry in entries])  # below 5 verdict seeds: "inconclusive (N ...)"
    for (source, expected, where, name_a, name_b, _), found in zip(entries, said):
        relation, _, seeds = found.partition(" (")
        if relation != expected:
            relation = "is inconclusive against" if relation == verdicts.INCONCLUSIVE else relation
            seeds = f" ({seeds}" if seeds else ""
            failures.append(f"{name_a} {relation} {name_b}{where}{seeds}, not '{expected}' ({source})")
    return failures


def check(source, metric, claim):
    """The list of failures of one claim decided on its own (empty when it holds)."""
    return check_claims([(source, metric, claim)])


def check_text(text):
    """Every failure of every claim in `text`, the document's claims one family."""
    return check_claims(claims(text))


def main():
    from recipes.lab.generated_tables import DOCUMENTS  # every document of the project: a claim may sit in any

    failed = False
    for document in DOCUMENTS:
        path = os.path.join(ROOT, document)
        if not os.path.exists(path):
            continue
        with open(path) as handle:
            failures = check_text(handle.read())
        failed |= bool(failures)
        print(f"{document}: " + ("every claim holds" if not failures else "FAILS:\n  " + "\n  ".join(failures)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
