"""Write the tables of zoo/depth_study.md from the sweep's CSV (so the card quotes the CSV, not a hand copy).

    KERAS_BACKEND=jax keras-tse sweep --out zoo/depth_study     # the study (resumable)
    python recipes/depth_study_card.py zoo/depth_study          # prints the tables the card holds

The committed grid is `SweepConfig()`'s (depth x {post, pre, deescalate tau 1 and 0.5} x
{torch, glorot} init x three learning rates x three seeds), all from today's code. The first study's
rows (all Glorot, written by the sweep code of commits up to 86f315c) are in `first_study.csv`, printed apart.
"""

import sys

import numpy as np

from keras_tse.experiments.sweep import (
    SweepConfig,
    arms_of,
    best_lr_table,
    cell_key,
    cell_label,
    cells,
    markdown_table,
    plot_sweep,
    read_rows,
    verdicts,
)


def split_by_grid(rows, config=None):
    """(rows of the committed grid, the other rows)."""
    grid = {cell_key(c) for c in cells(config or SweepConfig())}
    inside = [r for r in rows if cell_key(r) in grid]
    return inside, [r for r in rows if cell_key(r) not in grid]


def initial_profile(rows):
    """Seed-mean t_sim after the last block and gradient norm of the first / last block at init."""
    lines = [
        "| norm | init | depth | t_sim after last block at init | grad norm, first block | grad norm, last block |",
        "|---|---|---:|---:|---:|---:|",
    ]
    groups = {}
    for row in rows:
        # the init measures do not depend on the learning rate: one row per seed, the largest lr's
        seeds = groups.setdefault((row["norm"], row["tau"], row["initializer"], int(row["depth"])), {})
        kept = seeds.get(row["seed"])
        if kept is None or float(row["learning_rate"]) > float(kept["learning_rate"]):
            seeds[row["seed"]] = row
    order = arms_of(rows)
    for (norm, tau, init, depth), members in sorted(groups.items(), key=lambda kv: (order.index(kv[0][:3]), kv[0][3])):
        members = list(members.values())
        tsim = np.mean([float(r["tsim_init"].split(";")[-1]) for r in members])
        first = np.mean([float(r["grad_init"].split(";")[0]) for r in members])
        last = np.mean([float(r["grad_init"].split(";")[-1]) for r in members])
        lines.append(f"| {cell_label(norm, tau)} | {init} | {depth} | {tsim:.3g} | {first:.3g} | {last:.3g} |")
    return "\n".join(lines)


def progress(rows):
    total = len(list(cells(SweepConfig())))
    seeds = {}
    for row in rows:
        seeds.setdefault(row["initializer"], set()).add(int(row["seed"]))
    present = "; ".join(f"{init}: seeds {sorted(s)}" for init, s in sorted(seeds.items()))
    return f"{len(rows)} of {total} cells of the committed grid finished ({present})"


def main(folder):
    rows = read_rows(f"{folder}/sweep.csv")
    grid, earlier = split_by_grid(rows)
    plot_sweep(grid, f"{folder}/plots")
    print(progress(grid), "\n")
    print(best_lr_table(grid), "\n")
    print(verdicts(grid), "\n")
    print(markdown_table(grid), "\n")
    print(initial_profile(grid))
    if earlier:
        print(f"\nCells of sweep.csv outside the committed grid ({len(earlier)}):\n")
        print(markdown_table(earlier))
    first = read_rows(f"{folder}/first_study.csv")
    if first:
        print(f"\nThe first study (first_study.csv, {len(first)} cells, the sweep code of commits up to 86f315c):\n")
        print(markdown_table(first))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "zoo/depth_study")
