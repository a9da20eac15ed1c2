"""Yu & Zhang, Sec. 3.4: the 60-block Transformer-XL on WikiText-103, post-norm vs pre-norm vs de-escalated.

The paper's recipe, as a script: `keras-tse train lm` (`keras_tse.cli.train_lm`), whose defaults are
Sec. 3.4's (Transformer-XL's WikiText-103 base configuration at depth 60: width 410, 10 heads, FFN 820,
segment and memory 150, adaptive input and softmax, Adam at 2.5e-4 with cosine decay, batch 40, no dropout,
no warmup). Every flag of that command works here:

    KERAS_BACKEND=jax python recipes/wikitext103_txl.py --norm all --data-dir ~/data
    python recipes/wikitext103_txl.py --smoke --norm all   # small model, CPython's docs as text, CPU
"""

import sys

from keras_tse.cli import train_lm

if __name__ == "__main__":
    sys.exit(train_lm.main(prog="wikitext103_txl"))
