"""The verdict rule every card uses to say that one arm beats another.

A beats B only when every seed of A is better than every seed of B, or when the 95% bootstrap interval
of the difference of the seed means (each arm's seeds resampled with replacement, 10,000 draws, a fixed
generator) excludes zero; otherwise the two are *tied within seeds*. Means alone decide nothing: two
reruns of one cell of the depth study differ by more than some gaps between arms' means.

A seed that diverged (a non-finite value) counts as the worst possible; then only the first clause
(every seed against every seed) can decide, since a mean with an infinite member has no interval.
"""

import numpy as np

BEATS, LOSES, TIED = "beats", "loses to", "tied within seeds"
DRAWS = 10_000
LEVEL = 0.95
MIN_SEEDS = 2


def _oriented(values, lower_is_better):
    """Values where larger is better, a diverged seed as the worst."""
    values = np.asarray(values, dtype="float64").reshape(-1)
    values = np.where(np.isfinite(values), values, np.inf if lower_is_better else -np.inf)
    return -values if lower_is_better else values


def difference_interval(a, b, draws=DRAWS, level=LEVEL, seed=0):
    """The bootstrap `level` interval of mean(a) - mean(b), each arm's seeds resampled on their own."""
    a, b = np.asarray(a, dtype="float64"), np.asarray(b, dtype="float64")
    rng = np.random.default_rng(seed)
    means_a = a[rng.integers(0, len(a), (draws, len(a)))].mean(axis=1)
    means_b = b[rng.integers(0, len(b), (draws, len(b)))].mean(axis=1)
    tail = (1.0 - level) / 2.0
    low, high = np.quantile(means_a - means_b, [tail, 1.0 - tail])
    return float(low), float(high)


def compare(a, b, lower_is_better=True):
    """`BEATS`, `LOSES` or `TIED`: arm A's per-seed values against arm B's under the rule above."""
    if len(a) < MIN_SEEDS or len(b) < MIN_SEEDS:
        raise ValueError(f"a verdict needs at least {MIN_SEEDS} seeds per arm, got {len(a)} and {len(b)}")
    a, b = _oriented(a, lower_is_better), _oriented(b, lower_is_better)
    if a.min() > b.max():
        return BEATS
    if a.max() < b.min():
        return LOSES
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return TIED
    low, high = difference_interval(a, b)
    return BEATS if low > 0 else LOSES if high < 0 else TIED
