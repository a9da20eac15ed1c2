"""The language-model studies (warmup and 32 blocks on Penn Treebank on a CPU, Fig. 7 at the paper's
widths on a GPU): each is a plan module (its DATA and ARMS flags, PARTS or PLAN, RESULTS, QUESTIONS, TITLE,
CARD), made a study of the engine here (`study_of`), its cells run by `run_cell`, its card's table drawn
from its result file alone by `markdown_table`.

Each arm is read at its best learning rate (`engine.best_rate` under its plan: the seed-0 rate of lowest
validation loss, never the test set's); its seeds there are averaged; a question is answered on test
perplexity by the verdict rule of zoo/README.md on the verdict seeds (seed 0 chose the rate).
"""

import functools
import os

from keras_tse.run_files import read_steps
from recipes.lab import ROOT, engine
from recipes.lab.engine import spread

# The columns of a language-model study's row: the run's measures and its loss curve.
FIELDS = (
    "arm", "depth", "learning_rate", "seed", "warmup_steps", "steps", "train_loss", "valid_loss", "valid_perplexity",
    "test_perplexity", "similarity_init", "similarity_end", "loss_curve", "seconds", "backend",
    "machine",
)  # fmt: skip


def study_of(plan):
    """The engine's study of plan module `plan` (`engine.study_of`), its cells run and its table drawn here."""
    run = functools.partial(run_cell, plan)
    return engine.study_of(
        plan,
        run_cell=run,
        fields=FIELDS,
        table=functools.partial(markdown_table, plan=plan),
        families=lambda rows: [family(rows, plan)],
    )


def run_cell(plan, runs, arm, learning_rate, seed):
    """One `keras-tse train lm` run (it resumes a killed one) with the plan's flags for `arm` (the layout
    named `--norm NAME`); its row."""
    flags = (*plan.DATA, *plan.ARMS[arm])
    out = os.path.join(runs, f"{arm}_lr{learning_rate:g}_s{seed}")
    argv = [*flags, "--learning-rate", f"{learning_rate:g}", "--seed", str(seed)]
    seconds = engine.run_recipe("lm", argv, out, f"{arm} lr {learning_rate:g} seed {seed}")
    variant = os.path.join(out, flags[flags.index("--norm") + 1])
    summary = engine.read_summary(variant)
    config = engine.read_json(variant, "config.json")  # what the run was, as the recipe wrote it
    # config.json records the training kit's settings only where they differ from its defaults (no warmup)
    from keras_tse.training.configs import LMTrainConfig

    steps, losses = read_steps(os.path.join(variant, "steps.csv"))
    return {
        "arm": arm,
        "depth": config["overrides"]["depth"],
        "learning_rate": f"{learning_rate:g}",
        "seed": seed,
        "warmup_steps": config["train"].get("warmup_steps", LMTrainConfig.warmup_steps),
        "steps": int(steps[-1]),
        "train_loss": summary["train_loss"],
        "valid_loss": summary["valid_loss"],
        "valid_perplexity": summary["valid_perplexity"],
        "test_perplexity": summary["test_perplexity"],
        "similarity_init": summary["last_block_similarity_start"],
        "similarity_end": summary["last_block_similarity_end"],
        "loss_curve": ";".join(f"{loss:.5g}" for loss in losses),
        "seconds": seconds,
        "backend": "jax",
    }


VERDICT_METRIC = "test_perplexity"


def family(rows, plan):
    """The card's verdict family: (A, B, metric, `Comparison`) of each question whose arms have their verdict
    seeds, on test perplexity, each arm at the rate its selection seed chose."""
    from recipes.lab import verdicts

    best = {arm: engine.at_best(rows, arm, plan.STUDY.plan_of(arm)) for arm in plan.ARMS}
    found = []
    for a, b, _ in plan.QUESTIONS:
        if best[a][0] is not None and best[b][0] is not None:
            seeds = [engine.verdict_seeds(best[arm][1], VERDICT_METRIC) for arm in (a, b)]
            if min(map(len, seeds)) >= verdicts.MIN_SEEDS:
                found.append((a, b, VERDICT_METRIC, verdicts.measure_seeds(*seeds, metric=VERDICT_METRIC)))
    return found


def markdown_table(rows, plan):
    """One line per arm at its best rate (by validation loss; seed means, min-max), then each question
    answered on test perplexity by the verdict rule once both arms have its seeds."""
    from recipes.lab import verdicts

    lines = [
        "| arm | blocks | warmup steps | best lr | rates tried (seed 0) | seeds | valid perplexity "
        "| test perplexity | similarity at end |",
        "|---|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    best = {arm: engine.at_best(rows, arm, plan.STUDY.plan_of(arm)) for arm in plan.ARMS}
    for arm, (rate, members) in best.items():
        if rate is None:
            lines.append(f"| {arm} | | | not run | | 0 | | | |")
            continue
        tried = sorted({float(r["learning_rate"]) for r in rows if r["arm"] == arm and int(r["seed"]) == 0})
        cells = [spread([float(r[c]) for r in members], d) for c, d in
                 (("valid_perplexity", 1), ("test_perplexity", 1), ("similarity_end", 3))]  # fmt: skip
        lines.append(
            f"| {arm} | {members[0]['depth']} | {members[0]['warmup_steps']} | {rate:g} | "
            f"{'/'.join(f'{t:g}' for t in tried)} | {len(members)} | {' | '.join(cells)} |"
        )
    lines += ["", "| question | A | B | on test perplexity |", "|---|---|---|---|"]
    measured = family(rows, plan)
    said = dict(zip([(a, b) for a, b, *_ in measured], verdicts.stated([c for *_, c in measured])))
    for a, b, question in plan.QUESTIONS:
        lines.append(f"| {question} | {a} | {b} | {verdicts.table_cell(said.get((a, b), 'not measured'))} |")
    results = os.path.relpath(plan.RESULTS, ROOT)
    return "\n".join(lines) + f"\n\n{len(rows)} cells measured (`{results}`)."
