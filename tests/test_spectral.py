"""keras_tse.analysis.spectral against hand-checked cases and the paper's identities (Sec. 2.2, Corollary 7)."""

import numpy as np
import pytest
from keras import ops

from keras_tse.analysis import spectral
from keras_tse.analysis.similarity import escalation_rate, token_similarity
from tests import reference

pytestmark = pytest.mark.every_backend  # the group rule: tests/conftest.py


def _n(x):
    return ops.convert_to_numpy(x)


def _row_stochastic(n, seed, temperature=1.0):
    logits = np.random.default_rng(seed).standard_normal((n, n)) / temperature
    return reference.softmax(logits).astype("float32")


def _symmetric_doubly_stochastic(n, seed, permutations=5):
    rng = np.random.default_rng(seed)
    q = sum(np.eye(n)[rng.permutation(n)] for _ in range(permutations)) / permutations
    return ((q + q.T) / 2).astype("float32")


def _x(n=6, d=4, seed=0, common=1.0):
    rng = np.random.default_rng(seed)
    return (rng.standard_normal((n, d)) + common * rng.standard_normal(d)).astype("float32")


def test_hand_checked_two_token_case():
    # X = [[1, 0], [0, 1]]: mean (0.5, 0.5), ||Pi_1 X||^2 = 2 * 0.5 = 1, ||Pi_2 X||^2 = 1.
    x = np.eye(2, dtype="float32")
    p = np.array([[1.0, 0.0], [1.0, 0.0]], "float32")  # every token attends to token 0
    # P X = [[1, 0], [1, 0]]: mean (1, 0): ||Pi_1 P X||^2 = 2, ||Pi_2 P X||^2 = 0
    mu1, mu2 = spectral.mu(x, p)
    assert _n(mu1) == pytest.approx(np.sqrt(2.0)) and _n(mu2) == pytest.approx(0.0, abs=1e-7)
    # e^T P = [2, 0]; Pi_2 X = [[.5, -.5], [-.5, .5]]; e^T P Pi_2 X = [1, -1]; e^T X = [1, 1]
    assert _n(spectral.omega(x, p)) == pytest.approx(1.0)
    # Pi_2 P = [[0, 0], [0, 0]]: delta = 0; eigenvalues of P: 1 and 0
    assert _n(spectral.delta(p)) == pytest.approx(0.0, abs=1e-7)
    assert _n(spectral.lambda2(p)) == pytest.approx(0.0, abs=1e-6)
    y = np.array([[2.0, 0.0], [0.0, 0.0]], "float32")  # mean (1, 0): common 2, diverse 2
    xi1, xi2 = spectral.xi(x, y)
    assert (_n(xi1), _n(xi2)) == pytest.approx((2.0, 2.0))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_corollary_7_doubly_stochastic_and_symmetric(seed):
    x, p = _x(n=8, seed=seed), _symmetric_doubly_stochastic(8, seed)
    assert _n(spectral.mu(x, p)[0]) == pytest.approx(1.0, abs=1e-5)  # mu_1 = 1
    assert _n(spectral.omega(x, p)) == pytest.approx(0.0, abs=1e-5)  # omega = 0
    eigenvalues = np.sort(np.abs(np.linalg.eigvalsh(p.astype("float64"))))
    assert _n(spectral.delta(p)) == pytest.approx(eigenvalues[-2], abs=1e-5)  # delta = |lambda_2|
    assert _n(spectral.lambda2(p)) == pytest.approx(eigenvalues[-2], abs=1e-5)
    estimate_1, estimate_2 = spectral.estimates_of_xi_ratio(x, p)
    assert _n(estimate_1) == pytest.approx(_n(estimate_2), abs=1e-5)  # (16) reduces to (17)
    assert _n(spectral.estimate_16(x, p)) == pytest.approx(_n(spectral.estimate_17(x, p)), abs=1e-5)


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_lemma_4_bounds_hold_for_softmax_attention(seed):
    x, p = _x(n=10, d=6, seed=seed), _row_stochastic(10, seed)
    mu1, mu2 = (_n(m) for m in spectral.mu(x, p))
    assert mu1**2 >= (1 - _n(spectral.omega(x, p))) ** 2 - 1e-5  # eq. (11)
    assert mu2**2 <= _n(spectral.delta(p)) ** 2 + 1e-5
    assert _n(spectral.lambda2(p)) == pytest.approx(
        np.sort(np.abs(np.linalg.eigvals(p.astype("float64"))))[-2], abs=1e-4
    )


@pytest.mark.parametrize("seed", [0, 1])
def test_proposition_3_with_the_sa_residual_step(seed):
    x, p = _x(seed=seed), _row_stochastic(6, seed)
    w = np.random.default_rng(seed + 10).standard_normal((4, 4)).astype("float32") / 2
    y = spectral.sa_residual(x, p, w)
    np.testing.assert_allclose(_n(y), x + p @ x @ w, rtol=1e-5, atol=1e-5)
    xi1, xi2 = spectral.xi(x, y)
    expected = 1 + (_n(xi1) / _n(xi2) - 1) * _n(token_similarity(x))
    assert _n(spectral.empirical_escalation_rate(x, p, w)) == pytest.approx(expected, rel=1e-4)
    assert _n(escalation_rate(x, y)) == pytest.approx(expected, rel=1e-4)


def test_lemma_4_expectations_by_monte_carlo():
    # E[xi_i] = 1 + alpha^2 d sigma^2 mu_i^2 (eq. 9) for W with i.i.d. N(0, sigma^2) entries.
    n, d, sigma, alpha = 8, 5, 0.3, 1.0
    x, p = _x(n=n, d=d, seed=4), _row_stochastic(n, 4, temperature=0.5)
    rng = np.random.default_rng(5)
    ws = (sigma * rng.standard_normal((4000, d, d))).astype("float32")
    ys = x[None] + alpha * np.einsum("nm,md,kde->kne", p, x, ws)
    xi1, xi2 = spectral.xi(np.broadcast_to(x, ys.shape), ys)
    mu1, mu2 = (_n(m) for m in spectral.mu(x, p))
    assert np.mean(_n(xi1)) == pytest.approx(1 + alpha**2 * d * sigma**2 * mu1**2, rel=0.03)
    assert np.mean(_n(xi2)) == pytest.approx(1 + alpha**2 * d * sigma**2 * mu2**2, rel=0.03)


def test_multi_head_averages_and_step():
    x = _x(n=6, d=4, seed=6)
    heads = np.stack([_row_stochastic(6, 7), _row_stochastic(6, 8)])
    mu_bar = spectral.mu(x, heads)
    per_head = [spectral.mu(x, heads[k]) for k in range(2)]
    for i in range(2):  # Proposition 9: mu_bar_i^2 is the mean of the heads' mu_i^2
        assert _n(mu_bar[i]) ** 2 == pytest.approx(np.mean([_n(m[i]) ** 2 for m in per_head]), rel=1e-5)
    w = np.random.default_rng(9).standard_normal((2, 4, 2)).astype("float32")
    expected = x + np.concatenate([heads[k] @ x @ w[k] for k in range(2)], axis=1)
    np.testing.assert_allclose(_n(spectral.sa_residual(x, heads, w)), expected, rtol=1e-5, atol=1e-5)


def test_attention_entropy_of_uniform_and_one_hot_rows():
    uniform = np.full((2, 3, 5, 5), 0.2, "float32")
    np.testing.assert_allclose(_n(spectral.attention_entropy(uniform)), np.log(5.0), rtol=1e-6)
    one_hot = np.broadcast_to(np.eye(5, dtype="float32"), (2, 3, 5, 5))
    np.testing.assert_allclose(_n(spectral.attention_entropy(one_hot)), 0.0, atol=1e-6)
    half = np.array([[0.5, 0.5], [1.0, 0.0]], "float32")  # rows: log 2 and 0
    assert _n(spectral.attention_entropy(half)) == pytest.approx(np.log(2.0) / 2, rel=1e-6)


def test_qk_spectrum_hand_checked():
    d = 4
    wq = np.concatenate([np.eye(d), 2 * np.eye(d)], axis=1).astype("float32")  # head 0: I, head 1: 2I
    wk = np.concatenate([np.eye(d), np.diag([1.0, -1.0, 1.0, -1.0])], axis=1).astype("float32")
    stats = {k: _n(v) for k, v in spectral.qk_spectrum(wq, wk, num_heads=2).items()}
    # head 0: W = I -> eigenvalues all 1; head 1: W = diag(2, -2, 2, -2) -> mean 0, second moment 4
    np.testing.assert_allclose(stats["mean"], [1.0, 0.0], atol=1e-6)
    np.testing.assert_allclose(stats["second_moment"], [1.0, 4.0], atol=1e-6)
    np.testing.assert_allclose(stats["variance"], [0.0, 4.0], atol=1e-6)
    np.testing.assert_allclose(stats["xi"], [d / np.sqrt(d), 0.0], atol=1e-6)


def test_qk_spectrum_matches_eigenvalues_of_a_random_head():
    rng = np.random.default_rng(11)
    wq, wk = rng.standard_normal((6, 3)).astype("float32"), rng.standard_normal((6, 3)).astype("float32")
    eigenvalues = np.linalg.eigvals((wq @ wk.T).astype("float64"))
    stats = {k: _n(v) for k, v in spectral.qk_spectrum(wq, wk, num_heads=1).items()}
    assert stats["mean"][0] == pytest.approx(eigenvalues.real.mean(), abs=1e-4)
    assert stats["second_moment"][0] == pytest.approx((eigenvalues**2).real.mean(), abs=1e-3)
