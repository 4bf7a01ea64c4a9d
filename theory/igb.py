"""Initial Guessing Bias (IGB): gamma <-> c, estimators from pre-activations, f_max distributions.

docs/theory.md section 5 (Francazi, Lucchi, Baity-Jesi 2024, arXiv 2306.00809; Bassi et al. 2026):

- For one network, node `i` has a data-mean `mu_i = E_x[h_i(x)]`; `sigma_mu2 = Var_i(mu_i)`,
  `sigma_y2 = mean_i Var_x(h_i(x))`, `gamma = sigma_mu2 / sigma_y2`.
- Infinite width then infinite data: `q_aa = sigma_mu2 + sigma_y2`, `q_ab = sigma_mu2`, so
  `c = gamma / (1 + gamma)` and `gamma = c / (1 - c)`; `c = 1/2` (gamma = 1) separates neutrality
  (`gamma < 1`) from prejudice.
- Binary output: the fraction of inputs assigned to class 0 is `G0 = Phi(sqrt(gamma) delta)`,
  `delta ~ N(0, 1)` over networks; `E f_max = 1/2 + arctan(sqrt(gamma)) / pi`.
- `n` classes: `f_c = E_xi[prod_{c' != c} Phi(xi + sqrt(gamma) (Z_c - Z_c'))]`, `Z ~ N(0, I_n)` per network.

Public functions take floats, numpy or jax arrays (tracers included), compute in float64 inside
`jax.enable_x64` (`theory.x64`) and return float64 jax arrays; they work under `jax.jit` (`n_classes`,
`n_networks` static) and `jax.grad`.
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
from jax.scipy.special import ndtr, ndtri

from theory import quadrature
from theory.x64 import f64, padded_map, scoped

N_XI = 48               # Gauss-Hermite nodes for the xi-average of the n-class formula


def gamma_of_c(c):
    """jax.numpy `c / (1 - c)` with `inf` at `c >= 1` (for use inside traced float64 code)."""
    return jnp.where(c >= 1.0, jnp.inf, c / jnp.where(c >= 1.0, 1.0, 1.0 - c))


@scoped
def gamma_from_c(c):
    """`gamma = c / (1 - c)` (`inf` at `c = 1`)."""
    return gamma_of_c(f64(c))


@scoped
def c_from_gamma(gamma):
    """`c = gamma / (1 + gamma)` (`1` at `gamma = inf`)."""
    g = f64(gamma)
    return jnp.where(jnp.isinf(g), 1.0, g / (1.0 + jnp.where(jnp.isinf(g), 0.0, g)))


@scoped
def estimate(h) -> dict:
    """IGB statistics of one network's pre-activations `h`, shape `(nodes, inputs)`.

    Naive: `sigma_mu2 = Var_i(mu_i)` (population variance over nodes of the input-means),
    `sigma_y2 = mean_i Var_a(h_ia)`, `gamma = sigma_mu2 / sigma_y2`; inflated by about
    `(1 + gamma) / (n - 1)` with `n` inputs. Bias-corrected: with `G = h^T h / N`, `Q = mean_a G_aa`,
    `P = mean_{a != b} G_ab`, `gamma_corr = P / (Q - P)`, so that `c = P / Q` equals
    `gamma_corr / (1 + gamma_corr)` exactly (docs/theory.md section 5). Also returns `q = Q`, `p = P`, `c`.
    Values are 0-d float64 jax arrays.

    `gamma_corr` is uncentred, like the mean-field `q_ab` it estimates: `P` is a second moment about 0,
    not about the mean over nodes, so in expectation `gamma_corr = (sigma_mu2 + m^2) / sigma_y2` with
    `m = mean_i mu_i`. It equals the centred `gamma` only when the node centres average to 0 (zero-mean
    weights at infinite width); a common offset does not cancel: `h = 2 + mu_i + noise` with
    `sigma_mu2 = sigma_y2 = 1` gives `gamma ~ 1` but `gamma_corr ~ 5`. Pre-activations of a network with
    zero-mean weights and biases have `m = O(N^-1/2)`; features after a ReLU or a max-pool (non-zero mean)
    do not, and there `gamma_corr` exceeds the centred `gamma`.
    """
    h = f64(h)
    if h.ndim != 2 or h.shape[1] < 2:
        raise ValueError(f"h must have shape (nodes, inputs >= 2), got {h.shape}")
    return _estimate(h)


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
            "gamma_corr": p / (q - p), "q": q, "p": p, "c": p / q}


@scoped
def g0_density(g, gamma):
    """Density of `G0 = Phi(sqrt(gamma) delta)` on (0, 1): `gamma^{-1/2} exp(x^2 (1 - 1/gamma) / 2)`,
    `x = Phi^{-1}(g)`; identically 1 at `gamma = 1` (uniform)."""
    x, gamma = ndtri(f64(g)), f64(gamma)
    return jnp.exp(0.5 * x * x * (1.0 - 1.0 / gamma)) / jnp.sqrt(gamma)


@scoped
def fmax_binary_mean(gamma):
    """`E f_max = 1/2 + arctan(sqrt(gamma)) / pi` for two classes (0.75 at gamma = 1, 1 at gamma = inf)."""
    return 0.5 + jnp.arctan(jnp.sqrt(f64(gamma))) / math.pi


def _class_fractions(z, gamma):
    """`f_c` for one network with class centres `z` (shape [n]): `E_xi prod_{c' != c} Phi(xi + sqrt(gamma)(z_c - z_c'))`."""
    x, w = quadrature.hermite(N_XI)
    d = jnp.sqrt(gamma) * (z[:, None] - z[None, :])                   # [c, c']
    phi = jnp.where(jnp.eye(z.shape[0], dtype=bool)[None], 1.0, ndtr(x[:, None, None] + d[None]))
    return jnp.sum(w[:, None] * jnp.prod(phi, axis=-1), axis=0)


def _top_fraction(z, gamma):
    """`f_max` of one network: the class with the largest centre has the largest fraction."""
    x, w = quadrature.hermite(N_XI)
    top = jnp.argmax(z)
    d = jnp.sqrt(gamma) * (z[top] - z)
    phi = jnp.where(jnp.arange(z.shape[0]) == top, 1.0, ndtr(x[:, None] + d[None]))   # [xi, c'], c' != top
    return jnp.sum(w * jnp.prod(phi, axis=-1))


@functools.partial(jax.jit, static_argnums=(2, 3))
def _fmax_samples(key, gamma, n_classes: int, n_networks: int):
    if n_classes == 2:    # G0 = Phi(sqrt(gamma) delta): the xi-average of the formula done exactly
        g0 = ndtr(jnp.sqrt(gamma) * jax.random.normal(key, (n_networks,), jnp.float64))
        return jnp.maximum(g0, 1.0 - g0)
    z = jax.random.normal(key, (n_networks, n_classes), jnp.float64)
    return jax.vmap(lambda zz: _top_fraction(zz, gamma))(z)


@scoped
def fmax_samples(key, gamma, n_classes: int = 2, n_networks: int = 10_000):
    """`f_max` of `n_networks` independent networks at imbalance `gamma` (one value per network).

    Binary: `max(G0, 1 - G0)`, `G0 = Phi(sqrt(gamma) delta)`; `n` classes: the fraction of the class
    with the largest centre `Z_c` (the largest fraction), the xi-average of the n-class formula by
    Gauss-Hermite (docs/theory.md section 5). `gamma` is a scalar (`inf`: every `f_max = 1`); `n_classes` and
    `n_networks` are static under `jax.jit`.
    """
    _check_classes(n_classes)
    return _fmax_samples(key, f64(gamma), int(n_classes), int(n_networks))


N_FMAX_GH = 64   # Gauss-Hermite nodes per axis (xi, z) of the n-class mean
N_FMAX_GL = 48   # Gauss-Legendre nodes of the 1-D deficit integral
SPAN = 9.0       # standard deviations kept by the deficit integral (tails < 1e-18)


def _deficit(xi, z, gamma):
    """`eps = Phi(z) - g = P(U < z, e > xi + sqrt(gamma)(z - U)) = int_0^inf Phibar(xi + sqrt(gamma) t) phi(z - t) dt`.

    The chance that a lower centre `U` still beats the top class `z` on an input (noise `e`). One
    Gauss-Legendre rule on `[0, T]`, `T = min(z + 9, (max(-xi, 0) + 9) / sqrt(gamma))`: the range of
    `phi(z - t)` or of `Phibar(xi + sqrt(gamma) t)`, whichever ends first, so the rule sees both factors at
    their own scale at every gamma (`T ~ 1/sqrt(gamma)` at large gamma, `eps = 0` exactly at gamma = inf).
    `S = sqrt(gamma) T` is formed separately so that neither gamma = 0 nor gamma = inf makes `0 * inf`.
    """
    zp, xp = jnp.maximum(z + SPAN, 0.0), jnp.maximum(-xi, 0.0) + SPAN
    alive = zp > 0
    t_hi = jnp.where(alive, jnp.minimum(zp, xp / jnp.sqrt(gamma)), 0.0)
    s_hi = jnp.where(alive, jnp.minimum(jnp.sqrt(gamma) * jnp.where(alive, zp, 1.0), xp), 0.0)
    x, w = quadrature.legendre(N_FMAX_GL)
    phi = jnp.exp(-0.5 * (z[..., None] - t_hi[..., None] * x) ** 2) / math.sqrt(2.0 * math.pi)
    return t_hi * jnp.sum(w * ndtr(-(xi[..., None] + s_hi[..., None] * x)) * phi, axis=-1)


def _power_gap_ratio(p, eps, m: int):
    """`(p^m - (p - eps)^m) / eps = p^(m-1) (1 - r^m) / (1 - r)`, `r = 1 - eps/p`, without cancellation:
    `1 - r^m = -expm1(m log1p(-eps/p))` for `eps/p <= 1/2` (directly above), `m p^(m-1)` as `eps -> 0`."""
    e = jnp.clip(eps / p, 0.0, 1.0)
    small, big = e < 1e-300, e > 0.5
    e_lo, e_hi = jnp.where(small | big, 0.25, e), jnp.where(big, e, 0.75)   # log1p(-1) = -inf: no nan slopes
    ratio = jnp.where(big, (1.0 - (1.0 - e_hi) ** m) / e_hi, -jnp.expm1(m * jnp.log1p(-e_lo)) / e_lo)
    return p ** (m - 1) * jnp.where(small, float(m), ratio)


def _fmax_gap(gamma, n_classes: int):
    """`1 - E f_max = n E_{z, xi}[Phi(z)^(n-1) - g^(n-1)]` for one gamma (n >= 2).

    `E f_max = n E_{z, xi}[g(xi, z)^(n-1)]`, `g = E_U[Phi(xi + sqrt(gamma)(z - U)) 1{U < z}]`: the top class
    (centre `z`) wins an input against each other class independently given the shared input noise
    `xi`, and the other centres are iid below `z`, so the (n-1)-fold product factorises. With
    `n E_z[Phi(z)^(n-1)] = 1`, the gap is `n E[eps (Phi^(n-1) - g^(n-1)) / eps]`, every term positive and
    proportional to the small deficit `eps = Phi(z) - g` (`_deficit`): relative accuracy at any gamma.
    The outer expectation is a 2-D Gauss-Hermite sum over `(xi, z)`.
    """
    x, w = quadrature.hermite(N_FMAX_GH)
    xi, z = x[:, None] + 0.0 * x[None, :], x[None, :] + 0.0 * x[:, None]
    eps = _deficit(xi, z, gamma)
    p = ndtr(z)
    return n_classes * jnp.einsum("i,j,ij->", w, w, eps * _power_gap_ratio(p, eps, n_classes - 1))


@functools.partial(jax.jit, static_argnums=(1,))
def _fmax_gaps(gammas, n_classes: int):
    return jax.vmap(lambda g: _fmax_gap(g, n_classes))(gammas)


@scoped
def fmax_mean(gamma, n_classes: int = 2):
    """`E f_max` at imbalance `gamma` (scalar or array, `0 <= gamma <= inf`), over networks.

    Binary: closed form `1/2 + arctan(sqrt(gamma))/pi`. `n > 2`: `1 - gap`, the gap `1 - E f_max`
    computed directly (see `_fmax_gap`) by deterministic quadrature, no sampling, to ~1e-9 relative at
    every gamma (checked against the binary closed form, an Owen-T integration and the large-gamma
    law `1 - E f_max ~ n (n - 1) E_z[phi(z) Phi(z)^(n-2)] / sqrt(pi gamma)`, 0.868148 / sqrt(gamma)
    for 10 classes); `gamma = inf` gives 1 exactly (deep prejudice), `gamma = 0` gives `1/n` exactly
    (set there: the quadrature alone gives 0.1 + 2.2e-9 for 10 classes). Small positive gamma is the
    quadrature's value (`E f_max - 1/n` grows like `sqrt(gamma)`).
    `n_classes` is static under `jax.jit`.
    """
    _check_classes(n_classes)
    if n_classes == 2:
        return fmax_binary_mean(gamma)
    mean = 1.0 - padded_map(lambda flat: _fmax_gaps(flat, int(n_classes)), gamma)
    # gamma = 0: every class wins each input with probability 1/n whatever the centres are; the quadrature
    # of the gap gives 1/n only to ~2e-9 (10 classes), so the exact value is returned there
    return jnp.where(f64(gamma) == 0.0, 1.0 / n_classes, mean)


def _check_classes(n_classes: int) -> None:
    if int(n_classes) < 2:
        raise ValueError(f"n_classes must be >= 2, got {n_classes}")


__all__ = ["gamma_of_c", "gamma_from_c", "c_from_gamma", "estimate", "g0_density", "fmax_binary_mean", "fmax_mean",
           "fmax_samples"]
