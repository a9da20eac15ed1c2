"""Write the tables of zoo/depth_study.md from the sweep's CSV (so the card quotes the CSV, not a hand copy).

    KERAS_BACKEND=jax keras-tse sweep --out zoo/depth_study     # the study (resumable)
    python recipes/depth_study_card.py zoo/depth_study          # prints the tables the card holds
"""

import sys

import numpy as np

from keras_tse.sweep import SweepConfig, arms_of, cell_label, cells, markdown_table, plot_sweep, read_rows


def initial_profile(rows):
    """Seed-mean t_sim after the last block and gradient norm of the first / last block at init."""
    lines = ["| norm | depth | t_sim after last block at init | grad norm, first block | grad norm, last block |",
             "|---|---:|---:|---:|---:|"]
    groups = {}
    top_lr = max(float(r["learning_rate"]) for r in rows)
    for row in rows:
        if float(row["learning_rate"]) != top_lr:
            continue  # the init measures do not depend on the learning rate: one of each seed
        groups.setdefault((row["norm"], row["tau"], int(row["depth"])), []).append(row)
    order = arms_of(rows)
    for (norm, tau, depth), members in sorted(groups.items(), key=lambda kv: (order.index(kv[0][:2]), kv[0][2])):
        tsim = np.mean([float(r["tsim_init"].split(";")[-1]) for r in members])
        first = np.mean([float(r["grad_init"].split(";")[0]) for r in members])
        last = np.mean([float(r["grad_init"].split(";")[-1]) for r in members])
        lines.append(f"| {cell_label(norm, tau)} | {depth} | {tsim:.3g} | {first:.3g} | {last:.3g} |")
    return "\n".join(lines)


def main(folder):
    rows = read_rows(f"{folder}/sweep.csv")
    total = len(list(cells(SweepConfig())))
    seeds = sorted({int(r["seed"]) for r in rows})
    plot_sweep(rows, f"{folder}/plots")
    print(f"{len(rows)} of {total} cells finished; seeds present: {seeds}\n")
    print(markdown_table(rows))
    print()
    print(initial_profile(rows))


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "zoo/depth_study")
