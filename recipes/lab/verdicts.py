"""The verdict rule every card uses to say that one arm beats another, or is equivalent to it.

Two arms' per-seed values are compared by the difference of their means, `d` (oriented so that a
positive `d` favours A), with Student's t: a paired t where the seeds pair (seed k of A and of B saw
the same subset and the same batch order), else Welch's t. Each comparison has a minimum effect `m`
fixed per metric before looking (`MIN_EFFECTS`, stated in zoo/README.md), and three outcomes:

- **beats** / **loses to**: the t-test rejects `d = 0` and the estimate passes the minimum effect
  (`|d| >= m`);
- **equivalent to**: two one-sided t-tests (TOST) reject `d <= -m` and `d >= m`: the difference lies
  inside the minimum effect;
- **inconclusive** otherwise: the seeds cannot tell.

A comparison's two null hypotheses (`d = 0`; `|d| >= m`) cannot both be true, so testing both at
level alpha keeps its chance of a false verdict at alpha. Across the comparisons of one card (one
family) each p-value is held against alpha divided by the number of comparisons that still have a
hypothesis standing (Holm's step-down under that constraint, Shaffer's refinement). A comparison keeps
its other hypothesis standing once one is rejected, so in practice that number stays the card's count
of comparisons: the step divides alpha by the family's size (Bonferroni), which keeps the chance of any
false verdict in the card at alpha.

A seed that diverged (a non-finite value) counts as its `diverged` value where the caller gives one: the
metric's value for a model that predicts the class frequencies (ln 10 nats and 10% accuracy on a balanced
10-class set), so that one diverged seed among five does not stop a verdict the others make clear.
Without one it counts as the worst possible: a mean with an infinite member has no t-interval, so the
comparison is decided by an exact rank test (Wilcoxon-Mann-Whitney, every relabelling of the seeds
enumerated), which can only say beats, loses to or inconclusive, and two seeds that both diverged tie.
"""

import dataclasses
import itertools
import math

import numpy as np

BEATS, LOSES, EQUIVALENT, INCONCLUSIVE = "beats", "loses to", "equivalent to", "inconclusive"
ALPHA = 0.05
MIN_SEEDS = 2  # the least a t-interval can be computed from
VERDICT_SEEDS = 5  # the least a card states a verdict from: below it, a t-test at 3 seeds has 12% power at a 1-sd gap
# The smallest difference worth a verdict, fixed per metric before looking at any result (zoo/README.md):
# 0.03 nats of loss, 1 point of accuracy (stored as a fraction), 5% of perplexity. Perplexity is compared
# as its logarithm (the loss), where 5% is log(1.05) nats whatever the level.
MIN_EFFECTS = {"loss": 0.03, "accuracy": 0.01, "perplexity": math.log(1.05)}


def min_effect_of(metric):
    """The minimum effect of a metric by its name's kind (`train_loss` -> loss), one line if none fits."""
    for kind, effect in MIN_EFFECTS.items():
        if kind in metric:
            return effect
    kinds = sorted(MIN_EFFECTS)
    raise ValueError(f"metric {metric!r} has no minimum effect: expected a name containing one of {kinds}")


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One comparison's numbers: the estimate `d` (positive favours A), its standard error and degrees
    of freedom (None under the rank test), the two-sided p of `d = 0` and the TOST p of `|d| >= m`."""

    estimate: float
    stderr: float
    df: float
    p_difference: float
    p_equivalence: float
    min_effect: float
    seeds: tuple

    def smallest_visible_effect(self, alpha=ALPHA, power=0.8):
        """The gap this comparison's seeds would find with probability `power` at level alpha (normal
        noise of the observed spread): (t_{1-alpha/2} + t_{power}) * stderr."""
        if self.df is None:
            return math.inf
        return (t_quantile(1.0 - alpha / 2.0, self.df) + t_quantile(power, self.df)) * self.stderr


def _oriented(values, lower_is_better, log_scale):
    """Values where larger is better, a diverged seed as the worst."""
    values = np.asarray(values, dtype="float64")
    if log_scale:  # a perplexity is at least 1: its log is finite or the diverged seed's inf / nan
        values = np.log(values)
    values = np.where(np.isfinite(values), values, np.inf if lower_is_better else -np.inf)
    return -values if lower_is_better else values


def measure(a, b, lower_is_better=True, *, metric="loss", min_effect=None, paired=False, diverged=None):
    """The `Comparison` of arm A's per-seed values with arm B's (seed k of each at index k if `paired`); a
    non-finite value (a diverged seed) scored as `diverged` where given."""
    if len(a) < MIN_SEEDS or len(b) < MIN_SEEDS:
        raise ValueError(f"a verdict needs at least {MIN_SEEDS} seeds per arm, got {len(a)} and {len(b)}")
    if paired and len(a) != len(b):
        raise ValueError(f"paired seeds need as many seeds per arm, got {len(a)} and {len(b)}")
    m = min_effect_of(metric) if min_effect is None else float(min_effect)
    log_scale = "perplexity" in metric
    if diverged is not None:
        a, b = (np.where(np.isfinite(np.asarray(v, "float64")), v, float(diverged)) for v in (a, b))
    a, b = _oriented(a, lower_is_better, log_scale), _oriented(b, lower_is_better, log_scale)
    seeds = (len(a), len(b))
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        statistic, p = rank_test(a, b, paired)
        return Comparison(statistic, math.nan, None, p, 1.0, m, seeds)
    if paired:
        diff = a - b
        estimate, stderr, df = diff.mean(), diff.std(ddof=1) / math.sqrt(len(diff)), len(diff) - 1.0
    else:
        va, vb = a.var(ddof=1) / len(a), b.var(ddof=1) / len(b)
        estimate, stderr = a.mean() - b.mean(), math.sqrt(va + vb)
        df = (va + vb) ** 2 / (va**2 / (len(a) - 1) + vb**2 / (len(b) - 1)) if va + vb > 0 else len(a) + len(b) - 2.0
    if stderr == 0:  # identical seeds: a difference is certain, so is its size
        p_difference = 0.0 if estimate != 0 else 1.0
        p_equivalence = 0.0 if abs(estimate) < m else 1.0
    else:
        p_difference = 2.0 * t_sf(abs(estimate) / stderr, df)
        p_equivalence = max(t_sf((estimate + m) / stderr, df), t_sf((m - estimate) / stderr, df))
    return Comparison(float(estimate), float(stderr), float(df), float(p_difference), float(p_equivalence), m, seeds)


def decide(comparisons, alpha=ALPHA):
    """The verdicts of one family of `Comparison`s, by Holm's procedure under the constraint above."""
    hypotheses = [(c.p_difference, i, "difference") for i, c in enumerate(comparisons)]
    hypotheses += [(c.p_equivalence, i, "equivalence") for i, c in enumerate(comparisons)]
    hypotheses.sort()
    rejected = set()
    for position, (p, index, kind) in enumerate(hypotheses):
        standing = {i for _, i, _ in hypotheses[position:]}  # each holds at most one true null
        if p > alpha / len(standing):
            break
        rejected.add((index, kind))
    verdicts = []
    for index, c in enumerate(comparisons):
        if (index, "difference") in rejected and (c.df is None or abs(c.estimate) >= c.min_effect):
            verdicts.append(BEATS if c.estimate > 0 else LOSES)
        elif (index, "equivalence") in rejected:
            verdicts.append(EQUIVALENT)
        else:
            verdicts.append(INCONCLUSIVE)
    return verdicts


def compare(a, b, lower_is_better=True, *, metric="loss", min_effect=None, paired=False, alpha=ALPHA):
    """`BEATS`, `LOSES`, `EQUIVALENT` or `INCONCLUSIVE`: one comparison, a family of its own."""
    comparison = measure(a, b, lower_is_better, metric=metric, min_effect=min_effect, paired=paired)
    return decide([comparison], alpha)[0]


def measure_seeds(seeds_a, seeds_b, lower_is_better=True, *, metric="loss", diverged=None):
    """`measure` of two arms given as {seed: value}: paired on the seeds both ran where one arm's seeds are all
    the other's too (an arm given more seeds for another question keeps its pairing here), else Welch."""
    common = sorted(set(seeds_a) & set(seeds_b))
    paired = len(common) == min(len(seeds_a), len(seeds_b))
    if paired:
        seeds_a, seeds_b = ({k: seeds[k] for k in common} for seeds in (seeds_a, seeds_b))
    a, b = [seeds_a[k] for k in sorted(seeds_a)], [seeds_b[k] for k in sorted(seeds_b)]
    return measure(a, b, lower_is_better, metric=metric, paired=paired, diverged=diverged)


def class_frequency_value(metric, classes):
    """What a classifier that predicts the class frequencies of a balanced `classes`-class set scores on
    `metric`: ln(classes) nats of loss, 1/classes accuracy. The value a diverged seed counts as."""
    if "loss" in metric:
        return math.log(classes)
    if "accuracy" in metric:
        return 1.0 / classes
    raise ValueError(f"metric {metric!r}: expected a loss or an accuracy, whose class-frequency value is known")


def stated(comparisons, alpha=ALPHA):
    """The verdicts of one family as a card states them: with fewer than `VERDICT_SEEDS` verdict seeds
    an arm, "inconclusive (N verdict seeds)" whatever the test says."""
    return [
        verdict if min(c.seeds) >= VERDICT_SEEDS else f"{INCONCLUSIVE} ({min(c.seeds)} verdict seeds)"
        for verdict, c in zip(decide(comparisons, alpha), comparisons)
    ]


def table_cell(verdict):
    """A verdict as a table answers a question "A against B": "A beats B", "A is equivalent to B", or the
    verdict alone where it names no relation ("inconclusive (3 verdict seeds)", "not measured")."""
    if verdict in (BEATS, LOSES):
        return f"A {verdict} B"
    return f"A is {verdict} B" if verdict == EQUIVALENT else verdict


# The rank test for arms with a diverged seed.


def rank_test(a, b, paired=False):
    """(statistic, p): the Wilcoxon-Mann-Whitney statistic centred on its null mean (the signed-rank
    statistic if `paired`; positive when A ranks better) and its exact two-sided p, every relabelling
    of the seeds (every sign flip of the pairs) enumerated."""
    if paired:
        with np.errstate(invalid="ignore"):  # inf - inf: two seeds that both diverged, which tie
            diff = np.where(a == b, 0.0, a - b)
        diff = diff[diff != 0]
        ranks = _ranks(np.abs(diff))
        observed = float(np.sum(np.sign(diff) * ranks))
        totals = [float(np.dot(signs, ranks)) for signs in itertools.product((-1, 1), repeat=len(diff))]
    else:
        pooled = np.concatenate([a, b])
        ranks = _ranks(pooled)
        centre = len(a) * (len(pooled) + 1) / 2.0
        observed = float(ranks[: len(a)].sum() - centre)
        groups = itertools.combinations(range(len(pooled)), len(a))
        totals = [float(ranks[list(group)].sum() - centre) for group in groups]
    return observed, float(np.mean(np.abs(totals) >= abs(observed) - 1e-9))


def sign_flip_test(a, b, lower_is_better=True, *, diverged=None):
    """(mean paired difference, favouring A when positive; its exact two-sided p): the paired permutation
    test on the mean difference, every one of the 2^n sign flips of the n pairs enumerated, which needs no
    normality. Its smallest p is 2 / 2^n: 0.0625 at 5 pairs, 0.002 at 10. A non-finite value (a diverged
    seed) is scored as `diverged` where given, else as the worst value: the test then ranks (`rank_test`)."""
    if len(a) != len(b):
        raise ValueError(f"a sign-flip test pairs the seeds: got {len(a)} and {len(b)}")
    if diverged is not None:
        a, b = (np.where(np.isfinite(np.asarray(v, "float64")), v, float(diverged)) for v in (a, b))
    a, b = _oriented(a, lower_is_better, False), _oriented(b, lower_is_better, False)
    if not (np.all(np.isfinite(a)) and np.all(np.isfinite(b))):
        return rank_test(a, b, paired=True)
    diff = a - b
    flips = np.array(list(itertools.product((-1.0, 1.0), repeat=len(diff))))
    totals = np.abs(flips @ diff)
    observed = abs(float(diff.sum()))
    return float(diff.mean()), float(np.mean(totals >= observed * (1 - 1e-12) - 1e-12))


def holm(p_values, alpha=ALPHA):
    """Which of a family's null hypotheses Holm's step-down rejects: the k-th smallest p against
    alpha / (n - k), stopping at the first that fails."""
    rejected = [False] * len(p_values)
    for position, index in enumerate(sorted(range(len(p_values)), key=lambda i: p_values[i])):
        if p_values[index] > alpha / (len(p_values) - position):
            break
        rejected[index] = True
    return rejected


def sign_flip_verdicts(pairs, lower_is_better=True, *, metric="loss", alpha=ALPHA):
    """[(estimate, p, verdict)] of a family of paired comparisons [(A's values, B's values), ...] by the exact
    sign-flip test (`sign_flip_test`), Holm over the family: `BEATS` / `LOSES` where the test rejects no
    difference and the estimate passes the metric's minimum effect, else `INCONCLUSIVE` (it has no
    equivalence test)."""
    tests = [sign_flip_test(a, b, lower_is_better) for a, b in pairs]
    rejected = holm([p for _, p in tests], alpha)
    m = min_effect_of(metric)
    return [
        (estimate, p, (BEATS if estimate > 0 else LOSES) if reject and abs(estimate) >= m else INCONCLUSIVE)
        for (estimate, p), reject in zip(tests, rejected)
    ]


def _ranks(values):
    """Ranks 1..n, ties given their mean rank (infinities tie with each other)."""
    order = np.argsort(values, kind="stable")
    ranks = np.empty(len(values))
    sorted_values = values[order]
    start = 0
    while start < len(values):
        end = start
        while end + 1 < len(values) and sorted_values[end + 1] == sorted_values[start]:
            end += 1
        ranks[order[start : end + 1]] = (start + end) / 2.0 + 1.0
        start = end + 1
    return ranks


# Student's t distribution, without SciPy: the survival function through the regularised incomplete beta
# function, the quantile by bisection on it.


def t_sf(t, df):
    """P(T > t) for Student's t with `df` degrees of freedom."""
    tail = 0.5 * _incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return tail if t >= 0 else 1.0 - tail


def t_quantile(q, df):
    """The `q` quantile of Student's t with `df` degrees of freedom."""
    low, high = -1e3, 1e3
    for _ in range(200):
        middle = (low + high) / 2.0
        if 1.0 - t_sf(middle, df) < q:
            low = middle
        else:
            high = middle
    return (low + high) / 2.0


def _incomplete_beta(a, b, x):
    """I_x(a, b) = x^a (1-x)^b / (a B(a, b)) / (1 + d1 / (1 + d2 / (1 + ...))), the continued fraction
    evaluated by the modified Lentz method, on the side of x where it converges fast."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    if x > (a + 1.0) / (a + b + 2.0):
        return 1.0 - _incomplete_beta(b, a, 1.0 - x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)) / a
    tiny = 1e-300
    fraction, c, d = 1.0, 1.0, 0.0
    for j in range(1, 400):
        m = j // 2
        if j % 2:
            term = -(a + m) * (a + b + m) * x / ((a + 2.0 * m) * (a + 2.0 * m + 1.0))
        else:
            term = m * (b - m) * x / ((a + 2.0 * m - 1.0) * (a + 2.0 * m))
        d = 1.0 + term * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + term / c
        c = c if abs(c) > tiny else tiny
        fraction *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return front / fraction


def verdict_rates(seeds, gap, *, min_effect, paired, draws, family=1, seed=0):
    """How often the rule says each outcome when A's mean truly exceeds B's by `gap` (unit normal noise
    per seed; paired seeds share half their variance): {outcome: fraction of `draws`}. With `family` > 1,
    that many such comparisons are decided together and a draw counts the outcome of the first."""
    rng = np.random.default_rng(seed)
    counts = dict.fromkeys((BEATS, LOSES, EQUIVALENT, INCONCLUSIVE), 0)
    for _ in range(draws):
        comparisons = []
        for _ in range(family):
            shared = rng.normal(size=seeds) * math.sqrt(0.5) if paired else 0.0
            scale = math.sqrt(0.5) if paired else 1.0
            a = gap + shared + scale * rng.normal(size=seeds)
            b = shared + scale * rng.normal(size=seeds)
            comparisons.append(measure(a, b, lower_is_better=False, min_effect=min_effect, paired=paired))
        counts[decide(comparisons)[0]] += 1
    return {outcome: count / draws for outcome, count in counts.items()}
