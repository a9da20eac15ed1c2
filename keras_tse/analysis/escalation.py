"""Token similarity escalation at initialisation, measured (Yu & Zhang, Sec. 2.4).

Stacks `depth` freshly initialised blocks of one kind, feeds random tokens `X ~ N(0, 1)` of shape
`[n, d]`, and records `t_sim` of the input and after every block, averaged over seeds. With the
paper's setting (n=64, d=512, h=8, alpha=1) post-norm blocks drive similarity towards 1 within
about 15 blocks, pre-norm blocks slow the rise, and de-escalated blocks hold it down.
"""

import csv
import dataclasses

import keras
import numpy as np

from keras_tse import run_files
from keras_tse.analysis.similarity import token_similarity
from keras_tse.norms import ESCALATION_LABELS, PAPER_NORMS, escalation_kinds
from keras_tse.zoo.blocks import escalation_block


@dataclasses.dataclass
class EscalationConfig:
    """The measurement's settings; defaults are the paper's Sec. 2.4."""

    depth: int = 20  # Fig. 2 stacks 20 blocks
    num_tokens: int = 64  # n
    hidden_dim: int = 512  # d
    num_heads: int = 8  # h
    ffn_dim: int = 2048  # not stated in the paper; the usual 4 * d of a ViT block
    alpha: float = 1.0
    tau: float = 1.0  # the de-escalation strength of every experiment in Sec. 3
    seeds: tuple = (0, 1, 2)
    batch_size: int = 1  # independent token matrices per seed
    # Glorot (Sec. 2.1's Xavier): on the d x d value kernels its variance 2 / (d + d) = 1/d is Sec. 2.4's
    # W ~ N(0, I/d); "torch" or "normal" (keras_tse.layers.initializers) measure the other schemes.
    initializer: str = "glorot"


def similarity_at_init(kinds=PAPER_NORMS, config=None, verbose=0):
    """Mean token similarity at the input and after each block, per block kind.

    Args:
        kinds: names from `keras_tse.norms.escalation_kinds()`.
        config: an `EscalationConfig`. Defaults to the paper's Sec. 2.4.
        verbose: 1 for a Keras progress bar over the (kind, seed) stacks.
            Defaults to 0.

    Returns:
        dict kind -> NumPy array `[depth + 1]`: entry 0 is the input's
        similarity, entry `k` the similarity after block `k`, each averaged
        over seeds and examples.
    """
    config = config or EscalationConfig()
    unknown = [k for k in kinds if k not in escalation_kinds()]
    if unknown:
        raise ValueError(f"Unknown block kind(s) {unknown}; choose from {escalation_kinds()}. Received: kinds={kinds}")
    bar = keras.utils.Progbar(len(kinds) * len(config.seeds), verbose=verbose)
    profiles = {}
    for kind in kinds:
        trials = []
        for seed in config.seeds:
            trials.append(_one_trial(kind, config, seed))
            bar.add(1)
        profiles[kind] = np.mean(trials, axis=0)
    return profiles


def _one_trial(kind, config, seed):
    keras.utils.set_random_seed(seed)
    x = np.random.default_rng(seed).standard_normal((config.batch_size, config.num_tokens, config.hidden_dim))
    x = keras.ops.convert_to_tensor(x.astype("float32"))
    profile = [token_similarity(x)]
    options = dict(
        num_heads=config.num_heads, ffn_dim=config.ffn_dim, alpha=config.alpha, initializer=config.initializer
    )
    for _ in range(config.depth):
        x = escalation_block(kind, config.depth, config.tau, **options)(x)
        profile.append(token_similarity(x))
    return np.mean([keras.ops.convert_to_numpy(p) for p in profile], axis=-1)


def format_table(profiles):
    """A plain-text table: one row per block, one column per kind."""
    kinds = list(profiles)
    lines = ["block  " + "  ".join(f"{k:>18}" for k in kinds)]
    for block in range(len(next(iter(profiles.values())))):
        label = "input" if block == 0 else str(block)
        lines.append(f"{label:>5}  " + "  ".join(f"{profiles[k][block]:18.4f}" for k in kinds))
    return "\n".join(lines)


# The rows of the README's table (entry 0 is the input) and the column names of the kinds.
README_BLOCKS = (0, 1, 2, 4, 6, 8, 10, 15, 20)
COLUMN_NAMES = ESCALATION_LABELS


def write_csv(path, profiles):
    """`block,<kind>,...`, one row per block (0 = the input), written whole (temporary file, then rename)."""
    kinds = list(profiles)
    with run_files.replacing(path) as f:
        f.write("block," + ",".join(kinds) + "\n")
        for block in range(len(profiles[kinds[0]])):
            f.write(f"{block}," + ",".join(f"{profiles[k][block]:.6g}" for k in kinds) + "\n")


def read_csv(path):
    """The profiles `write_csv` wrote: kind -> array over blocks."""
    with open(path, newline="") as f:
        rows = list(csv.DictReader(f))
    return {kind: np.array([float(row[kind]) for row in rows]) for kind in rows[0] if kind != "block"}


def markdown_table(profiles, blocks=README_BLOCKS):
    """The README's table: t_sim at the listed blocks, one column per kind."""
    kinds = list(profiles)
    lines = ["| block | " + " | ".join(COLUMN_NAMES.get(k, k) for k in kinds) + " |", "|---:|" + "---:|" * len(kinds)]
    for block in blocks:
        label = "input" if block == 0 else str(block)
        lines.append(f"| {label} | " + " | ".join(f"{profiles[k][block]:.4f}" for k in kinds) + " |")
    return "\n".join(lines)
