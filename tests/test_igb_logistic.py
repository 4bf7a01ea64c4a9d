"""Firth logistic regression, its likelihood-ratio test, profile intervals and power (`jaxinit.igb.logistic`):
planted effects are found and recovered, null ones are not, separation stays finite."""
import numpy as np
import pytest

from jaxinit.igb import logistic


def _design(rng, n, depth_coef=0.0, r50=6.0, slope=-1.0):
    r = rng.uniform(0, 10, n)
    logd = rng.choice(np.log2([16, 32, 64, 128]), n)
    X = np.column_stack([np.ones(n), r, logd - logd.mean()])
    beta = np.array([-slope * r50, slope, depth_coef])
    y = (rng.random(n) < 1 / (1 + np.exp(-X @ beta))).astype(float)
    return X, y, beta


def test_recovers_planted_coefficients_and_their_interval_covers_them():
    X, y, beta = _design(np.random.default_rng(0), 4000, depth_coef=-0.7)
    f = logistic.fit(X, y)
    assert f.converged
    np.testing.assert_allclose(f.beta, beta, atol=0.3)   # ~2 standard errors at n = 4000
    lo, hi = logistic.coef_interval(X, y, 2)
    assert lo < beta[2] < hi and hi < 0         # the planted depth effect is found, with its sign
    th = logistic.threshold(X, y, 1, at=np.array([1.0, 0.0, 0.0]))
    assert th["ci95"][0] < 6.0 < th["ci95"][1] and th["ci95"][1] - th["ci95"][0] < 1.0


def test_lrt_finds_a_planted_depth_effect_and_not_a_null_one():
    rng = np.random.default_rng(1)
    X, y, _ = _design(rng, 300, depth_coef=-1.5)
    assert logistic.lrt(X, y, [2])["p"] < 1e-3
    ps = [logistic.lrt(*_design(rng, 300)[:2], [2])["p"] for _ in range(60)]
    assert 0.0 <= np.mean(np.array(ps) < 0.05) <= 0.15       # level ~ 0.05 under the null
    lo, hi = logistic.coef_interval(*_design(rng, 300)[:2], 2)
    assert lo < 0 < hi or abs(lo) < 0.3 or abs(hi) < 0.3     # a null effect's interval reaches zero (or nearly)


def test_separation_stays_finite_and_the_threshold_lies_in_the_gap():
    r = np.repeat([0.0, 2, 4, 6, 8, 10], 8)
    y = (r < 5).astype(float)
    X = np.column_stack([np.ones_like(r), r])
    f = logistic.fit(X, y)
    assert np.all(np.isfinite(f.beta)) and f.beta[1] < 0
    th = logistic.threshold(X, y, 1, at=np.array([1.0, 0.0]))
    assert 4 < th["value"] < 6
    lo, hi = th["ci95"]
    assert lo is not None and hi is not None and lo < 5 < hi and 2 < lo and hi < 8


def test_power_is_high_for_a_large_effect_and_near_alpha_for_none():
    rng = np.random.default_rng(2)
    X, _, beta = _design(rng, 200, depth_coef=-1.5)
    assert logistic.power(X, [2], beta, n_sims=40, seed=3) >= 0.85
    assert logistic.power(X, [2], beta * np.array([1, 1, 0]), n_sims=60, seed=4) <= 0.15
