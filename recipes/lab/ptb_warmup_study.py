"""Penn Treebank, the language model: pre-norm against causal de-escalation, each with and without
learning-rate warmup, the rate bracketed on seed 0, then verdict seeds 1-5; then the Transformer-XL at
depth 32 for post-norm (with and without warmup), pre-norm and causal de-escalation, each bracketed the
same way. Resumable cell by cell.

    nice -n 19 keras-tse study ptb_warmup [--jobs 2] [--part grid|deep] [--runs runs/ptb_warmup]
    keras-tse study ptb_warmup --jobs 21 --budget-s 540 --out "$OUT"    # on a GPU machine

Each cell is one run of `keras-tse train lm --dataset ptb` (JAX), with
the model, data and budget of the card's first studies (zoo/ptb_transformer_xl16.md: 16 blocks, width
128, 500 steps of batch 16, validation at 250 and 500), in its own folder under `--runs`; a finished
cell becomes one row of `zoo/ptb_transformer_xl16/warmup_study.csv`.

Choices where the paper is silent:
- the causal arm is eq. (21) at the FFN input with tau 0.5, the best causal setting of the card's
  language-model study (tau 1 and a learned tau were within its seed spread);
- warmup: linear from 0 over the first 50 steps (a tenth of the budget), then the recipe's cosine;
- the best rate is the one of lowest validation loss at seed 0 (`recipes/lab/engine.py`'s plan), never the
  test set's;
- the 32-block part gives post-norm the chance every other arm has: a rate grid on seed 0 and an arm
  with warmup, before anything is said of post-norm failing there (a 32-block cell takes about twice a
  16-block one's 947-1,339 s on a 2-core CPU: this part ran on GPUs). The rows' `depth` column tells the
  parts apart.
"""

import os
import sys

from recipes.lab import ROOT, engine, lm_study_card

RESULTS = os.path.join(ROOT, "zoo", "ptb_transformer_xl16", "warmup_study.csv")
DATA = ("--dataset", "ptb", "--no-download", "--steps", "500", "--eval-interval", "250")
WARMUP_STEPS = 50
CAUSAL = ("--norm", "deescalate", "--tau", "0.5")
ARMS = {
    "pre": ("--norm", "pre"),
    "pre_warmup": ("--norm", "pre", "--warmup-steps", str(WARMUP_STEPS)),
    "causal": CAUSAL,
    "causal_warmup": (*CAUSAL, "--warmup-steps", str(WARMUP_STEPS)),
    "post_32": ("--norm", "post", "--depth", "32"),
    "post_32_warmup": ("--norm", "post", "--depth", "32", "--warmup-steps", str(WARMUP_STEPS)),
    "pre_32": ("--norm", "pre", "--depth", "32"),
    "causal_32": (*CAUSAL, "--depth", "32"),
}
SEEDS = (0, 1, 2, 3, 4, 5)  # seed 0 chooses the rate; the verdicts rest on seeds 1-5 (zoo/README.md)
GRID = (2.5e-4, 5e-4, 1e-3)
PARTS = {
    "grid": (engine.Plan(("pre", "pre_warmup", "causal", "causal_warmup"), GRID, SEEDS, select_by="valid_loss"),
             "the 16-block grid"),
    "deep": (engine.Plan(("post_32", "post_32_warmup", "pre_32", "causal_32"), GRID, SEEDS, select_by="valid_loss"),
             "the 32-block rows"),
}  # fmt: skip
FIELDS = lm_study_card.FIELDS


# The card's questions (`engine.questions`), each a pair of arms of one part: A, B, what A against B answers.
QUESTIONS = engine.questions("""
    pre_warmup      pre         does warmup help pre-norm?
    causal_warmup   causal      does warmup help causal de-escalation?
    causal          pre         causal de-escalation against pre-norm
    causal_warmup   pre_warmup  the same, both with warmup
    post_32_warmup  post_32     at 32 blocks: does warmup help post-norm?
    causal_32       post_32     at 32 blocks: causal de-escalation against post-norm
    causal_32       pre_32      at 32 blocks: causal de-escalation against pre-norm
    causal_32       post_32_warmup  at 32 blocks: causal de-escalation against post-norm with warmup
    causal_32       causal      causal de-escalation at 32 blocks against 16
""")


TITLE = "Penn Treebank language model: warmup against causal de-escalation, then 32 blocks"
CLAIM_METRIC = "test_perplexity"  # what a verdict claim about its arms is judged on (recipes/lab/verdict_claims.py)
CARD = os.path.join(ROOT, "zoo", "ptb_transformer_xl16.md")
STUDY = lm_study_card.study_of(sys.modules[__name__])
