"""How deep each layout trains at width 32: the depth-80 study's model and data (10,000 Fashion-MNIST
images, 4 epochs, `--scan`) at 160, 320 and 640 blocks, each block rematerialised (`--remat`: its
activations recomputed in the backward pass, so memory does not bound the depth): post-norm, pre-norm,
de-escalation, DeepNorm, LayerScale and de-escalation with LayerScale. Resumable cell by cell.

    keras-tse study depth_ladder --part cpu --dry-run          # 160 and 320 blocks: a 2-core CPU's part
    nice -n 19 keras-tse study depth_ladder --part cpu --jobs 2
    keras-tse study depth_ladder --part gpu --jobs 3 --budget-s 540 --out "$OUT"   # 640 blocks, on a GPU
    keras-tse study depth_ladder --card

Choices where nothing is published:
- seed 0 at one rate a layout, the rate the depth-80 study chose for it on seed 0 (`RATES`, checked against
  its rows by a test): the ladder asks where each layout stops training at a rate that worked at 80
  blocks, not what its best rate is deeper; it states no verdict (that needs verdict seeds);
- the depth-80 study's rows are the ladder's first rung (its `results.csv`), not run again;
- the cost of a cell is not measured yet at these depths: a depth-80 cell took 305-1,567 s on the 2-core
  CPU beside other work (`results.csv`), and a step's time grows about linearly in the depth
  (zoo/speed.md's remat ladder), so a 320-block cell is hours there.
"""

import os
import sys

from recipes.lab import ROOT, depth80_study, engine, vit_study_card

RESULTS = os.path.join(ROOT, "zoo", "depth80_fashion_mnist", "depth_ladder.csv")
DATA = depth80_study.DATA  # the depth-80 study's data and settings, so that its rows are the first rung
MODEL = (*depth80_study.MODEL, "--remat")  # its model; each arm's --depth comes after and wins
EPOCHS = depth80_study.EPOCHS
LAYOUTS = ("post", "pre", "deescalate", "deepnorm", "layerscale", "deescalate_layerscale")
RATES = {"post": 3e-4, "pre": 1e-3, "deescalate": 1e-3, "deepnorm": 3e-3, "layerscale": 3e-3,
         "deescalate_layerscale": 3e-3}  # fmt: skip
DEPTHS = {"cpu": (160, 320), "gpu": (640,)}
ARMS = {f"{layout}_{depth}": ("--norm", layout, "--depth", str(depth))
        for depths in DEPTHS.values() for depth in depths for layout in LAYOUTS}  # fmt: skip


def _plan(depths):
    arms = [f"{layout}_{depth}" for depth in depths for layout in LAYOUTS]
    return engine.Plan(tuple(arms), (), (0,), rates={arm: RATES[arm.rpartition("_")[0]] for arm in arms})


PARTS = {part: (_plan(depths), f"{' and '.join(map(str, depths))} blocks") for part, depths in DEPTHS.items()}
QUESTIONS = ()


def _cell(row):
    return f"{float(row['train_loss']):.3f} / {float(row['test_accuracy']):.4f}" if row else "not run"


def markdown_table(rows):
    """Per layout at its rate, seed 0: final training loss / test accuracy at each depth, 80 blocks being the
    depth-80 study's row."""
    first = depth80_study.STUDY.read_rows()
    depths = [depth for part in DEPTHS.values() for depth in part]
    lines = [
        f"| layout | lr | 80 blocks | {' | '.join(f'{d} blocks' for d in depths)} |",
        "|---|---:|---:|" + "---:|" * len(depths),
    ]
    for layout in LAYOUTS:
        seed0 = [r for r in first if r["arm"] == layout and float(r["learning_rate"]) == RATES[layout]]
        at = {d: [r for r in rows if r["arm"] == f"{layout}_{d}"] for d in depths}
        cells = [_cell(next((r for r in seed0 if int(r["seed"]) == 0), None))]
        cells += [_cell(at[d][0] if at[d] else None) for d in depths]
        lines.append(f"| {layout} | {RATES[layout]:g} | {' | '.join(cells)} |")
    return "\n".join(lines) + (
        f"\n\nFinal training loss / test accuracy, seed 0; {len(rows)} cells measured "
        "(`zoo/depth80_fashion_mnist/depth_ladder.csv`), 80 blocks from the depth-80 study's `results.csv`."
        + _costs(rows, depths)
    )


def _costs(rows, depths):
    """What a cell cost at each depth measured, by machine: the figure the GPU's part is planned from."""
    spans = []
    for depth in depths:
        at_depth = [row for row in rows if row["arm"].endswith(f"_{depth}")]
        spans += [f"{depth} blocks on {m}, {CELLS_AT_ONCE}: {span}" for m, span in vit_study_card.cell_costs(at_depth)]
    return f" Seconds a cell: {'; '.join(spans)}." if spans else ""


FIGURE_TITLE = "ViT at width 32, Fashion-MNIST 10k, remat: each layout at its depth-80 rate, seed 0"
CELLS_AT_ONCE = "two cells at once"
TITLE = "How deep each layout trains at width 32: 160 and 320 blocks (CPU), 640 (GPU), remat"
CARD = os.path.join(ROOT, "zoo", "depth80_fashion_mnist.md")
STUDY = vit_study_card.study_of(sys.modules[__name__])
