"""The speed table at the paper's sizes on a GPU: `keras-tse bench` (ViT-80 batch 128 and
Transformer-XL-60 batch 40 x 150, bfloat16 mixed precision, each case in its own process, timm's ViT
beside it) once under JAX and once under PyTorch compiled per block. One cell a backend, alone on the
GPU: its times are the table.

    keras-tse study speed_paper --dry-run
    keras-tse study speed_paper --jobs 1 --budget-s 540 --out "$OUT"    # on a GPU: one bench at a time
    keras-tse study speed_paper --card

A cell's row holds the bench's results as JSON (`results`), so the result file alone regenerates the
card's table. The engine's rows carry a learning rate: a bench cell's is the bench's fixed Adam rate.
"""

import json
import os
import sys

from recipes.lab import ROOT, engine, gpu_cells_card

RESULTS = os.path.join(ROOT, "zoo", "gpu", "speed_paper.csv")
BENCH = ("--dtype", "mixed_bfloat16", "--peer", "timm", "--isolate", "--budget-s", "500")
ARMS = {"jax": (), "torch": ("--jit-compile",)}
BENCH_RATE = 1e-4  # keras_tse.training.benchmark compiles every case with Adam(1e-4)
PLAN = engine.Plan(arms=tuple(ARMS), grid=(BENCH_RATE,), seeds=(0,), bracket=False)
CELL_ESTIMATE_S = 520  # the bench's own budget, and its start
FIELDS = ("arm", "learning_rate", "seed", "results", "seconds", "backend", "machine")


def run_cell(runs, arm, learning_rate, seed):
    """One `keras-tse bench` under backend `arm`; its row."""
    out = os.path.join(runs, f"{arm}.json")
    command = [sys.executable, "-m", "keras_tse.cli.main", "bench", *BENCH, *ARMS[arm], "--out", out]
    seconds = engine.run_process(command, os.path.join(runs, f"{arm}.log"), f"the {arm} bench", backend=arm)
    with open(out) as f:
        results = json.load(f)["results"]
    return {"arm": arm, "learning_rate": f"{learning_rate:g}", "seed": seed, "results": json.dumps(results),
            "seconds": seconds, "backend": arm}  # fmt: skip


def markdown_table(rows):
    """Every timed case of the study's cells, or "not measured"; then the cases timed apart."""
    results = [
        r for row in sorted(rows, key=lambda row: list(ARMS).index(row["arm"])) for r in json.loads(row["results"])
    ]
    parts = [gpu_cells_card.speed_table(results) if results else "Not measured: no cell of the study has run."]
    return "\n\n".join([*parts, *filter(None, [gpu_cells_card.benches_apart()])])


TITLE = "The speed table at the paper's sizes on a GPU: keras-tse bench under JAX and PyTorch"
CARD = os.path.join(ROOT, "zoo", "speed.md")
TABLE_BLOCK = "gpu_speed"  # the card's block of this study's table
STUDY = engine.study_of(sys.modules[__name__])
