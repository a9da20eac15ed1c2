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
(the verdict seeds), and judged by the verdict rule (`recipes.lab.verdicts`, zoo/README.md),
paired by seed where both arms ran the same seeds, in its card's family (Holm's correction over the
family's number of comparisons): where the study's card decides a family of its own (`Study.family`: its
questions), a claim about one of them gets the card's verdict, and a claim about another pair joins that
family as one more comparison; for a source whose card states its verdicts as claims, the family is every
claim about that source in every document. Either way a claim copied alone into another document is
judged as in its card, never in a family of one. A verdict other than "inconclusive" needs
`verdicts.VERDICT_SEEDS` verdict seeds per arm.

    python -m recipes.lab.verdict_claims    # each claim and whether it holds; exit 1 if one fails
"""

import functools
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
    from recipes.lab import engine, sweep

    if key != "depth":
        raise ValueError(f"depth_study claims are made at a depth, got 'at {key}'")
    rows, best = _depth_study_rates()
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


@functools.lru_cache(maxsize=1)
def _depth_study_rates():
    """(the depth study's rows, the rate its selection seed chose for each arm and depth), read once a process:
    a card's claims ask for them arm by arm (1,419 times for the cards in one check)."""
    from recipes.lab import engine, generated_tables, sweep

    rows = generated_tables.depth_study_rows()
    return rows, sweep.rates_chosen_by_seed(rows, engine.SELECTION_SEED)


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


def _cell_study_families(module):
    """The card's verdict families of the lab's `<module>` (`Study.families`), [[(A, B, metric, Comparison)]]."""

    def families():
        import importlib

        study = importlib.import_module(f"recipes.lab.{module}").STUDY
        return study.families(study.read_rows())

    return families


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


# The sources that are no study of the lab's registry: source -> (its arms' seeds: (metric, arm, key, value) ->
# [(arm, {seed: value}), ...], the metric a claim without one is judged on, its card's verdict family where the
# card decides one: () -> [(A, B, metric, Comparison), ...], else None: the family is every claim about the source)
OTHER_SOURCES = {
    "depth_study": (_depth_study_seeds, "final_loss", None),
    "gpu_fig6": (_gpu_seeds("fig6"), "train_loss", None),
    "gpu_fig6_stopped": (_gpu_seeds("fig6_stopped"), "train_loss", None),
}


@functools.cache
def sources():
    """Every source a claim may name: each study that declares its claims' metric (`Study.claim_metric`), by
    its name, with its card's families where it declares them; and `OTHER_SOURCES`."""
    from recipes.lab import engine

    declared = {
        name: (_cell_study_seeds(f"{name}_study"), study.claim_metric, _cell_study_families(f"{name}_study"))
        for name, study in engine.studies().items()
        if study.claim_metric is not None
    }
    for name, study in engine.studies().items():
        if study.claim_metric is not None and study.families is None:
            declared[name] = (*declared[name][:2], None)
    return {**declared, **OTHER_SOURCES}


def metric_of(source, metric):
    """The metric a claim of `source` is judged on: `metric`, or the source's own where the claim names none."""
    return metric or sources()[source][1]


def arm_seeds(source, metric, arm, key=None, value=None):
    """[(arm, {seed: value}), ...] of `arm` in `source`, on `metric_of(source, metric)`."""
    return sources()[source][0](metric_of(source, metric), arm, key, value)


def claims(text):
    """The (source, metric, claim) of each verdict comment in `text`."""
    return [(m["source"], m["metric"], m["claim"]) for m in CLAIM.finditer(text)]


def _pairs(source, metric, claim):
    """(expected verdict, [(where, name A, name B, seeds A, seeds B), ...]) of one claim, or a failure line."""
    if source not in sources():
        return f"unknown source {source!r}: expected one of {sorted(sources())}"
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


def _entries(found_claims):
    """([(source, expected, where, A, B, metric, Comparison)], failure lines) of the claims."""
    failures, entries = [], []
    for source, metric, claim in found_claims:
        parsed = _pairs(source, metric, claim)
        if isinstance(parsed, str):
            failures.append(parsed)
            continue
        expected, pairs = parsed
        for where, name_a, name_b, seeds_a, seeds_b in pairs:
            comparison = _measure(source, metric, seeds_a, seeds_b)
            entries.append((source, expected, where, name_a, name_b, metric_of(source, metric), comparison))
    return entries, failures


FLIPPED = {"beats": "loses to", "loses to": "beats"}


def _family_verdicts(source, entries, every_claim):
    """{entry index: the verdict its family gives it} for `entries` (all of `source`). The families: the
    card's where it decides them, a claim about a pair outside them added to its last (the card's main one);
    else one family of every claim about `source` in `every_claim`'s entries (each pair once)."""
    from recipes.lab import verdicts

    card = sources()[source][2]
    if card is not None:
        families = [[((a, b, "", metric), c) for a, b, metric, c in family] for family in card()]
    else:
        every = {(a, b, where, metric): c for s, _, where, a, b, metric, c in every_claim if s == source}
        families = [list(every.items())]  # each pair once, however many documents state it
    placed = {}
    for index, (_, _, where, a, b, metric, comparison) in enumerate(entries):
        key = (a, b, "" if card else where, metric)
        for number, family in enumerate(families):
            keys = [k for k, _ in family]
            if key in keys or (b, a, key[2], metric) in keys:
                flipped = key not in keys
                placed[index] = (number, keys.index((b, a, key[2], metric) if flipped else key), flipped)
                break
        else:  # a comparison the card does not make: one more in its main family
            families[-1].append((key, comparison))
            placed[index] = (len(families) - 1, len(families[-1]) - 1, False)
    said = [verdicts.stated([c for _, c in family]) for family in families]  # below 5 seeds: "inconclusive (N ...)"
    found = {}
    for index, (number, position, flipped) in placed.items():
        relation, _, seeds = said[number][position].partition(" (")
        relation = FLIPPED.get(relation, relation) if flipped else relation
        found[index] = relation + (f" ({seeds}" if seeds else "")
    return found


def check_claims(found_claims, every_claim=None):
    """Every failure of the (source, metric, claim) triples, each judged in its card's family; `every_claim`
    (default: `found_claims`) holds the claims of every document, the family of a source without a card's."""
    entries, failures = _entries(found_claims)
    every = entries if every_claim is None else _entries(every_claim)[0]
    for source in sorted({entry[0] for entry in entries}):
        mine = [(i, entry) for i, entry in enumerate(entries) if entry[0] == source]
        said = _family_verdicts(source, [entry for _, entry in mine], every)
        for position, (_, (_, expected, where, name_a, name_b, _, _)) in enumerate(mine):
            relation, _, seeds = said[position].partition(" (")
            if relation != expected:
                relation = "is inconclusive against" if relation == "inconclusive" else relation
                seeds = f" ({seeds}" if seeds else ""
                failures.append(f"{name_a} {relation} {name_b}{where}{seeds}, not '{expected}' ({source})")
    return failures


def check(source, metric, claim):
    """The list of failures of one claim decided on its own (empty when it holds)."""
    return check_claims([(source, metric, claim)])


def check_text(text, every_claim=None):
    """Every failure of every claim in `text`, each in its card's family (`check_claims`)."""
    return check_claims(claims(text), every_claim)


def every_document_claim():
    """The claims of every document of the project (`generated_tables.DOCUMENTS`)."""
    from recipes.lab.generated_tables import DOCUMENTS

    found = []
    for document in DOCUMENTS:
        path = os.path.join(ROOT, document)
        if os.path.exists(path):
            with open(path) as handle:
                found += claims(handle.read())
    return found


def main():
    from recipes.lab.generated_tables import DOCUMENTS  # every document of the project: a claim may sit in any

    failed, every = False, every_document_claim()
    for document in DOCUMENTS:
        path = os.path.join(ROOT, document)
        if not os.path.exists(path):
            continue
        with open(path) as handle:
            failures = check_text(handle.read(), every)
        failed |= bool(failures)
        print(f"{document}: " + ("every claim holds" if not failures else "FAILS:\n  " + "\n  ".join(failures)))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
