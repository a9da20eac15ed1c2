"""Fig. 7 at the paper's widths: the depth-60 Transformer-XL (Sec. 3.4's model and training) on Penn
Treebank, post-norm, pre-norm and causal de-escalation, a learning-rate grid per arm on the selection
seed, then verdict seeds 1-5 at each arm's best rate. A GPU study: resumable cell by cell.

    keras-tse study fig7_paper --dry-run                                        # the cells that can start
    KERAS_TSE_DATA_DIR=.data keras-tse study fig7_paper --jobs 3 --budget-s 540 --out "$OUT"   # on a GPU
    keras-tse study fig7_paper --card                                           # its table, from the rows

Each cell is one run of `keras-tse train lm --dataset ptb --size paper` (JAX, float32): the depth-60
presets' widths, a plain softmax over PTB's 10,000 words, 4,000 steps of 40 x 150 tokens (26 passes over
its 929k training words), validated every 500; a finished cell becomes one row of `zoo/gpu/fig7_paper.csv`.

Choices where the paper is silent:
- the causal arm is eq. (21) at the FFN input with tau 0.5, the best causal setting of the 16-block
  study on the same data (zoo/ptb_transformer_xl16.md);
- the grid 2.5e-4/5e-4/1e-3 has Sec. 3.4's rate (2.5e-4) at its low end and grows by the engine's factor 3
  past an end that wins; the best rate is the one of lowest validation loss on seed 0, never the test set's;
- a cell starts only while the call's budget covers `CELL_ESTIMATE_S` (not measured at this size: the
  16-block model's 500 steps took 947-1,339 s on a 2-core CPU; this estimate is a budget, not a timing).
"""

import os
import sys

from recipes.lab import ROOT, engine, lm_study_card

RESULTS = os.path.join(ROOT, "zoo", "gpu", "fig7_paper.csv")
DATA = ("--dataset", "ptb", "--size", "paper", "--no-download")
ARMS = {
    "post": ("--norm", "post"),
    "pre": ("--norm", "pre"),
    "causal": ("--norm", "deescalate", "--tau", "0.5"),
}
PLAN = engine.Plan(tuple(ARMS), (2.5e-4, 5e-4, 1e-3), (0, 1, 2, 3, 4, 5), max_extensions=1, select_by="valid_loss")
CELL_ESTIMATE_S = 540
FIELDS = lm_study_card.FIELDS
QUESTIONS = engine.questions("""
    causal  post  causal de-escalation against post-norm
    causal  pre   causal de-escalation against pre-norm
    pre     post  pre-norm against post-norm
""")


TITLE = "Fig. 7 at the paper's widths on a GPU: Transformer-XL-60 on Penn Treebank"
CARD = os.path.join(ROOT, "zoo", "transformer_xl60_wt103.md")
TABLE_BLOCK = "gpu_fig7"  # the card's block of this study's table
STUDY = lm_study_card.study_of(sys.modules[__name__])
