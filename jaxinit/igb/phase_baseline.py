"""The pre-jax way to compute one tanh phase-diagram point, kept as the timing baseline and a cross-check.

scipy quad for the 1-D Gaussian integrals, a numpy n_gh x n_gh Gauss-Hermite grid for the 2-D ones,
brentq for the fixed points: the same quantities as `theory.phase.phase_diagram`, point by point.
"""
from __future__ import annotations

import math

import numpy as np


def _gauss(z):
    return np.exp(-0.5 * z * z) / math.sqrt(2.0 * math.pi)


def _quad_moment(f, q):
    from scipy import integrate
    return integrate.quad(lambda z: f(math.sqrt(q) * z) * _gauss(z), -np.inf, np.inf)[0]


def _tanh_c_map(sigma_w2, sigma_b2, n_gh):
    x, w = np.polynomial.hermite_e.hermegauss(n_gh)
    w = w / math.sqrt(2.0 * math.pi)

    def c_map(c, q):
        s = math.sqrt(max((1.0 - c) * (1.0 + c), 0.0))
        t1 = np.tanh(math.sqrt(q) * x)
        t2 = np.tanh(math.sqrt(q) * (c * x[:, None] + s * x[None, :]))
        k, k1 = w @ (t1 * (t2 @ w)), w @ (t1 * t1)
        return (sigma_w2 * k + sigma_b2) / (sigma_w2 * k1 + sigma_b2)
    return c_map


def baseline_point(sigma_w2: float, sigma_b2: float, depth: int, n_gh: int = 60) -> dict:
    """q*, c*, chi_1 and c at layer `depth` (q0 = 1, c0 = 0) of one tanh point, by scipy / numpy."""
    from scipy import optimize
    v = lambda q: _quad_moment(lambda u: math.tanh(u) ** 2, q)
    c_map = _tanh_c_map(sigma_w2, sigma_b2, n_gh)
    g = lambda q: sigma_w2 * v(q) + sigma_b2 - q
    lo = max(sigma_b2, 1e-12)
    q_star = optimize.brentq(g, lo, sigma_b2 + sigma_w2) if g(lo) > 0 else lo
    chi1 = sigma_w2 * _quad_moment(lambda u: (1.0 - math.tanh(u) ** 2) ** 2, q_star)
    c_star = 1.0
    if chi1 > 1.0:
        h = lambda c: c_map(c, q_star) - c
        c_star = optimize.brentq(h, 0.0, 1.0 - 1e-9) if h(0.0) > 0 else 0.0
    q, c = sigma_w2 + sigma_b2, sigma_b2 / (sigma_w2 + sigma_b2)
    for _ in range(depth - 1):
        q, c = sigma_w2 * v(q) + sigma_b2, c_map(c, q)
    return {"q_star": q_star, "c_star": c_star, "chi1": chi1, "c_depth": c}
