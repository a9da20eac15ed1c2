"""The verdict rule (zoo/README.md, recipes.lab.verdicts) and the claims the cards make with it."""

import os
import warnings

import numpy as np
import pytest

from recipes.lab import verdicts
from tests.helpers import lab_module

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# README.md's sentence before the rule, with the claim it made: "DeepNorm and LayerScale beat it at every depth".
OLD_README = (
    "but DeepNorm and LayerScale beat it at every depth"
    "<!-- verdict depth_study: deepnorm, layerscale beat deescalate(*) at depth 12, 24, 48 -->"
)


def test_students_t_without_scipy_matches_the_tables():
    # t_{0.975} at 2 and 4 degrees of freedom, and two tail areas (SciPy's values, to 1e-9)
    assert abs(verdicts.t_quantile(0.975, 2) - 4.302652729749) < 1e-9
    assert abs(verdicts.t_quantile(0.975, 4) - 2.776445105198) < 1e-9
    assert abs(verdicts.t_sf(2.0, 5) - 0.050969739415) < 1e-10
    assert abs(verdicts.t_sf(1.5, 2.7) - 0.120128595194) < 1e-10
    assert abs(verdicts.t_sf(-1.5, 2.7) - (1 - 0.120128595194)) < 1e-10


def test_welch_and_paired_p_values_are_the_textbook_ones():
    a, b = [0.10, 0.12, 0.11, 0.13, 0.09], [0.15, 0.16, 0.14, 0.18, 0.15]
    welch, paired = verdicts.measure(a, b), verdicts.measure(a, b, paired=True)
    assert abs(welch.p_difference - 0.001559032560) < 1e-9 and abs(welch.df - 7.986135182) < 1e-6
    assert abs(paired.p_difference - 0.000836186171) < 1e-9 and paired.df == 4.0
    assert abs(welch.estimate - 0.046) < 1e-12  # lower is better: A's lower loss is a positive gap
    assert verdicts.compare(a, b) == verdicts.compare(a, b, paired=True) == verdicts.BEATS
    assert verdicts.compare(b, a) == verdicts.LOSES


def test_three_outcomes_and_the_minimum_effect():
    base = np.array([1.00, 1.02, 1.01, 1.03, 0.99])
    noise = np.array([0.001, -0.002, 0.002, 0.0, -0.001])
    assert verdicts.compare(base, base + 0.2 + noise, paired=True) == verdicts.BEATS
    assert verdicts.compare(base, base + noise, paired=True) == verdicts.EQUIVALENT
    # a real difference smaller than the minimum effect (0.03 nats) is no win: it is equivalence
    small = verdicts.measure(base, base + 0.01 + noise, paired=True)
    assert small.p_difference < 0.001 and verdicts.decide([small]) == [verdicts.EQUIVALENT]
    wide = np.array([0.3, -0.3, 0.2, -0.25, 0.1])
    assert verdicts.compare(base, base + wide, paired=True) == verdicts.INCONCLUSIVE
    # accuracy: higher is better, one point the minimum effect
    assert verdicts.compare([0.91, 0.92, 0.90], [0.80, 0.81, 0.79], False, metric="test_accuracy") == verdicts.BEATS
    assert verdicts.min_effect_of("test_perplexity") == pytest.approx(np.log(1.05))


def test_holm_over_a_family_asks_more_of_each_comparison():
    """p = 0.03 decides a comparison alone, not one of three (0.03 > 0.05 / 3); one of p = 0.001 decides
    the first step, after which the others are held against 0.05 / 2."""
    one = verdicts.Comparison(0.1, 0.02, 4.0, 0.03, 1.0, 0.03, (5, 5))
    other = verdicts.Comparison(0.0, 0.5, 4.0, 0.9, 0.9, 0.03, (5, 5))
    assert verdicts.decide([one]) == [verdicts.BEATS]
    assert verdicts.decide([one, other, other]) == [verdicts.INCONCLUSIVE] * 3
    strong = verdicts.Comparison(0.5, 0.02, 4.0, 0.001, 1.0, 0.03, (5, 5))
    second = verdicts.Comparison(0.1, 0.02, 4.0, 0.02, 1.0, 0.03, (5, 5))
    assert verdicts.decide([strong, second, other]) == [verdicts.BEATS, verdicts.INCONCLUSIVE, verdicts.INCONCLUSIVE]
    assert verdicts.decide([strong, second]) == [verdicts.BEATS, verdicts.BEATS]  # 0.02 <= 0.05 / 1 after the first


def test_a_diverged_seed_is_the_worst_and_a_rank_test_decides():
    assert verdicts.rank_test(np.array([1.0, 2, 3, 4, 5]), np.array([-np.inf] * 5)) == (12.5, 2 / 252)
    assert verdicts.compare([0.1, 0.2, 0.3, 0.4, 0.5], [np.nan] * 5) == verdicts.BEATS
    assert verdicts.compare([np.nan] * 5, [0.1, 0.2, 0.3, 0.4, 0.5]) == verdicts.LOSES
    # three seeds: the smallest two-sided p of the rank test is 0.1, so nothing is decided
    assert verdicts.compare([0.1, 0.2, 0.3], [np.nan] * 3) == verdicts.INCONCLUSIVE
    assert verdicts.compare([0.1, 0.2, np.inf, 0.3, 0.2], [0.1, 0.25, 0.2, 0.3, 0.2]) == verdicts.INCONCLUSIVE


def test_one_seed_is_not_a_verdict_and_a_card_needs_five():
    with pytest.raises(ValueError, match="at least 2 seeds per arm, got 1 and 3"):
        verdicts.compare([0.1], [0.2, 0.3, 0.4])
    far = verdicts.measure([0.1, 0.11, 0.12], [0.9, 0.91, 0.92])
    assert verdicts.decide([far]) == [verdicts.BEATS] and verdicts.stated([far]) == ["inconclusive (3 verdict seeds)"]


def test_identical_arms_get_a_false_verdict_at_most_5_percent_of_the_time():
    """The rule's error rates and power, drawn again and checked against the committed file that
    zoo/README.md prints (`recipes.lab.verdict_rates`)."""
    import json

    rates_module = lab_module("verdict_rates")
    records = rates_module.measure_all()
    print("\n" + rates_module.markdown_table(records))
    for record in records:
        assert record["false_winner"] <= 0.05 and record["false_equivalent"] <= 0.05, record
        assert record["power_2sd"] > record["power_1sd"]
    with open(rates_module.RESULTS) as f:
        assert json.load(f)["rates"] == records
    # a family of ten identical comparisons: any false verdict among them, at most 5% of draws
    rng = np.random.default_rng(1)
    false = 0
    for _ in range(400):
        family = [verdicts.measure(rng.normal(size=5), rng.normal(size=5), min_effect=0.5) for _ in range(10)]
        false += any(v in (verdicts.BEATS, verdicts.LOSES) for v in verdicts.decide(family))
    assert false / 400 <= 0.05, false


def test_the_old_rule_named_a_winner_between_identical_arms_too_often():
    """The rule this one replaced (every seed beats every seed) alone: at 3 seeds it names a winner
    1 time in 10 between identical arms, twice the 5% the new rule keeps to."""
    rng = np.random.default_rng(0)
    draws = [(rng.normal(size=3), rng.normal(size=3)) for _ in range(2000)]
    old = np.mean([a.min() > b.max() or a.max() < b.min() for a, b in draws])
    new = np.mean([verdicts.compare(a, b, min_effect=0.5) in (verdicts.BEATS, verdicts.LOSES) for a, b in draws])
    assert 0.08 < old < 0.12 and new <= 0.05, (old, new)


def test_the_old_sentences_fail_and_every_published_claim_holds():
    claims = lab_module("verdict_claims")
    failures = claims.check_text(OLD_README)
    # five verdict seeds an arm: at depth 24, and at 48 for LayerScale, the claim now holds; elsewhere not
    assert len(failures) == 6 and all(f.endswith("not 'beats' (depth_study)") for f in failures), failures
    assert "layerscale is inconclusive against deescalate(1.0) at depth 12, not 'beats' (depth_study)" in failures
    assert not any("at depth 24" in f for f in failures)
    # sentences the cards made under the old rule: a win on one seed, and ties read as equivalence
    assert claims.check("ptb_warmup", None, "causal_32 beats post_32") == [
        "causal_32 is inconclusive against post_32, not 'beats' (ptb_warmup)"
    ]
    assert claims.check("tau_sweep", None, "tau_learned is equivalent to tau_1") == [
        "tau_learned is inconclusive against tau_1, not 'equivalent to' (tau_sweep)"
    ]
    texts = {}
    for document in lab_module("generated_tables").DOCUMENTS:
        path = os.path.join(ROOT, document)
        if os.path.exists(path):
            with open(path) as handle:
                texts[document] = handle.read()
    assert len(claims.claims(texts["README.md"])) >= 3  # the depth study's sentence carries its claims
    every = claims.every_document_claim()
    for document, text in texts.items():
        assert claims.check_text(text, every) == [], document


def test_a_claim_copied_alone_is_judged_in_its_cards_family_not_in_a_family_of_one():
    """BERT-24, de-escalation against post-norm: 0.56 nat above it, paired p 0.044 over five seeds. Alone
    that is a verdict at 5%; the card asks three questions together, where it is inconclusive. A document
    that states that one comparison alone is held to the card's family."""
    claims, verdicts = lab_module("verdict_claims"), lab_module("verdicts")
    planted = "Text.\n<!-- verdict bert_ptb: deescalate_24 loses to post_24 -->\n"
    assert claims.check_text(planted) == ["deescalate_24 is inconclusive against post_24, not 'loses to' (bert_ptb)"]
    # the same comparison decided alone: what a checker taking the document's claims as the family said
    (_, seeds_a), (_, seeds_b) = (claims.arm_seeds("bert_ptb", None, arm)[0] for arm in ("deescalate_24", "post_24"))
    alone = verdicts.measure_seeds(seeds_a, seeds_b, metric="test_loss")
    assert verdicts.stated([alone]) == [verdicts.LOSES] and 0.04 < alone.p_difference < 0.05
    # a claim the card does not ask joins its family: one more comparison, the threshold 0.05 / 4
    extra = "<!-- verdict bert_ptb: pre_24 is inconclusive against deescalate_24 -->"
    assert claims.check_text(planted.replace("-->\n", "-->\n" + extra + "\n")) == [
        "deescalate_24 is inconclusive against post_24, not 'loses to' (bert_ptb)"
    ]
    # the reversed pair reads the card's verdict the other way round
    assert claims.check_text("<!-- verdict bert_ptb: post_24 is inconclusive against deescalate_24 -->") == []


def test_a_claim_the_checker_cannot_read_is_one_line():
    claims = lab_module("verdict_claims")
    assert claims.check("depth_study", None, "deepnorm ties post at depth 12") == [
        "cannot read 'deepnorm ties post at depth 12': expected "
        "'ARMS beats|is equivalent to|loses to|is inconclusive against ARMS [at KEY VALUES]'"
    ]
    assert claims.check("nowhere", None, "a beats b") == [
        "unknown source 'nowhere': expected one of ['bert_ptb', 'depth80', 'depth_fixes', 'depth_fixes320', "
        "'depth_study', 'gpu_fig6', 'gpu_fig6_stopped', 'ptb_warmup', 'tau_sweep']"
    ]


def test_a_claim_on_the_gpu_runs_is_read_from_their_result_file_and_a_wrong_one_fails():
    claims = lab_module("verdict_claims")
    assert claims.check("gpu_fig6_stopped", "test_accuracy", "deescalate is inconclusive against post") == []
    assert claims.check("gpu_fig6_stopped", "train_loss", "deescalate beats post") == [
        "deescalate is inconclusive against post (2 verdict seeds), not 'beats' (gpu_fig6_stopped)"
    ]
    with pytest.raises(ValueError, match="zoo/gpu/fig6_stopped.json has no arm 'deepnorm'"):
        claims.check("gpu_fig6_stopped", "train_loss", "deepnorm beats post")


def test_a_claim_on_a_cell_study_leaves_out_the_seed_that_chose_the_rate():
    """ptb_warmup judges test perplexity (lower is better) unless a metric is named; tau_sweep train loss;
    bert_ptb test loss. Seed 0 chose each arm's rate, so the verdict seeds are 1-5."""
    claims = lab_module("verdict_claims")
    ((arm, seeds),) = claims.arm_seeds("ptb_warmup", None, "pre")
    assert arm == "pre" and sorted(seeds) == [1, 2, 3, 4, 5]
    assert claims.check("ptb_warmup", None, "pre beats causal") == []
    assert claims.check("ptb_warmup", "valid_loss", "causal beats pre") == [
        "causal loses to pre, not 'beats' (ptb_warmup)"
    ]
    with pytest.raises(ValueError, match="the tau_sweep study has no arm 'tau_2': expected one of tau_0, "):
        claims.check("tau_sweep", None, "tau_2 beats tau_0")
    ((arm, seeds),) = claims.arm_seeds("bert_ptb", None, "post_24")
    assert arm == "post_24" and sorted(seeds) == [1, 2, 3, 4, 5]
    # asked on its own, the BERT card's first question is judged in the card's family of three: undecided
    assert claims.check("bert_ptb", None, "deescalate_24 is inconclusive against post_24") == []


def test_two_arms_that_diverge_on_the_same_paired_seeds_tie_there():
    """inf - inf is nan: before, the signed-rank test then returned p = 0 and named a loser of two identical
    arms. Seeds that both diverged tie; the rest decide (here nothing: inconclusive)."""
    arm = [1.0, 1.1, np.inf, 0.9, np.inf]
    assert verdicts.compare(arm, list(arm), paired=True) == verdicts.INCONCLUSIVE
    assert verdicts.compare(arm, list(arm), paired=False) == verdicts.INCONCLUSIVE


def test_a_diverged_seed_scored_at_the_class_frequency_loss_lets_the_others_decide():
    """Five paired seeds, B (an arm near chance, as a deep post-norm arm is) diverged on its third, A clearly
    lower on the other four: the rank test alone can never reach 5% with five pairs (its smallest p is
    2/32), while the seed scored as a model that predicts the class frequencies (ln 10 nats) leaves a
    t-test the others make clear."""
    a = [0.50, 0.52, 0.51, 0.49, 0.50]
    b = [2.20, 2.25, np.inf, 2.18, 2.22]
    assert verdicts.compare(a, b, paired=True) == verdicts.INCONCLUSIVE
    diverged = verdicts.class_frequency_value("train_loss", 10)
    assert diverged == pytest.approx(np.log(10))
    comparison = verdicts.measure(a, b, paired=True, diverged=diverged)
    assert verdicts.decide([comparison]) == [verdicts.BEATS]
    assert verdicts.class_frequency_value("test_accuracy", 10) == 0.1


def test_a_difference_exactly_at_the_minimum_effect_counts_as_one():
    """The rule's boundary: |d| >= m is big enough to beat; just below it, with no spread, is equivalent."""
    b = [1.0] * 5
    assert verdicts.compare([1.25] * 5, b, lower_is_better=False, min_effect=0.25) == verdicts.BEATS
    assert verdicts.compare([1.2499] * 5, b, lower_is_better=False, min_effect=0.25) == verdicts.EQUIVALENT


def test_the_t_distribution_on_both_sides_of_its_switch_and_at_its_ends():
    """Small |t| takes the incomplete beta's other side (x above (a + 1) / (a + b + 2)); SciPy's values."""
    assert abs(verdicts.t_sf(0.5, 3) - 0.325723982424) < 1e-10
    assert abs(verdicts.t_sf(-0.5, 3) - (1 - 0.325723982424)) < 1e-10
    assert verdicts.t_sf(0.0, 4) == 0.5 and verdicts.t_sf(np.inf, 4) == 0.0
    assert abs(verdicts.t_quantile(0.8, 4) - 0.940964577235) < 1e-9


def test_every_field_of_a_comparison_and_the_gap_its_seeds_would_see():
    a, b = [0.10, 0.12, 0.11, 0.13, 0.09], [0.15, 0.16, 0.14, 0.18, 0.15]
    welch = verdicts.measure(a, b)
    assert abs(welch.stderr - 0.009797958971) < 1e-11 and welch.min_effect == 0.03 and welch.seeds == (5, 5)
    paired = verdicts.measure(a, b, paired=True)
    visible = (2.776445105198 + 0.940964577235) * paired.stderr  # (t_{0.975} + t_{0.8}) at 4 degrees of freedom
    assert abs(paired.smallest_visible_effect() - visible) < 1e-9
    ranked = verdicts.measure([0.1, 0.2, 0.3, 0.4, 0.5], [np.nan] * 5, metric="test_accuracy", lower_is_better=False)
    assert ranked.df is None and np.isnan(ranked.stderr) and ranked.p_equivalence == 1.0
    assert ranked.min_effect == 0.01 and ranked.seeds == (5, 5) and ranked.smallest_visible_effect() == np.inf
    with pytest.raises(ValueError, match="paired seeds need as many seeds per arm, got 3 and 2"):
        verdicts.measure([0.1, 0.2, 0.3], [0.1, 0.2], paired=True)


def test_seeds_without_spread_decide_by_the_size_of_their_difference():
    same = verdicts.measure([1.0] * 5, [1.0] * 5)
    assert (same.estimate, same.stderr, same.df, same.p_difference, same.p_equivalence) == (0.0, 0.0, 8.0, 1.0, 0.0)
    at_effect = verdicts.measure([1.25] * 5, [1.0] * 5, lower_is_better=False, min_effect=0.25)
    assert at_effect.p_difference == 0.0 and at_effect.p_equivalence == 1.0  # |d| = m: not inside the margin


def test_a_p_value_exactly_at_alpha_decides_and_alpha_reaches_every_entry_point():
    at_alpha = verdicts.Comparison(0.1, 0.02, 4.0, 0.05, 1.0, 0.03, (5, 5))
    assert verdicts.decide([at_alpha]) == [verdicts.BEATS]
    a, b = [0.10, 0.12, 0.11, 0.13, 0.09], [0.15, 0.16, 0.14, 0.18, 0.15]
    assert verdicts.compare(a, b, paired=True, alpha=1e-4) == verdicts.INCONCLUSIVE  # p = 8.4e-4
    assert verdicts.stated([verdicts.measure(a, b, paired=True)], alpha=1e-4) == [verdicts.INCONCLUSIVE]


def test_the_metric_sets_the_minimum_effect_and_a_diverged_accuracy_is_the_worst():
    """Two points of accuracy pass the accuracy's one-point minimum effect, not the loss's 0.03; an
    accuracy that diverged (nan) counts as the worst, not the best."""
    high, low = [0.90, 0.91, 0.92, 0.93, 0.94], [0.88, 0.89, 0.90, 0.91, 0.92]
    assert verdicts.compare(high, low, False, metric="test_accuracy", paired=True) == verdicts.BEATS
    assert verdicts.compare(high, low, False, paired=True) != verdicts.BEATS
    assert verdicts.measure(low, high).min_effect == 0.03  # a loss unless named
    assert verdicts.compare([np.nan] * 5, high, False, metric="test_accuracy") == verdicts.LOSES
    with pytest.raises(ValueError, match=r"metric 'bleu' has no minimum effect: expected a name containing one of "
                       r"\['accuracy', 'loss', 'perplexity'\]"):  # fmt: skip
        verdicts.min_effect_of("bleu")
    with pytest.raises(ValueError, match="metric 'perplexity': expected a loss or an accuracy"):
        verdicts.class_frequency_value("perplexity", 10)


def test_seeds_by_name_pair_where_they_match_and_carry_the_diverged_value():
    lower = verdicts.measure_seeds({1: 0.10, 2: 0.12, 3: 0.11}, {1: 0.20, 2: 0.21, 3: 0.22})
    assert lower.estimate > 0 and lower.df == 2.0 and lower.min_effect == 0.03  # paired; lower loss favours A
    unpaired = verdicts.measure_seeds({1: 0.10, 2: 0.12, 3: 0.11}, {4: 0.20, 5: 0.21, 6: 0.22})
    assert unpaired.df != 2.0
    scored = verdicts.measure_seeds({1: 0.5, 2: 0.52}, {1: np.inf, 2: 2.2}, diverged=np.log(10))
    assert scored.df == 1.0 and abs(scored.estimate - (np.log(10) + 2.2 - 1.02) / 2) < 1e-12


def test_the_rank_tests_with_ties_against_a_hand_count():
    """Mann-Whitney: pooled [3, 3, 5 | 1, 3, 2] ranks [4, 4, 6 | 1, 4, 2], A's sum 14 against 10.5 by
    chance, 6 of the 20 relabellings as far (p = 0.3). Signed ranks: differences [0.5, 0, -0.5, tie,
    1, 3], the zeros and the shared divergence dropped, |d| ranked [1.5, 1.5, 3, 4], statistic 7, 6 of
    16 sign flips as far (p = 0.375, SciPy's exact Wilcoxon)."""
    assert verdicts.rank_test(np.array([3.0, 3.0, 5.0]), np.array([1.0, 3.0, 2.0])) == (3.5, 0.3)
    # the largest values tie: ranks [4, 4 | 1, 2, 4], 4 of 10 as far; no ties: only the 2 of 35 extremes
    assert verdicts.rank_test(np.array([3.0, 3.0]), np.array([1.0, 2.0, 3.0])) == (2.0, 0.4)
    assert verdicts.rank_test(np.array([5.0, 6.0, 7.0]), np.array([1.0, 2.0, 3.0, 4.0])) == (6.0, 2 / 35)
    a = np.array([1.0, 2.0, 3.0, -np.inf, 5.0, 4.0])
    b = np.array([0.5, 2.0, 3.5, -np.inf, 4.0, 1.0])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # two diverged seeds are a tie, not a warning
        assert verdicts.rank_test(a, b, paired=True) == (7.0, 0.375)


def test_a_verdict_as_a_table_cell_answers_a_against_b():
    cells = [verdicts.table_cell(v) for v in (verdicts.BEATS, verdicts.LOSES, verdicts.EQUIVALENT)]
    assert cells == ["A beats B", "A loses to B", "A is equivalent to B"]
    assert verdicts.table_cell("inconclusive (3 verdict seeds)") == "inconclusive (3 verdict seeds)"


def test_the_simulated_rates_pair_and_share_alpha_as_the_rule_does():
    """Fifty draws at a 1-sd gap, five seeds (this generator's counts, pinned): pairing (half the variance
    shared, so cancelled) finds the gap more often than Welch's, and one comparison of a family of three,
    held against alpha / 3, less often."""
    rates = [
        verdicts.verdict_rates(5, 1.0, min_effect=0.5, paired=paired, draws=50, seed=3, family=family)
        for paired, family in ((False, 1), (True, 1), (True, 3))
    ]
    assert [r[verdicts.BEATS] for r in rates] == [0.14, 0.38, 0.2]
    assert [r[verdicts.EQUIVALENT] for r in rates] == [0.0, 0.02, 0.02]
    assert all(r[verdicts.LOSES] == 0.0 and abs(sum(r.values()) - 1.0) < 1e-12 for r in rates)


def _scipy_cases():
    """50 random paired / unpaired cases (3-12 seeds, spreads and gaps of several sizes), then the edges."""
    rng = np.random.default_rng(2026)
    cases = []
    for _ in range(50):
        n = int(rng.integers(3, 13))
        scale, gap = rng.choice([0.01, 0.3, 2.0]), rng.choice([0.0, 0.05, 0.5, 3.0])
        cases.append((gap + scale * rng.normal(size=n), scale * rng.normal(size=n), float(rng.choice([0.03, 0.3]))))
    return cases


def test_the_t_tests_and_tost_match_scipy_on_random_cases():
    stats = pytest.importorskip("scipy.stats")
    for a, b, m in _scipy_cases():
        paired = verdicts.measure(a, b, lower_is_better=False, min_effect=m, paired=True)
        diff = a - b
        assert paired.p_difference == pytest.approx(stats.ttest_rel(a, b).pvalue, abs=1e-6)
        tost = max(
            stats.ttest_1samp(diff + m, 0.0, alternative="greater").pvalue,
            stats.ttest_1samp(diff - m, 0.0, alternative="less").pvalue,
        )
        assert paired.p_equivalence == pytest.approx(tost, abs=1e-6)
        welch = verdicts.measure(a, b[:-1], lower_is_better=False, min_effect=m)
        assert welch.p_difference == pytest.approx(stats.ttest_ind(a, b[:-1], equal_var=False).pvalue, abs=1e-6)
        tost = max(
            stats.ttest_ind(a + m, b[:-1], equal_var=False, alternative="greater").pvalue,
            stats.ttest_ind(a - m, b[:-1], equal_var=False, alternative="less").pvalue,
        )
        assert welch.p_equivalence == pytest.approx(tost, abs=1e-6)
        df = len(a) - 1.0
        for q in (0.8, 0.975, 0.995):
            assert verdicts.t_quantile(q, df) == pytest.approx(stats.t.ppf(q, df), abs=1e-6)
        assert verdicts.t_sf(1.7, df) == pytest.approx(stats.t.sf(1.7, df), abs=1e-9)


def test_the_rank_and_sign_flip_tests_match_scipy_exactly():
    stats = pytest.importorskip("scipy.stats")
    for a, b, _ in _scipy_cases():
        a, b = a[:8], b[:8]  # the exact enumerations stay small
        _, p = verdicts.rank_test(a, b, paired=True)
        assert p == pytest.approx(stats.wilcoxon(a, b, method="exact").pvalue, abs=1e-6)
        _, p = verdicts.rank_test(a, b[:-1])
        assert p == pytest.approx(stats.mannwhitneyu(a, b[:-1], method="exact").pvalue, abs=1e-6)
        estimate, p = verdicts.sign_flip_test(a, b, lower_is_better=False)
        reference = stats.permutation_test(
            (a, b), lambda x, y: np.mean(x - y), permutation_type="samples", n_resamples=np.inf
        )
        assert estimate == pytest.approx(np.mean(a - b)) and p == pytest.approx(reference.pvalue, abs=1e-6)


def _signed_rank_sum(x, y):
    """The paired rank statistic with mid-ranks for ties and zero differences dropped, as `rank_test`
    defines it, for scipy's permutation machinery to enumerate."""
    import scipy.stats

    d = x - y
    d = d[d != 0]
    return float(np.sum(np.sign(d) * scipy.stats.rankdata(np.abs(d))))


def _rank_sum(x, y):
    """The unpaired rank statistic: the first arm's sum of mid-ranks in the pooled seeds."""
    import scipy.stats

    return float(np.sum(scipy.stats.rankdata(np.concatenate([x, y]))[: len(x)]))


def test_the_edge_cases_match_scipy_ties_zero_variance_and_a_diverged_seed():
    stats = pytest.importorskip("scipy.stats")
    # ties: scipy's exact Wilcoxon assumes none; the reference is its permutation test of the same statistic
    a, b = np.array([1.0, 2.0, 2.0, 3.0, 5.0, 5.0]), np.array([0.0, 1.0, 1.0, 2.0, 6.0, 5.0])
    _, p = verdicts.rank_test(a, b, paired=True)
    reference = stats.permutation_test((a, b), _signed_rank_sum, permutation_type="samples", n_resamples=np.inf)
    assert p == pytest.approx(reference.pvalue, abs=1e-6)
    x, y = np.array([1.0, 1.0, 2.0, 4.0]), np.array([1.0, 3.0, 3.0, 0.5])
    _, p = verdicts.rank_test(x, y)
    reference = stats.permutation_test((x, y), _rank_sum, permutation_type="independent", n_resamples=np.inf)
    assert p == pytest.approx(reference.pvalue, abs=1e-6)
    # zero variance: a constant nonzero difference is certain (scipy: t = inf, p = 0), and so is its size
    constant = verdicts.measure([1.0, 1.0, 1.0], [0.5, 0.5, 0.5], lower_is_better=False, min_effect=0.03, paired=True)
    assert constant.p_difference == stats.ttest_rel([1.0, 1.0, 1.0], [0.5, 0.5, 0.5]).pvalue == 0.0
    assert constant.p_equivalence == 1.0  # 0.5 apart: not within 0.03
    same = verdicts.measure([1.0, 1.0, 1.0], [1.0, 1.0, 1.0], min_effect=0.03, paired=True)
    assert (same.p_difference, same.p_equivalence) == (1.0, 0.0)
    # one diverged seed of five (a loss of inf, lower is better): the exact rank test, B's diverged seed the worst
    loss_a, loss_b = np.array([0.5, 0.6, 0.4, 0.55, 0.45]), np.array([0.7, 0.65, np.inf, 0.8, 0.5])
    diverged = verdicts.measure(loss_a, loss_b, paired=True)
    finite_b = np.where(np.isfinite(loss_b), loss_b, 1e9)  # any value above every other ranks the same
    assert diverged.df is None
    assert diverged.p_difference == pytest.approx(stats.wilcoxon(loss_a, finite_b, method="exact").pvalue, abs=1e-6)
    assert verdicts.sign_flip_test(loss_a, loss_b)[1] == pytest.approx(diverged.p_difference)


def test_an_arm_with_more_seeds_is_paired_on_the_seeds_both_ran():
    """The depth-80 study's central arms run seeds 1-10, the others 1-5: a question between the two kinds is
    still paired by seed, on seeds 1-5 (Welch over 10 and 5 would drop the pairing and use seeds B never ran)."""
    rng = np.random.default_rng(7)
    a = {seed: float(v) for seed, v in zip(range(1, 11), rng.normal(size=10))}
    b = {seed: a[seed] + 0.5 + 0.01 * float(rng.normal()) for seed in range(1, 6)}
    c = verdicts.measure_seeds(a, b, lower_is_better=True)
    assert c.seeds == (5, 5) and c.df == 4
    assert c.estimate == pytest.approx(np.mean([b[k] - a[k] for k in range(1, 6)]))
    disjoint = verdicts.measure_seeds({1: 0.1, 2: 0.2, 3: 0.3}, {4: 0.4, 5: 0.5, 6: 0.7})
    assert disjoint.seeds == (3, 3) and disjoint.df != 2.0  # no seed in common: Welch
