"""The tau sweep at depth 48: eq. (21)'s strength from 0 (plain post-norm) to 1 (the paper's), and a
learned tau, each at the learning rate its seed 0 chose, then verdict seeds 1-5 there. Resumable cell by
cell.

    nice -n 19 keras-tse study tau_sweep [--jobs 2] [--runs runs/tau_sweep]
    keras-tse study tau_sweep --jobs 8 --budget-s 540 --out "$OUT"    # on a GPU machine

Each cell is one run of `keras-tse train vit` (JAX, `--scan`) on scikit-learn's 8x8
digits with the depth study's model (zoo/depth_study.md: 48 blocks, width 32, 4 heads, FFN 64, 2x2
patches, the PyTorch-default init) in its own folder under `--runs`; a finished cell becomes one row of
`zoo/depth_study/tau_sweep.csv`. The plan is `recipes/lab/engine.py`'s: seed 0 at 3e-4, 1e-3 and 3e-3 (the
depth study's best rate for tau 1 and tau 0.5 at this depth, 1e-3, in the middle), the grid grown past an
end that holds the best, then seeds 1-5 at the best (seeds 0-2 ran on one H200, 3-5 on one H100).

Choices where the paper is silent:
- the training is the recipe's (Adam with decoupled weight decay 0.1, the step schedule of Sec. 3.3),
  not the depth study's own loop (AdamW 0.05 at a constant rate), so these rows are compared with each
  other, not with that study's; batch 64 and 13 epochs (about 300 steps of the 1,437 training digits, that
  study's budget); the best rate is the one of lowest final training loss, as in every ViT study here;
- tau 0 is `--norm deescalate --tau 0`: a post-norm block through the same code path;
- the learned tau starts at 1, the paper's value, one weight per block, clipped into [0, 1] and kept out of
  weight decay; its row records the trained values' mean, minimum and maximum over the blocks.
"""

import csv
import os
import sys

from recipes.lab import (
    ROOT,  # noqa: E402
    engine,
)
from recipes.lab.engine import spread

RESULTS = os.path.join(ROOT, "zoo", "depth_study", "tau_sweep.csv")
MODEL = ("--depth", "48", "--hidden-dim", "32", "--num-heads", "4", "--patch-size", "2", "--init", "torch", "--scan")
# every weight decayed: the rule the sweep's rows trained under, kept so that every row is comparable
DATA = ("--dataset", "digits", "--batch-size", "64", "--no-download", "--weight-decay-rule", "all")
EPOCHS = 13
TAUS = ("0", "0.25", "0.5", "0.75", "1")
ARMS = {
    **{f"tau_{tau}": ("--norm", "deescalate", "--tau", tau) for tau in TAUS},
    "tau_learned": ("--norm", "deescalate", "--tau", "1", "--learn-tau"),
}
# Seed 0 chooses each arm's rate; the verdicts rest on seeds 1-5 (zoo/README.md).
PLAN = engine.Plan(arms=tuple(ARMS), grid=(3e-4, 1e-3, 3e-3), seeds=(0, 1, 2, 3, 4, 5), select_by="train_loss")


FIELDS = (
    "arm", "tau", "learning_rate", "seed", "epochs", "train_loss", "test_loss", "test_accuracy",
    "similarity_init", "similarity_end", *engine.LEARNED_TAU, "loss_curve", "seconds", "backend", "machine",
)  # fmt: skip


def run_cell(runs, arm, learning_rate, seed, *, epochs=EPOCHS):
    """One recipe run (it resumes a killed one); its row."""
    out = os.path.join(runs, f"{arm}_lr{learning_rate:g}_s{seed}")
    argv = [*DATA, *MODEL, *ARMS[arm], "--learning-rate", f"{learning_rate:g}", "--seed", str(seed)]
    seconds = engine.run_recipe("vit", [*argv, "--epochs", str(epochs)], out, f"{arm} seed {seed}")
    variant = os.path.join(out, "deescalate")
    summary = engine.read_summary(variant)
    with open(os.path.join(variant, "history.csv"), newline="") as handle:
        losses = [float(row["loss"]) for row in csv.DictReader(handle)]
    return {
        "arm": arm,
        "tau": "learned" if "--learn-tau" in ARMS[arm] else ARMS[arm][3],
        "learning_rate": f"{learning_rate:g}",
        "seed": seed,
        **engine.classifier_columns(summary),
        "loss_curve": ";".join(f"{loss:.5g}" for loss in losses),
        "seconds": seconds,
        "backend": "jax",
    }


def markdown_table(rows):
    """One line per arm at its best rate (seed means, min-max): the card's block; "not run" before any row."""
    lines = [
        "| tau | best lr | rates tried (seed 0) | seeds | final train loss | test accuracy | similarity at end "
        "| learned tau (mean over blocks) |",
        "|---|---:|---|---:|---:|---:|---:|---:|",
    ]
    for arm in ARMS:
        rate, at_best = engine.at_best(rows, arm, PLAN)
        label = arm.removeprefix("tau_")
        if rate is None:
            lines.append(f"| {label} | not run | | 0 | | | | |")
            continue
        tried = sorted({float(r["learning_rate"]) for r in rows if r["arm"] == arm and int(r["seed"]) == 0})
        cells = [spread([float(r[c]) for r in at_best], d) for c, d in (("train_loss", 3), ("test_accuracy", 4))]
        cells.append(spread([float(r["similarity_end"]) for r in at_best], 4))
        cells.append(spread([float(r["learned_tau_mean"]) for r in at_best], 3) if label == "learned" else "")
        rates = "/".join(f"{t:g}" for t in tried)
        lines.append(f"| {label} | {rate:g} | {rates} | {len(at_best)} | {' | '.join(cells)} |")
    return "\n".join(lines) + f"\n\n{len(rows)} cells measured (`zoo/depth_study/tau_sweep.csv`)."


TITLE = "eq. (21)'s tau from 0 to 1 and learned, at depth 48 on 8x8 digits"
CLAIM_METRIC = "train_loss"  # what a verdict claim about its arms is judged on (recipes/lab/verdict_claims.py)
CARD = os.path.join(ROOT, "zoo", "depth_study.md")
STUDY = engine.study_of(sys.modules[__name__])
