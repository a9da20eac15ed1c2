"""Yu & Zhang, Sec. 3.3: the 80-block ViT on CIFAR-10, post-norm vs pre-norm vs de-escalated post-norm.

The paper's recipe, as a script: `keras-tse train vit` (`keras_tse.cli.train_vit`), whose defaults
are Sec. 3.3's and Table 1's (depth 80, width 192, 8 heads, 4x4 patches, AdamW at 1e-4, 5e-5 for post-norm,
x0.2 at 70% and 90%, batch 128, RandAugment, 150 epochs). Every flag of that command works here:

    KERAS_BACKEND=jax python recipes/cifar10_vit.py --norm all --data-dir ~/data/cifar10
    python recipes/cifar10_vit.py --smoke --norm all      # the whole recipe on local synthetic data, CPU
"""

import sys

from keras_tse.cli import train_vit

if __name__ == "__main__":
    sys.exit(train_vit.main(prog="cifar10_vit"))
