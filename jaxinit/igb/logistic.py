"""Logistic regression of a binary outcome ("trains") with Firth's penalty, its likelihood-ratio tests, profile
intervals and a simulated power (pure numpy; scipy for the chi-square quantiles).

Model: P(y = 1 | x) = sigmoid(x . beta). Firth (1993): maximise the penalised log-likelihood

    l*(beta) = sum_i [y_i log p_i + (1 - y_i) log(1 - p_i)] + 1/2 log det I(beta),   I = X^T W X,  W = p (1 - p),

whose estimates stay finite under separation (a design in which every seed beyond some L / xi_c fails and every
seed before it trains gives infinite ordinary estimates). Tests and intervals use the penalised likelihood
throughout (Heinze & Schemper 2002): the likelihood-ratio statistic 2 (l*_full - l*_reduced) against chi2(df),
the reduced model being the full one under the constraint (its penalty from the full information);
a profile interval is the set of values v with 2 (l*_max - max_{constraint = v} l*) <= chi2_{1, level}. The
maximum under a linear constraint is a Newton ascent on the constraint's subspace beta = beta0 + B t, with the
modified score U*_j = sum_i (y_i - p_i + h_i (1/2 - p_i)) x_ij (h: the hat values of W^1/2 X) and the
information B^T I B, halving steps that do not raise l*.
"""
from __future__ import annotations

from typing import NamedTuple

import numpy as np

LEVEL = 0.95


class Fit(NamedTuple):
    beta: np.ndarray
    loglik: float          # penalised
    converged: bool


def _parts(X, beta, offset=0.0):
    eta = X @ beta + offset
    p = 1.0 / (1.0 + np.exp(-np.clip(eta, -30, 30)))
    w = np.maximum(p * (1 - p), 1e-12)
    info = X.T @ (X * w[:, None])
    return eta, p, w, info


def penalised_loglik(X, y, beta) -> float:
    """l*(beta) (module docstring)."""
    eta, p, w, info = _parts(X, beta)
    ll = np.sum(y * eta - np.logaddexp(0.0, eta))
    sign, logdet = np.linalg.slogdet(info)
    return float(ll + 0.5 * logdet) if sign > 0 else -np.inf


def _score(X, y, beta):
    _, p, w, info = _parts(X, beta)
    inv = np.linalg.pinv(info)
    h = w * np.einsum("ij,jk,ik->i", X, inv, X)
    return X.T @ (y - p + h * (0.5 - p)), info


def fit_subspace(X, y, beta0, B, t0=None, iters: int = 100, tol: float = 1e-9) -> Fit:
    """max over t of l*(beta0 + B t) (Newton with step halving)."""
    X, y = np.asarray(X, float), np.asarray(y, float)
    beta0, B = np.asarray(beta0, float), np.asarray(B, float).reshape(len(beta0), -1)
    t = np.zeros(B.shape[1]) if t0 is None else np.asarray(t0, float)
    ll = penalised_loglik(X, y, beta0 + B @ t)
    for _ in range(iters):
        if B.shape[1] == 0:
            return Fit(beta0, ll, True)
        u, info = _score(X, y, beta0 + B @ t)
        step = np.linalg.lstsq(B.T @ info @ B, B.T @ u, rcond=None)[0]
        for _ in range(40):
            new = penalised_loglik(X, y, beta0 + B @ (t + step))
            if new >= ll - 1e-12:
                break
            step = step / 2
        t, old, ll = t + step, ll, max(new, ll)
        if abs(ll - old) < tol and np.max(np.abs(step)) < 1e-7:
            return Fit(beta0 + B @ t, ll, True)
    return Fit(beta0 + B @ t, ll, False)


def fit(X, y) -> Fit:
    """Unconstrained Firth fit."""
    k = np.shape(X)[1]
    return fit_subspace(X, y, np.zeros(k), np.eye(k))


def lrt(X, y, drop) -> dict:
    """Penalised likelihood-ratio test that the coefficients ``drop`` (column indices of ``X``) are 0: the
    reduced model is the full one constrained to beta_drop = 0, its penalty computed with the full information
    (Heinze & Schemper 2002; the penalty of a model with fewer columns is not comparable). Statistic, df, p."""
    from scipy import stats
    X = np.asarray(X, float)
    drop = np.atleast_1d(np.asarray(drop, int))
    full = fit(X, y)
    keep = np.delete(np.eye(X.shape[1]), drop, axis=1)
    red = fit_subspace(X, y, np.zeros(X.shape[1]), keep)
    stat = max(0.0, 2 * (full.loglik - red.loglik))
    return {"stat": float(stat), "df": int(drop.size), "p": float(stats.chi2.sf(stat, drop.size))}


def _crit(level: float) -> float:
    from scipy import stats
    return float(stats.chi2.ppf(level, 1))


def _null_basis(z):
    """Orthonormal basis of {beta : beta . z = 0}."""
    z = np.asarray(z, float)[None]
    _, _, vt = np.linalg.svd(z)
    return vt[1:].T


def _root(f, a, b, iters: int = 60):
    """A root of the increasing-or-decreasing f on [a, b] with f(a), f(b) of opposite signs (bisection)."""
    fa = f(a)
    for _ in range(iters):
        m = 0.5 * (a + b)
        fm = f(m)
        if (fm > 0) == (fa > 0):
            a, fa = m, fm
        else:
            b = m
    return 0.5 * (a + b)


def _profile_interval(dev, centre: float, scale: float, level: float, limit: float) -> list[float | None]:
    """Where the profile deviance ``dev(v)`` (0 at ``centre``) crosses chi2_{1, level}, searching out to
    ``limit`` x ``scale`` on each side; None on a side where it never does."""
    crit = _crit(level)
    out = []
    for sign in (-1, 1):
        step, lo = scale, centre
        hit = None
        while step <= limit * scale:
            v = centre + sign * step
            if dev(v) > crit:
                hit = _root(lambda u: dev(u) - crit, lo, v)
                break
            lo, step = v, step * 2
        out.append(hit)
    return out


def coef_interval(X, y, j: int, level: float = LEVEL, limit: float = 1e3) -> list[float | None]:
    """Profile-likelihood interval of coefficient ``j``."""
    X = np.asarray(X, float)
    best = fit(X, y)
    k = X.shape[1]
    free = np.delete(np.eye(k), j, axis=1)

    def dev(v):
        beta0 = np.zeros(k)
        beta0[j] = v
        return 2 * (best.loglik - fit_subspace(X, y, beta0, free).loglik)
    scale = max(abs(best.beta[j]), 0.1) * 0.25
    return _profile_interval(dev, float(best.beta[j]), scale, level, limit)


def threshold(X, y, j: int, at: np.ndarray, level: float = LEVEL, limit: float = 1e3) -> dict:
    """The value v of covariate ``j`` at which P(y = 1) = 1/2 when the other covariates take the values ``at``
    (a full row of X whose entry j is ignored): v = -(beta . at without j) / beta_j, with its profile interval
    (the constraint beta . z(v) = 0, z(v) = ``at`` with entry j set to v)."""
    X, at = np.asarray(X, float), np.asarray(at, float)
    best = fit(X, y)
    rest = best.beta @ at - best.beta[j] * at[j]
    v_hat = -rest / best.beta[j] if best.beta[j] != 0 else np.nan

    def z(v):
        out = at.copy()
        out[j] = v
        return out

    def dev(v):
        return 2 * (best.loglik - fit_subspace(X, y, np.zeros(X.shape[1]), _null_basis(z(v))).loglik)
    scale = max(abs(v_hat), 1.0) * 0.05 if np.isfinite(v_hat) else 1.0
    lo, hi = _profile_interval(dev, float(v_hat), scale, level, limit) if np.isfinite(v_hat) else (None, None)
    return {"value": float(v_hat), "ci95": [lo, hi]}


def power(X, drop, beta_true, n_sims: int = 200, alpha: float = 0.05, seed: int = 0) -> float:
    """Share of ``n_sims`` outcomes simulated from sigmoid(X . beta_true) in which `lrt` rejects beta_drop = 0
    at ``alpha``."""
    rng = np.random.default_rng(seed)
    p = 1 / (1 + np.exp(-np.asarray(X, float) @ np.asarray(beta_true, float)))
    hits = 0
    for _ in range(n_sims):
        y = (rng.random(p.size) < p).astype(float)
        hits += lrt(X, y, drop)["p"] < alpha
    return hits / n_sims
