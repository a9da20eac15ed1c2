"""The shipped Fashion-MNIST ViT (`vit6_fashion_mnist`) chosen on a validation split: augmentation and learning
rate by validation loss, the epoch by validation (the best checkpoint), the test split scored once, on the
model shipped. Resumable cell by cell.

    nice -n 19 keras-tse study vit6_selection --jobs 2
    keras-tse study vit6_selection --card
    KERAS_BACKEND=jax python -m recipes.lab.vit6_selection_study --ship   # ships the chosen cell as the preset

Each cell is one run of `keras-tse train vit` with the shipped command's flags (`ship_presets.COMMANDS`,
`ship_presets.MODEL`) but its augmentation and rate, and `--validation-fraction 0.1`: 6,000 of the 60,000
training images held out (class-balanced, seed 0), scored each epoch; the runner keeps the checkpoint of
lowest validation loss (`checkpoints/best.keras`). A cell's row holds its validation numbers only: the test
split the runner scores at the end is not read, so nothing here can lean on it.

Choices:
- the candidates: no augmentation and crop-and-flip (Fashion-MNIST's default), each at 1e-3 (the rate the
  preset shipped with) and 3e-3, a rate grown past an end that holds the best; 12 epochs, the shipped
  schedule, in every cell (a shorter cell favours no augmentation, which slows the first epochs);
- the choice: the cell of lowest best validation loss, its best checkpoint shipped; one seed: a choice
  among candidates, not a verdict between them.
"""

import argparse
import csv
import json
import math
import os
import sys

from recipes.lab import ROOT, engine

RESULTS = os.path.join(ROOT, "zoo", "vit6_fashion_mnist", "selection.csv")
VALIDATION = ("--validation-fraction", "0.1")
ARMS = {"none": ("--augment", "none"), "crop_flip": ("--augment", "crop_flip")}
PLAN = engine.Plan(arms=tuple(ARMS), grid=(1e-3, 3e-3), seeds=(0,), select_by="best_valid_loss")
FIELDS = (
    "arm", "learning_rate", "seed", "epochs", "train_loss", "best_valid_loss", "best_epoch", "valid_accuracy",
    "valid_loss_curve", "seconds", "backend", "machine",
)  # fmt: skip
TITLE = "vit6_fashion_mnist chosen on a validation split: augmentation and rate by validation loss"
CARD = os.path.join(ROOT, "zoo", "vit6_fashion_mnist.md")


def recipe_flags(arm, learning_rate):
    """The shipped command's flags with the arm's augmentation, the rate and the validation split."""
    from recipes.lab import ship_presets

    shipped = f"{ship_presets.COMMANDS['vit6_fashion_mnist']} {ship_presets.MODEL}".split()
    flags = _without(shipped, ("--augment", "--learning-rate", "--validation-fraction", "--out"))
    return [*flags, *ARMS[arm], "--learning-rate", f"{learning_rate:g}", *VALIDATION]


def _without(flags, names):
    """`flags` less each flag of `names` and its value."""
    kept, skip = [], False
    for flag in flags:
        if skip:
            skip = False
        elif flag in names:
            skip = True
        else:
            kept.append(flag)
    return kept


def run_cell(runs, arm, learning_rate, seed):
    """One 12-epoch run (a killed one resumes); its row: validation numbers, the epoch of lowest validation loss."""
    out = os.path.join(runs, f"{arm}_lr{learning_rate:g}_s{seed}")
    argv = [*recipe_flags(arm, learning_rate), "--seed", str(seed)]
    seconds = engine.run_recipe("vit", argv, out, f"{arm} lr {learning_rate:g} seed {seed}")
    return {"arm": arm, "learning_rate": f"{learning_rate:g}", "seed": seed, **validation_columns(run_folder(out)),
            "seconds": seconds, "backend": "jax"}  # fmt: skip


def run_folder(out):
    """The one variant's folder inside a cell's `--out` (the recipe writes `<out>/<norm>/`)."""
    return os.path.join(out, "deescalate")


def validation_columns(folder):
    """A finished run's validation record from its `history.csv` (`val_*` is the held-out split's here)."""
    with open(os.path.join(folder, "history.csv"), newline="") as handle:
        epochs = list(csv.DictReader(handle))
    losses = [float(e["val_loss"]) for e in epochs]
    best = min(range(len(losses)), key=lambda i: losses[i] if math.isfinite(losses[i]) else math.inf)
    return {
        "epochs": len(epochs),
        "train_loss": float(epochs[-1]["loss"]),
        "best_valid_loss": losses[best],
        "best_epoch": best + 1,
        "valid_accuracy": float(epochs[best]["val_accuracy"]),
        "valid_loss_curve": ";".join(f"{v:.4f}" for v in losses),
    }


def chosen(rows):
    """The row of lowest best validation loss, or None before any row."""
    return min(rows, key=lambda r: float(r["best_valid_loss"]), default=None)


def markdown_table(rows):
    """Every candidate: validation loss at its best epoch, that epoch, validation accuracy there; the chosen one
    in bold."""
    lines = [
        "| augmentation | lr | best validation loss | at epoch | validation accuracy there | final train loss |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    pick = chosen(rows)
    for arm in ARMS:
        for r in sorted((r for r in rows if r["arm"] == arm), key=lambda r: float(r["learning_rate"])):
            mark = "**" if r is pick else ""
            loss = f"{mark}{float(r['best_valid_loss']):.4f}{mark}"
            lines.append(
                f"| {mark}{arm}{mark} | {float(r['learning_rate']):g} | {loss} | "
                f"{r['best_epoch']} of {r['epochs']} | {100 * float(r['valid_accuracy']):.2f}% | "
                f"{float(r['train_loss']):.4f} |"
            )
    if pick is None:
        return "No candidate has finished yet."
    left = STUDY.pending(STUDY.arms())
    bold = f"the lowest so far ({len(left)} candidate(s) of the plan left)" if left else "the chosen cell"
    return "\n".join(lines) + (
        f"\n\nSeed 0, 54,000 training and 6,000 validation images, 12 epochs, JAX, 2-core AMD EPYC; bold: {bold}; "
        f"{len(rows)} candidate(s) run (`{os.path.relpath(RESULTS, ROOT)}`)."
    )


def chosen_cell(runs):
    """(run folder, command, validation record) of the chosen candidate (`runs`: the folder its cells ran in);
    one line if none has finished."""
    row, left = chosen(STUDY.read_rows()), STUDY.pending(STUDY.arms())
    if row is None or left:
        raise SystemExit(
            f"vit6_selection has {len(left)} candidate(s) left to run; expected a finished choice: "
            "run `keras-tse study vit6_selection` first"
        )
    rate, seed = float(row["learning_rate"]), int(row["seed"])
    out = os.path.join(runs, f"{row['arm']}_lr{rate:g}_s{seed}")
    flags = " ".join(recipe_flags(row["arm"], rate))
    command = f"KERAS_BACKEND=jax python -m keras_tse.cli.main train vit {flags} --seed {seed} --out {out}"
    results = os.path.relpath(STUDY.results, ROOT)
    validation = {
        "fraction": float(VALIDATION[1]),
        "checkpoint_epoch": int(row["best_epoch"]),
        "valid_loss": float(row["best_valid_loss"]),
        "valid_accuracy": float(row["valid_accuracy"]),
        "chosen_by": f"recipes/lab/vit6_selection_study.py, lowest validation loss of {results}",
    }
    return run_folder(out), command, validation


def check_run(folder, command, validation):
    """One line unless `folder` holds the chosen row's run: its history's lowest validation loss and epoch as
    the row recorded (a run lost or trained again differently cannot be shipped under the row's record)."""
    if not os.path.exists(os.path.join(folder, "checkpoints", "best.keras")):
        raise SystemExit(f"{folder} holds no best.keras checkpoint; expected the chosen run: train it with {command}")
    found = validation_columns(folder)
    if (found["best_epoch"], round(found["best_valid_loss"], 6)) != (
        validation["checkpoint_epoch"],
        round(validation["valid_loss"], 6),
    ):
        raise SystemExit(
            f"{folder} is not the chosen run: lowest validation loss {found['best_valid_loss']:.6f} at epoch "
            f"{found['best_epoch']}; expected {validation['valid_loss']:.6f} at epoch {validation['checkpoint_epoch']}"
        )


def main(argv=None):
    """`--ship`: the chosen candidate's checkpoint of lowest validation loss becomes the `vit6_fashion_mnist`
    preset (`ship_presets.ship`: scored once on the test split); nothing trained."""
    from recipes.lab import ship_presets

    parser = argparse.ArgumentParser(prog="python -m recipes.lab.vit6_selection_study", description=main.__doc__)
    parser.add_argument("--ship", action="store_true", required=True)
    parser.add_argument("--runs", default=os.path.join("runs", "vit6_selection"), help="the folder its cells ran in")
    args = parser.parse_args(argv)
    target = os.path.join(ship_presets.WEIGHTS, "vit6_fashion_mnist")
    if os.path.exists(target):
        parser.error(f"{target} exists; delete it to ship vit6_fashion_mnist anew")
    folder, command, validation = chosen_cell(args.runs)
    check_run(folder, command, validation)
    metadata = ship_presets.ship("vit6_fashion_mnist", folder, command, checkpoint="best.keras", validation=validation)
    print(json.dumps(metadata, indent=2))


STUDY = engine.study_of(sys.modules[__name__])

if __name__ == "__main__":
    main()
