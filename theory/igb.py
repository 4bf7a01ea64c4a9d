"""Initial Guessing Bias (IGB): gamma <-> c, estimators from pre-activations, f_max distributions.

THEORY.md section 5 (Francazi, Lucchi, Baity-Jesi 2024, arXiv 2306.00809; Bassi et al. 2026):

- For one network, node `i` has a data-mean `mu_i = E_x[h_i(x)]`; `sigma_mu2 = Var_i(mu_i)`,
  `sigma_y2 = mean_i Var_x(h_i(x))`, `gamma = sigma_mu2 / sigma_y2`.
- Infinite width then infinite data: `q_aa = sigma_mu2 + sigma_y2`, `q_ab = sigma_mu2`, so
  `c = gamma / (1 + gamma)` and `gamma = c / (1 - c)`; `c = 1/2` (gamma = 1) separates neutrality
  (`gamma < 1`) from prejudice.
- Binary output: the fraction of inputs assigned to class 0 is `G0 = Phi(sqrt(gamma) delta)`,
  `delta ~ N(0, 1)` over networks; `E f_max = 1/2 + arctan(sqrt(gamma)) / pi`.
- `n` classes: `f_c = E_xi[prod_{c' != c} Phi(xi + sqrt(gamma) (Z_c - Z_c'))]`, `Z ~ N(0, I_n)` per network.

Public functions compute in float64 inside `jax.enable_x64` and return numpy values.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numpy as np
from jax.scipy.special import ndtr, ndtri

from theory import quadrature

N_XI = 64               # Gauss-Hermite nodes for the xi-average of the n-class formula
N_MEAN_NETWORKS = 1 << 16   # networks averaged by fmax_mean for n_classes > 2 (fixed key: deterministic)


def gamma_of_c(c):
    """jax.numpy `c / (1 - c)` with `inf` at `c >= 1` (for use inside traced float64 code)."""
    return jnp.where(c >= 1.0, jnp.inf, c / jnp.where(c >= 1.0, 1.0, 1.0 - c))


def _x64(fn, *args):
    with jax.enable_x64(True):
        return np.asarray(fn(*[jnp.asarray(np.asarray(a, dtype=np.float64)) for a in args]))


def gamma_from_c(c):
    """`gamma = c / (1 - c)` (`inf` at `c = 1`)."""
    return _x64(gamma_of_c, c)


def c_from_gamma(gamma):
    """`c = gamma / (1 + gamma)` (`1` at `gamma = inf`)."""
    return _x64(lambda g: jnp.where(jnp.isinf(g), 1.0, g / (1.0 + jnp.where(jnp.isinf(g), 0.0, g))), gamma)


def estimate(h) -> dict:
    """IGB statistics of one network's pre-activations `h`, shape `(nodes, inputs)`.

    Naive: `sigma_mu2 = Var_i(mu_i)` (population variance over nodes of the input-means),
    `sigma_y2 = mean_i Var_a(h_ia)`, `gamma = sigma_mu2 / sigma_y2`; inflated by about
    `(1 + gamma) / n` with `n` inputs. Bias-corrected: with `G = h^T h / N`, `Q = mean_a G_aa`,
    `P = mean_{a != b} G_ab`, `gamma_corr = P / (Q - P)`, so that `c = P / Q` equals
    `gamma_corr / (1 + gamma_corr)` exactly (THEORY.md section 5). Also returns `q = Q` and `c`.
    """
    with jax.enable_x64(True):
        h = jnp.asarray(np.asarray(h, dtype=np.float64))
        if h.ndim != 2 or h.shape[1] < 2:
            raise ValueError(f"h must have shape (nodes, inputs >= 2), got {h.shape}")
        out = _estimate(h)
        return {k: float(v) for k, v in out.items()}


@jax.jit
def _estimate(h):
    n_nodes, n_in = h.shape
    mu = h.mean(axis=1)
    sigma_mu2 = mu.var()
    sigma_y2 = h.var(axis=1).mean()
    gram = h.T @ h / n_nodes
    q = jnp.trace(gram) / n_in
    p = (gram.sum() - jnp.trace(gram)) / (n_in * (n_in - 1))
    return {"sigma_mu2": sigma_mu2, "sigma_y2": sigma_y2, "gamma": sigma_mu2 / sigma_y2,
            "gamma_corr": p / (q - p), "q": q, "c": p / q}


def g0_density(g, gamma):
    """Density of `G0 = Phi(sqrt(gamma) delta)` on (0, 1): `gamma^{-1/2} exp(x^2 (1 - 1/gamma) / 2)`,
    `x = Phi^{-1}(g)`; identically 1 at `gamma = 1` (uniform)."""
    def density(g, gamma):
        x = ndtri(g)
        return jnp.exp(0.5 * x * x * (1.0 - 1.0 / gamma)) / jnp.sqrt(gamma)
    return _x64(density, g, gamma)


def fmax_binary_mean(gamma):
    """`E f_max = 1/2 + arctan(sqrt(gamma)) / pi` for two classes (0.75 at gamma = 1)."""
    return _x64(lambda g: 0.5 + jnp.arctan(jnp.sqrt(g)) / math.pi, gamma)


def _class_fractions(z, gamma):
    """`f_c` for one network with class centres `z` (shape [n]): `E_xi prod_{c' != c} Phi(xi + sqrt(gamma)(z_c - z_c'))`."""
    x, w = quadrature.hermite(N_XI)
    d = jnp.sqrt(gamma) * (z[:, None] - z[None, :])                   # [c, c']
    logphi = jnp.log(ndtr(x[:, None, None] + d[None]))                 # [xi, c, c']
    logphi = jnp.where(jnp.eye(z.shape[0], dtype=bool)[None], 0.0, logphi)
    return jnp.sum(w[:, None] * jnp.exp(logphi.sum(axis=-1)), axis=0)


@functools.partial(jax.jit, static_argnums=(2, 3))
def _fmax_samples(key, gamma, n_classes: int, n_networks: int):
    if n_classes == 2:    # G0 = Phi(sqrt(gamma) delta): the xi-average of the formula done exactly
        g0 = ndtr(jnp.sqrt(gamma) * jax.random.normal(key, (n_networks,), jnp.float64))
        return jnp.maximum(g0, 1.0 - g0)
    z = jax.random.normal(key, (n_networks, n_classes), jnp.float64)
    return jax.vmap(lambda zz: _class_fractions(zz, gamma).max())(z)


def fmax_samples(key, gamma, n_classes: int = 2, n_networks: int = 10_000):
    """`f_max` of `n_networks` independent networks at imbalance `gamma` (one value per network).

    Binary: `max(G0, 1 - G0)`, `G0 = Phi(sqrt(gamma) delta)`; `n` classes: the max of the n-class
    formula's fractions, with the xi-average by 64-node Gauss-Hermite (THEORY.md section 5).
    """
    _check_classes(n_classes)
    with jax.enable_x64(True):
        return np.asarray(_fmax_samples(key, jnp.float64(gamma), int(n_classes), int(n_networks)))


def fmax_mean(gamma, n_classes: int = 2):
    """`E f_max` at imbalance `gamma` (scalar or array).

    Binary: closed form `1/2 + arctan(sqrt(gamma))/pi`. `n > 2`: average of `fmax_samples` over
    2^16 networks drawn with a fixed key (deterministic; Monte Carlo error ~1e-3 over networks,
    the within-network xi-average is quadrature).
    """
    _check_classes(n_classes)
    if n_classes == 2:
        return fmax_binary_mean(gamma)
    gammas = np.asarray(gamma, dtype=np.float64)
    key = jax.random.key(0)
    out = [fmax_samples(key, g, n_classes, N_MEAN_NETWORKS).mean() for g in gammas.reshape(-1)]
    return np.asarray(out).reshape(gammas.shape)


def _check_classes(n_classes: int) -> None:
    if int(n_classes) < 2:
        raise ValueError(f"n_classes must be >= 2, got {n_classes}")


__all__ = ["gamma_of_c", "gamma_from_c", "c_from_gamma", "estimate", "g0_density", "fmax_binary_mean", "fmax_mean",
           "fmax_samples"]
