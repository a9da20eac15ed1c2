"""The verdict rule (zoo/README.md, keras_tse.experiments.verdicts) and the claims the cards make with it."""

import os

import numpy as np
import pytest

from keras_tse.experiments import verdicts
from tests.helpers import lab_module

pytestmark = pytest.mark.one_backend  # the group rule: tests/conftest.py

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# README.md's sentence before the rule, with the claim it made: "DeepNorm and LayerScale beat it at every depth".
OLD_README = (
    "but DeepNorm and LayerScale beat it at every depth"
    "<!-- verdict depth_study: deepnorm, layerscale beat deescalate(*) at depth 12, 24, 48 -->"
)


def test_every_seed_beating_every_seed_is_a_win_whatever_the_interval():
    assert verdicts.compare([0.1, 0.2], [0.21, 5.0]) == verdicts.BEATS
    assert verdicts.compare([0.21, 5.0], [0.1, 0.2]) == verdicts.LOSES
    assert verdicts.compare([0.9, 0.8], [0.7, 0.1], lower_is_better=False) == verdicts.BEATS


def test_overlapping_seeds_win_only_when_the_bootstrap_interval_excludes_zero():
    # the depth study's DeepNorm and de-escalation (tau 0.5) seeds at depth 24 overlap nowhere;
    # ReZero's at depth 24 overlap tau 1's, and the interval of their mean difference holds zero
    rezero, tau_1 = [0.0235, 0.0768, 0.1195], [0.1023, 0.1061, 0.1270]
    low, high = verdicts.difference_interval(rezero, tau_1)
    assert low < 0 < high
    assert verdicts.compare(rezero, tau_1) == verdicts.TIED
    # overlapping seeds whose means stand far apart: one outlier does not make a tie
    a, b = [0.10, 0.11, 0.12, 0.13, 0.30], [0.25, 0.26, 0.27, 0.28, 0.29]
    assert a[-1] > min(b) and verdicts.difference_interval(a, b)[1] < 0
    assert verdicts.compare(a, b) == verdicts.BEATS


def test_the_interval_is_a_fixed_draw_and_a_diverged_seed_is_the_worst():
    assert verdicts.difference_interval([1.0, 2.0, 3.0], [0.0, 0.0]) == verdicts.difference_interval(
        [1.0, 2.0, 3.0], [0.0, 0.0]
    )
    low, high = verdicts.difference_interval([1.0, 2.0, 3.0], [0.0, 0.0])
    assert 1.0 <= low < 2.0 < high <= 3.0
    assert verdicts.compare([0.5, float("nan")], [0.4, 0.6]) == verdicts.TIED  # no interval with an inf in it
    assert verdicts.compare([0.3, 0.4], [0.5, float("nan")]) == verdicts.BEATS
    assert verdicts.compare([0.6, 0.7], [0.5, np.inf], lower_is_better=False) == verdicts.BEATS


def test_one_seed_is_not_a_verdict():
    with pytest.raises(ValueError, match="at least 2 seeds per arm, got 1 and 3"):
        verdicts.compare([0.1], [0.2, 0.3, 0.4])


def test_the_old_readme_sentence_fails_and_every_published_claim_holds():
    claims = lab_module("verdict_claims")
    failures = claims.check_text(OLD_README)
    assert failures and all("at depth 12" in f for f in failures), failures
    assert "layerscale tied within seeds deescalate(1.0) at depth 12, not 'beats' (depth_study)" in failures
    texts = {}
    for document in claims.DOCUMENTS:
        path = os.path.join(ROOT, document)
        if os.path.exists(path):
            with open(path) as handle:
                texts[document] = handle.read()
    assert len(claims.claims(texts["README.md"])) >= 3  # the depth study's sentence carries its claims
    for document, text in texts.items():
        assert claims.check_text(text) == [], document


def test_a_claim_the_checker_cannot_read_is_one_line():
    claims = lab_module("verdict_claims")
    assert claims.check("depth_study", None, "deepnorm wins over post") == [
        "cannot read 'deepnorm wins over post': expected 'ARMS beats|ties|loses to ARMS [at KEY VALUES]'"
    ]
    assert claims.check("nowhere", None, "a beats b") == [
        "unknown source 'nowhere': expected one of ['depth80', 'depth_study', 'gpu_fig6', 'gpu_fig6_stopped', "
        "'ptb_warmup', 'tau_sweep']"
    ]


def test_with_two_seeds_each_only_every_seed_against_every_seed_decides():
    """The cards' two-seed studies say so: a bootstrap of two seeds puts a quarter of its means on each
    seed, so where the ranges overlap the interval always holds zero."""
    rng = np.random.default_rng(0)
    for _ in range(200):
        a, b = rng.normal(size=2), rng.normal(size=2)
        overlap = a.min() <= b.max() and b.min() <= a.max()
        assert (verdicts.compare(a, b) == verdicts.TIED) == overlap, (a, b)


def test_a_claim_on_the_gpu_runs_is_read_from_their_result_file_and_a_wrong_one_fails():
    claims = lab_module("verdict_claims")
    assert claims.check("gpu_fig6_stopped", "test_accuracy", "deescalate beats post") == []
    failures = claims.check("gpu_fig6_stopped", "train_loss", "post ties pre")
    assert failures == ["post loses to pre, not 'tied within seeds' (gpu_fig6_stopped)"]
    with pytest.raises(ValueError, match="zoo/gpu/fig6_stopped.json has no arm 'deepnorm'"):
        claims.check("gpu_fig6_stopped", "train_loss", "deepnorm beats post")


def test_a_claim_on_a_cell_study_reads_each_arm_at_its_best_rate_and_a_wrong_one_fails():
    """ptb_warmup judges test perplexity (lower is better) unless a metric is named; tau_sweep train loss."""
    claims = lab_module("verdict_claims")
    assert claims.check("ptb_warmup", None, "pre beats causal") == []
    assert claims.check("ptb_warmup", None, "causal beats pre") == ["causal loses to pre, not 'beats' (ptb_warmup)"]
    assert claims.check("ptb_warmup", "valid_loss", "pre_32 beats causal_32") == []
    assert claims.check("tau_sweep", "test_accuracy", "tau_0 ties tau_1") == [
        "tau_0 loses to tau_1, not 'tied within seeds' (tau_sweep)"
    ]
    with pytest.raises(ValueError, match="the tau_sweep study has no arm 'tau_2': expected one of tau_0, "):
        claims.check("tau_sweep", None, "tau_2 beats tau_0")
