"""Activation registry: the Gaussian expectations the mean-field maps need (THEORY.md sections 2-4).

For an activation `psi` (elementwise `phi`, or `k = 2` independent pre-activations pooled by max or
mean) and two inputs with equal pre-activation variance `q` and correlation `c`, each entry gives

- `mean(q)          = E[psi(sqrt(q) z)]`
- `second_moment(q) = E[psi(sqrt(q) z)^2]`                      (length map, THEORY.md section 2)
- `kernel(q, c)     = E[psi(u_a) psi(u_b)]`                      (covariance map)
- `grad_kernel(q, c) = E[<grad psi(u_a), grad psi(u_b)>]`       (`chi_c / sigma_w2`; by Price's theorem
  `d kernel / d q_ab`, which is also how the multi-node closed forms below were derived)
- `grad_moment(q)   = E[|grad psi(sqrt(q) z)|^2]`               (`chi_1 / sigma_w2`)
- `grad_moment0     = |grad psi(0)|^2` of the exact activation, where the edge of chaos at `sigma_b2 = 0`
  needs it (`q* = 0` there; nan for the homogeneous entries, whose `grad_moment` is constant)

where for pooled activations `u_a = (h_a1, h_a2)` and the pairs `(h_a1, h_b1)`, `(h_a2, h_b2)` are iid
with covariance `q [[1, c], [c, 1]]`. `psi(h)` applies the activation to a finite layer: pooled
activations read the last axis as `N` groups of `k` consecutive pre-activations.

How each expectation is computed (no Monte Carlo anywhere):

- linear, relu, erf: closed forms (THEORY.md section 3; Cho & Saul 2009, Williams 1997).
- tanh: `tanh(x) = sum_k a_k erf(b_k x) + e(x)`, a 10-term erf expansion fitted once
  (`|e| < 3e-10`, `|e'| < 2.1e-9` on the real line, sum a_k = 1 exactly), so every tanh expectation is a
  finite sum of Williams' erf closed forms, exact in `q`: `kernel = (2/pi) sum_jk a_j a_k
  arcsin(c beta_j beta_k)`, `beta_k^2 = 2 b_k^2 q / (1 + 2 b_k^2 q)`. Gauss-Hermite with 200 nodes is
  only 1e-6 accurate at `q = 7` (tanh is steep on the Gaussian's scale); tests check both agree where
  Gauss-Hermite converges.
- gelu, silu: members of the family `x Phi(a x)` (SiLU through the same erf expansion as tanh), whose
  expectations are closed forms in any q (`theory.gelu`).
- avgpool of `k = 2` iid pairs: `E[psi_a psi_b] = K_phi / 2 + m_a m_b / 2`, `E<grad, grad> = G_phi / 2`.
- relu + maxpool: with `theta = arccos c`, `A = arcsin(c / sqrt 2)`, Plackett's identity on the
  4-D orthant probability `2 P(h_1 > max(h_2, 0) for both inputs)` gives the closed form
  `G(c) = 21/32 - theta/pi + theta^2/(2 pi^2) + A/(2 pi) - A^2/(2 pi^2)` (G(1) = 3/4, G(0) = 9/32,
  G(-1) = 0), and `K(c) = K(1) - int_c^1 G`, integrated in closed form; `K(1) = 3/4 + 1/(2 pi)`,
  `K(0) = (1/sqrt(2 pi) + 1/(2 sqrt pi))^2 = E[relu(max)]^2`, `K(-1) = 1/pi`.
- tanh + maxpool: per erf term, `erf(b M) = 2 Phi(sqrt 2 b M) - 1` with `M = max(h_1, h_2)`; the product
  of two such terms is an inclusion-exclusion of orthant probabilities of
  `(h_a1 - e_a, h_a2 - e_a, h_b1 - e_b, h_b2 - e_b)` (auxiliary Gaussians `e`). Plackett's identity
  differentiates the 4-D orthant in `c` into a closed form (a bivariate density times a 2-D orthant
  probability with partial correlation `rho`), so `grad_kernel` is closed form and
  `kernel(q, c) = kernel(q, 1) - q int_c^1 grad_kernel`, a 1-D smooth integral done by
  Gauss-Legendre after the substitutions `theta = arcsin(t beta_j beta_k)` (removes the peak of
  `1/sqrt(Q)` at large q) and `theta = theta_1 - (theta_1 - theta_c) s^2` (removes the square-root
  behaviour of `arcsin(rho)` at `t = 1`).
  `kernel(q, 1) = E[tanh(M)^2] = E[tanh(z)^2]` and `grad_moment` equal tanh's (even functions of the
  max of two iid Gaussians have the law of one, THEORY.md section 3).

All functions take float64 arrays that broadcast and return arrays of the broadcast shape; they are
differentiable in `q` and `c` (`jax.grad`), the ReLU kernels through Price's theorem (`dK/dc = G`), whose
closed forms autodiff would turn into nan at `c = 1`.
"""
from __future__ import annotations

import math
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

from theory import gelu as xphi
from theory import quadrature
from theory.special import arcsin, arcsin_with_complement, sin_half_pi, sqrt1m as _sqrt1m

PI = math.pi
SQRT_2PI = math.sqrt(2.0 * PI)


class Activation(NamedTuple):
    """Expectations of one activation under the conventions of THEORY.md section 1-2."""
    name: str
    nodes: int             # pre-activations pooled into one unit (k)
    bounded: bool          # |psi| <= 1: q* lies in [sigma_b2, sigma_b2 + sigma_w2]
    homogeneous: bool      # psi(a h) = a psi(h) for a > 0: q scales out of every map
    psi: Callable          # finite layer: h[..., k N] -> [..., N]
    mean: Callable
    second_moment: Callable
    kernel: Callable
    grad_kernel: Callable
    grad_moment: Callable
    grad_moment_inf: float  # lim_{q -> inf} grad_moment (unbounded, non-homogeneous); nan otherwise
    # E|grad psi(0)|^2 of the exact activation (nan: use grad_moment(0)). At sigma_b2 = 0 the edge of chaos
    # of tanh-like psi is the degenerate root q* = 0, sigma_w2 = 1 / E|grad psi(0)|^2, known exactly; the
    # erf expansion of tanh has tanh'(0)^2 = 1 - 4.1e-9 (its |e'(0)| = 2.0e-9), which would move it to 1 + 4.1e-9.
    grad_moment0: float = math.nan


def _pool(phi: Callable, reduce: Callable, k: int = 2) -> Callable:
    def psi(h):
        h = jnp.asarray(h)
        return reduce(phi(h.reshape(h.shape[:-1] + (h.shape[-1] // k, k))), axis=-1)
    return psi


def _identity(x):
    return x


# --------------------------------------------------------------------------- linear
def _linear() -> Activation:
    return Activation(
        "linear", 1, False, True, _identity,
        mean=lambda q: jnp.zeros_like(q),
        second_moment=lambda q: q,
        kernel=lambda q, c: q * c,
        grad_kernel=lambda q, c: jnp.ones_like(q * c),
        grad_moment=lambda q: jnp.ones_like(q),
        grad_moment_inf=math.nan)


# --------------------------------------------------------------------------- relu
def _price_derivative(grad_kernel_unit: Callable) -> Callable:
    """Decorator: give a unit-variance kernel `K(c)` the derivative `dK/dc = G(c)` (Price's theorem).

    The closed forms hold `sqrt(1 - c^2)` and `arccos c` terms whose derivatives are infinite at
    `c = 1` and cancel analytically; autodiff would return nan there (c reaches 1 exactly in deep
    ordered nets), while `G(1)` is finite.
    """
    def wrap(kernel_unit: Callable) -> Callable:
        k = jax.custom_jvp(kernel_unit)
        k.defjvp(lambda primals, tangents: (kernel_unit(*primals), grad_kernel_unit(*primals) * tangents[0]))
        return k
    return wrap


def relu_grad_kernel(c):
    """`E[relu'(u1) relu'(u2)] = (pi - theta) / (2 pi)`."""
    return (PI - jnp.arctan2(_sqrt1m(c), c)) / (2.0 * PI)


@_price_derivative(relu_grad_kernel)
def relu_kernel_unit(c):
    """`E[relu(u1) relu(u2)]` at unit variance: `(sqrt(1-c^2) + (pi - theta) c) / (2 pi)` (Cho & Saul 2009)."""
    s = _sqrt1m(c)
    theta = jnp.arctan2(s, c)
    return (s + (PI - theta) * c) / (2.0 * PI)


def _relu() -> Activation:
    return Activation(
        "relu", 1, False, True, jax.nn.relu,
        mean=lambda q: jnp.sqrt(q) / SQRT_2PI,
        second_moment=lambda q: 0.5 * q,
        kernel=lambda q, c: q * relu_kernel_unit(c),
        grad_kernel=lambda q, c: relu_grad_kernel(c) + 0.0 * q,
        grad_moment=lambda q: 0.5 + 0.0 * q,
        grad_moment_inf=math.nan)


def _relu_avgpool() -> Activation:
    """(relu(h1) + relu(h2)) / 2: `K = q (K_relu(c) + 1/(2 pi)) / 2`, `G = G_relu / 2`, E|grad|^2 = 1/4."""
    return Activation(
        "relu+avgpool", 2, False, True, _pool(jax.nn.relu, jnp.mean),
        mean=lambda q: jnp.sqrt(q) / SQRT_2PI,
        second_moment=lambda q: q * (0.25 + 0.25 / PI),
        kernel=lambda q, c: 0.5 * q * (relu_kernel_unit(c) + 0.5 / PI),
        grad_kernel=lambda q, c: 0.5 * relu_grad_kernel(c) + 0.0 * q,
        grad_moment=lambda q: 0.25 + 0.0 * q,
        grad_moment_inf=math.nan)


_A_MAX = 1.0 / math.sqrt(2.0)
RELU_MAX_M1 = 1.0 / SQRT_2PI + 0.5 / math.sqrt(PI)   # E[relu(max(z1, z2))]
RELU_MAX_M2 = 0.75 + 0.5 / PI                          # E[relu(max(z1, z2))^2] (THEORY.md section 3)


def relu_max_grad_kernel(c):
    """`E<grad psi_a, grad psi_b>` for psi = relu(max(h1, h2)), unit variance, correlation `c`.

    Equals `2 P(h_a1 > max(h_a2, 0), h_b1 > max(h_b2, 0))`; Plackett's identity in `c` and two
    integrations give `21/32 - theta/pi + theta^2/(2 pi^2) + A/(2 pi) - A^2/(2 pi^2)`,
    `theta = arccos c`, `A = arcsin(c / sqrt 2)`.
    """
    theta = jnp.arctan2(_sqrt1m(c), c)
    a = jnp.arcsin(_A_MAX * c)
    return 21.0 / 32.0 - theta / PI + theta ** 2 / (2 * PI ** 2) + a / (2 * PI) - a ** 2 / (2 * PI ** 2)


def _relu_max_antiderivative(c, xp=jnp):
    """An antiderivative of `relu_max_grad_kernel` in `c` (term by term); `xp=np` for float64 constants."""
    s = xp.sqrt(xp.clip((1.0 - c) * (1.0 + c), 0.0, None))
    theta = xp.arctan2(s, c)
    a = xp.arcsin(_A_MAX * c)
    sa = xp.sqrt(1.0 - (_A_MAX * c) ** 2)
    return (21.0 / 32.0 * c
            - (c * theta - s) / PI
            + (c * theta ** 2 - 2.0 * s * theta - 2.0 * c) / (2 * PI ** 2)
            + (c * a + sa / _A_MAX) / (2 * PI)
            - (c * a ** 2 + 2.0 / _A_MAX * sa * a - 2.0 * c) / (2 * PI ** 2))


_RELU_MAX_F1 = float(_relu_max_antiderivative(np.float64(1.0), np))   # numpy: float64 outside any x64 scope


@_price_derivative(relu_max_grad_kernel)
def relu_max_kernel_unit(c):
    """`E[psi_a psi_b]`, psi = relu(max(h1, h2)), unit variance: `K(1) - int_c^1 G(t) dt`."""
    return RELU_MAX_M2 - (_RELU_MAX_F1 - _relu_max_antiderivative(c))


def _relu_maxpool() -> Activation:
    return Activation(
        "relu+maxpool", 2, False, True, _pool(jax.nn.relu, jnp.max),
        mean=lambda q: jnp.sqrt(q) * RELU_MAX_M1,
        second_moment=lambda q: q * RELU_MAX_M2,
        kernel=lambda q, c: q * relu_max_kernel_unit(c),
        grad_kernel=lambda q, c: relu_max_grad_kernel(c) + 0.0 * q,
        grad_moment=lambda q: 0.75 + 0.0 * q,
        grad_moment_inf=math.nan)


# --------------------------------------------------------------------------- erf
def _erf_activation() -> Activation:
    """erf: `K = (2/pi) arcsin(2 q c / (1 + 2 q))`, `G = (4/pi) / sqrt((1+2q)^2 - 4 q^2 c^2)` (Williams 1997)."""
    return Activation(
        "erf", 1, True, False, jax.scipy.special.erf,
        mean=lambda q: jnp.zeros_like(q),
        second_moment=lambda q: (2.0 / PI) * jnp.arcsin(2.0 * q / (1.0 + 2.0 * q)),
        kernel=lambda q, c: (2.0 / PI) * jnp.arcsin(2.0 * q * c / (1.0 + 2.0 * q)),
        grad_kernel=lambda q, c: (4.0 / PI) / jnp.sqrt((1.0 + 2.0 * q) ** 2 - 4.0 * q ** 2 * c ** 2),
        grad_moment=lambda q: (4.0 / PI) / jnp.sqrt(1.0 + 4.0 * q),
        grad_moment_inf=math.nan, grad_moment0=4.0 / PI)


# --------------------------------------------------------------------------- tanh as an erf expansion
# tanh(x) ~ sum_k TANH_ERF_A[k] * erf(TANH_ERF_B[k] * x); fitted once by minimax-weighted least squares
# on [0, 40] with sum(a) = 1 imposed (tests re-check the error bound on a dense grid).
TANH_ERF_A = TANH_ERF_B = _PJ = _PK = _PAIR_W = _PAIR_B = _PAIR_B2SUM = None   # set by _set_tanh_expansion below


def _set_tanh_expansion(a, b):
    global TANH_ERF_A, TANH_ERF_B, _PJ, _PK, _PAIR_W, _PAIR_B, _PAIR_B2SUM
    TANH_ERF_A, TANH_ERF_B = np.asarray(a, np.float64), np.asarray(b, np.float64)
    _PJ, _PK = np.triu_indices(len(TANH_ERF_A))
    # pair weights a_j a_k, counted twice off the diagonal (the pair sums are symmetric)
    _PAIR_W = np.where(_PJ == _PK, 1.0, 2.0) * TANH_ERF_A[_PJ] * TANH_ERF_A[_PK]
    _PAIR_B = TANH_ERF_B[_PJ] * TANH_ERF_B[_PK]
    _PAIR_B2SUM = 2.0 * (TANH_ERF_B[_PJ] ** 2 + TANH_ERF_B[_PK] ** 2)


def _pair_u(q):
    """`u_k = 2 b_k^2 q` for both members of every pair: shapes [..., P]."""
    q = jnp.asarray(q)[..., None]
    return 2.0 * TANH_ERF_B[_PJ] ** 2 * q, 2.0 * TANH_ERF_B[_PK] ** 2 * q


def _beta_products(q):
    """`beta_j beta_k = sqrt(u_j u_k / ((1 + u_j)(1 + u_k)))` for every pair, as
    `2 b_j b_k q / sqrt(1 + 2 (b_j^2 + b_k^2) q + 4 b_j^2 b_k^2 q^2)` (one rsqrt per pair)."""
    q = jnp.asarray(q)[..., None]
    return 2.0 * _PAIR_B * q * lax.rsqrt(1.0 + q * (_PAIR_B2SUM + q * (4.0 * _PAIR_B ** 2)))


def tanh_kernel(q, c):
    """`E[tanh(u1) tanh(u2)] = (2/pi) sum_jk a_j a_k arcsin(c beta_j beta_k)` (erf expansion)."""
    c = jnp.asarray(c)[..., None]
    return (2.0 / PI) * jnp.sum(_PAIR_W * arcsin(c * _beta_products(q)), axis=-1)


def tanh_grad_kernel(q, c):
    """`E[tanh'(u1) tanh'(u2)] = (4/pi) sum_jk a_j a_k b_j b_k / sqrt((1+u_j)(1+u_k) - c^2 u_j u_k)`."""
    uj, uk = _pair_u(q)
    c = jnp.asarray(c)[..., None]
    den = jnp.sqrt(1.0 + uj + uk + (1.0 - c) * (1.0 + c) * uj * uk)
    return (4.0 / PI) * jnp.sum(_PAIR_W * _PAIR_B / den, axis=-1)


def _tanh() -> Activation:
    return Activation(
        "tanh", 1, True, False, jnp.tanh,
        mean=lambda q: jnp.zeros_like(q),
        second_moment=lambda q: tanh_kernel(q, jnp.ones_like(q)),
        kernel=tanh_kernel,
        grad_kernel=tanh_grad_kernel,
        grad_moment=lambda q: tanh_grad_kernel(q, jnp.ones_like(q)),
        grad_moment_inf=math.nan, grad_moment0=1.0)


def _tanh_avgpool() -> Activation:
    """(tanh(h1) + tanh(h2)) / 2: zero mean, so every expectation is tanh's halved (THEORY.md section 3)."""
    return Activation(
        "tanh+avgpool", 2, True, False, _pool(jnp.tanh, jnp.mean),
        mean=lambda q: jnp.zeros_like(q),
        second_moment=lambda q: 0.5 * tanh_kernel(q, jnp.ones_like(q)),
        kernel=lambda q, c: 0.5 * tanh_kernel(q, c),
        grad_kernel=lambda q, c: 0.5 * tanh_grad_kernel(q, c),
        grad_moment=lambda q: 0.5 * tanh_grad_kernel(q, jnp.ones_like(q)),
        grad_moment_inf=math.nan, grad_moment0=0.5)   # |grad psi(0)|^2 = (1/2)^2 + (1/2)^2


# --------------------------------------------------------------------------- tanh + maxpool
N_MAXPOOL_GL = 10
_Q_TINY = 1e-300


def _max_partial_corr(t, uj, uk):
    """Plackett's partial correlation of the two remaining orthant coordinates, as `arcsin(rho)`, and `Q`.

    `rho = t (Q + 1) / sqrt(X_j X_k)` with `e = 1 - t^2`, `S = 2 + u_j + u_k`, `Q = 1 + u_j + u_k + e u_j u_k`,
    `X_j = S + e u_k (1 + u_j)`, `X_k = S + e u_j (1 + u_k)`. `rho -> 1` as `t -> 1`, where arcsin has
    infinite slope, so `1 - rho = D / (sqrt(X_j X_k) (sqrt(X_j X_k) + t (Q + 1)))` is formed from
    `D = X_j X_k - t^2 (Q + 1)^2 = e S (S + u_j + u_k) + e^2 u_j u_k (1 + u_j + u_k + 2 S) + e^3 u_j^2 u_k^2`,
    a sum of non-negative terms (no cancellation), and arcsin is evaluated from it.
    """
    e = (1.0 - t) * (1.0 + t)
    big_s = 2.0 + uj + uk
    big_q = 1.0 + uj + uk + e * uj * uk
    root = jnp.sqrt((big_s + e * uk * (1.0 + uj)) * (big_s + e * uj * (1.0 + uk)))
    num = t * (big_q + 1.0)
    d = e * big_s * (big_s + uj + uk) + e ** 2 * uj * uk * (1.0 + uj + uk + 2.0 * big_s) + e ** 3 * (uj * uk) ** 2
    return arcsin_with_complement(num / root, d / (root * (root + num))), big_q


def tanh_max_grad_kernel(q, c):
    """`E<grad psi_a, grad psi_b>`, psi = tanh(max(h1, h2)):
    `(8/pi) sum_jk a_j a_k b_j b_k (1/4 + arcsin(rho_jk(c)) / (2 pi)) / sqrt(Q_jk(c))`."""
    uj, uk = _pair_u(jnp.maximum(q, _Q_TINY))
    c = jnp.asarray(c)[..., None]
    asin_rho, big_q = _max_partial_corr(c, uj, uk)
    terms = (0.25 + asin_rho / (2.0 * PI)) / jnp.sqrt(big_q)
    return (8.0 / PI) * jnp.sum(_PAIR_W * _PAIR_B * terms, axis=-1)


def tanh_max_kernel(q, c):
    """`E[tanh(M_a) tanh(M_b)] = kernel(q, 1) - q int_c^1 grad_kernel(q, t) dt`.

    With `theta = arcsin(t beta_j beta_k)` the pair integrands become `(4/pi)(1/4 + arcsin(rho)/(2 pi))`,
    smooth in theta; the constant part integrates to `(tanh_kernel(q, 1) - tanh_kernel(q, c)) / 2`.
    """
    q = jnp.maximum(jnp.asarray(q), _Q_TINY)
    q, c = jnp.broadcast_arrays(q, jnp.asarray(c))
    uj, uk = _pair_u(q)
    bb = _beta_products(q)                                           # [..., P]
    lo, hi = arcsin(c[..., None] * bb), arcsin(bb)
    # arcsin(rho) ~ pi/2 - C sqrt(theta_1 - theta) at the upper end (rho = 1 at t = 1): with
    # theta = theta_1 - (theta_1 - theta_c) s^2 the integrand is smooth in s
    # at c = 1 the interval is empty and the integrand's derivative is nan at its collapsed nodes: place
    # the nodes as for c = 0 there (the integral is still multiplied by hi - lo = 0)
    lo_nodes = jnp.where(c[..., None] >= 1.0, 0.0, lo)
    s, w = quadrature.legendre(N_MAXPOOL_GL)
    theta = hi[..., None] - (hi - lo_nodes)[..., None] * s ** 2      # [..., P, n]
    t = sin_half_pi(theta) / bb[..., None]
    asin_rho, _ = _max_partial_corr(t, uj[..., None], uk[..., None])
    integral = jnp.sum(asin_rho * 2.0 * s * w, axis=-1) * (hi - lo)   # [..., P]
    v = tanh_kernel(q, jnp.ones_like(q))
    return 0.5 * (v + tanh_kernel(q, c)) - (2.0 / PI ** 2) * jnp.sum(_PAIR_W * integral, axis=-1)


def tanh_max_mean(q):
    """`E[tanh(max(h1, h2))] = sum_k a_k (1/2 - arcsin(1 / (1 + u_k)) / pi)`."""
    u = 2.0 * TANH_ERF_B ** 2 * jnp.asarray(q)[..., None]
    return jnp.sum(TANH_ERF_A * (0.5 - arcsin(1.0 / (1.0 + u)) / PI), axis=-1)


def _tanh_maxpool() -> Activation:
    return Activation(
        "tanh+maxpool", 2, True, False, _pool(jnp.tanh, jnp.max),
        mean=tanh_max_mean,
        second_moment=lambda q: tanh_kernel(q, jnp.ones_like(q)),
        kernel=tanh_max_kernel,
        grad_kernel=tanh_max_grad_kernel,
        grad_moment=lambda q: tanh_grad_kernel(q, jnp.ones_like(q)),
        grad_moment_inf=math.nan, grad_moment0=1.0)


# --------------------------------------------------------------------------- GELU, SiLU (theory.gelu)
def _xphi_activation(name: str, phi: Callable, weights, slopes) -> Activation:
    """`psi = sum_k w_k x Phi(s_k x)`: closed forms of `theory.gelu`, exact in q (no quadrature)."""
    kernel = lambda q, c: xphi.mixture_kernel(q, c, weights, slopes)
    grad_kernel = lambda q, c: xphi.mixture_grad_kernel(q, c, weights, slopes)
    return Activation(
        name, 1, False, False, phi,
        mean=lambda q: xphi.mixture_mean(q, weights, slopes),
        second_moment=lambda q: kernel(q, jnp.ones_like(q)),
        kernel=kernel,
        grad_kernel=grad_kernel,
        grad_moment=lambda q: grad_kernel(q, jnp.ones_like(q)),
        grad_moment_inf=0.5,   # both tend to relu: E[relu'^2] = 1/2
        grad_moment0=0.25)     # psi'(0) = Phi(0) = sigmoid(0) = 1/2


# --------------------------------------------------------------------------- registry
def _build() -> dict[str, Activation]:
    acts = [_linear(), _relu(), _erf_activation(), _tanh(),
            _xphi_activation("gelu", xphi.gelu, *xphi.GELU_MIXTURE),
            _xphi_activation("silu", xphi.silu, *xphi.silu_mixture(TANH_ERF_A, TANH_ERF_B)),
            _relu_maxpool(), _relu_avgpool(), _tanh_maxpool(), _tanh_avgpool()]
    return {a.name: a for a in acts}


def get(name: str) -> Activation:
    """The registry entry for `name`; unknown names raise ValueError listing the known ones."""
    try:
        return ACTIVATIONS[name]
    except KeyError:
        raise ValueError(f"unknown activation {name!r}; known: {', '.join(ACTIVATIONS)}") from None


# All a_k > 0 (a discretised Gaussian scale mixture: the logistic law is one, Andrews & Mallows 1974),
# so the pair sums have no cancellation. max|e| = 2.5e-10, max|e'| = 2.0e-9.
_set_tanh_expansion(
    [0.0003034554751422022, 0.007734583344995383, 0.04892221447894072, 0.1410820681132366,
     0.24126096213238749, 0.2710033792452173, 0.19545595262989404, 0.0795781177494132,
     0.014065225862243425, 0.0005940409685295522],
    [0.3097341533070865, 0.3889168073146748, 0.4815842143608803, 0.5947466935073105,
     0.734483611384803, 0.9064821253062686, 1.1169273139654414, 1.3745757695262755,
     1.6949904125135975, 2.1176222552430826])
ACTIVATIONS = _build()
NAMES = tuple(ACTIVATIONS)
