"""GELU and SiLU closed forms (theory.gelu) against scipy quadrature, from q = 0.3 to q = 1e3 and beyond."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, special

from theory import activations as A
from theory import gelu as G
from theory import meanfield as mf

PHI = {"gelu": lambda u: u * special.ndtr(u), "silu": lambda u: u * special.expit(u)}
DPHI = {"gelu": lambda u: special.ndtr(u) + u * math.exp(-0.5 * u * u) / math.sqrt(2 * math.pi),
        "silu": lambda u: special.expit(u) * (1 + u * (1 - special.expit(u)))}


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def _expect(f, mean, var):
    """scipy quad of `E f(u)`, `u ~ N(mean, var)`, split at the activation's scale (|u| <= 10) and at
    mean +- 40 sd, so the kink-scale feature is resolved however large the variance."""
    sd = math.sqrt(var)
    lo, hi = mean - 40 * sd, mean + 40 * sd
    cuts = sorted({lo, hi, *[x for x in (-10.0, 0.0, 10.0) if lo < x < hi]})
    dens = lambda u: f(u) * math.exp(-0.5 * (u - mean) ** 2 / var) / math.sqrt(2 * math.pi * var)
    return sum(integrate.quad(dens, a, b, epsabs=0.0, epsrel=1e-12, limit=400)[0]
               for a, b in zip(cuts[:-1], cuts[1:]))


def _kernel(f, g, q, c):
    """`E[f(u1) g(u2)]`: u1 ~ N(0, q), then u2 | u1 ~ N(c u1, q (1 - c^2)) (nested scipy quad)."""
    v = q * (1 - c) * (1 + c)
    return _expect(lambda u1: f(u1) * _expect(g, c * u1, v), 0.0, q)


def _gelu_kernel_1d(q, c):
    """GELU kernel with the inner expectation in closed form: `E[X Phi(X)] = m Phi(m/r) + v phi(m/r)/r`,
    `X ~ N(m, v)`, `r^2 = 1 + v` (a 1-D integral, independent of the 2-D closed form under test)."""
    v = q * (1 - c) * (1 + c)
    r = math.sqrt(1 + v)
    inner = lambda m: m * special.ndtr(m / r) + v * math.exp(-0.5 * (m / r) ** 2) / (math.sqrt(2 * math.pi) * r)
    return _expect(lambda u1: PHI["gelu"](u1) * inner(c * u1), 0.0, q)


@pytest.mark.parametrize("a,b", [(1.0, 1.0), (0.4, 1.7)])
def test_pair_closed_forms_match_scipy(a, b):
    """K_ab and G_ab of `x Phi(a x)`, `x Phi(b x)` (theory.gelu docstring), unequal slopes included."""
    f, g = (lambda u: u * special.ndtr(a * u)), (lambda u: u * special.ndtr(b * u))
    df = lambda u: special.ndtr(a * u) + a * u * math.exp(-0.5 * (a * u) ** 2) / math.sqrt(2 * math.pi)
    dg = lambda u: special.ndtr(b * u) + b * u * math.exp(-0.5 * (b * u) ** 2) / math.sqrt(2 * math.pi)
    for q, c in ((3.0, -0.6), (40.0, 0.97)):
        k, gk = (float(x[0]) for x in G._pair_terms(q, c, np.array([a]), np.array([b])))
        assert k == pytest.approx(_kernel(f, g, q, c), rel=1e-10, abs=1e-13)
        assert gk == pytest.approx(_kernel(df, dg, q, c), rel=1e-10, abs=1e-13)
    assert float(G.mixture_mean(2.0, np.array([1.0]), np.array([a]))) == pytest.approx(
        _expect(f, 0.0, 2.0), rel=1e-11)


@pytest.mark.parametrize("name", ["gelu", "silu"])
@pytest.mark.parametrize("q", [0.3, 2.0, 30.0, 1e3, 1e5])
def test_moments_match_scipy_at_any_q(name, q):
    """Second moment, mean and E[psi'^2] to ~1e-10 relative: Gauss-Hermite with 200 nodes misses by 1e-4 at q = 1e3."""
    act = A.get(name)
    phi, dphi = PHI[name], DPHI[name]
    assert float(act.second_moment(q)) == pytest.approx(_expect(lambda u: phi(u) ** 2, 0.0, q), rel=1e-10)
    assert float(act.mean(q)) == pytest.approx(_expect(phi, 0.0, q), rel=1e-10)
    assert float(act.grad_moment(q)) == pytest.approx(_expect(lambda u: dphi(u) ** 2, 0.0, q), rel=1e-9)


@pytest.mark.parametrize("name", ["gelu", "silu"])
@pytest.mark.parametrize("q,c", [(0.3, 0.5), (2.0, -0.4), (30.0, 0.9), (1e3, 0.3), (1e3, 0.99)])
def test_c_map_matches_scipy_to_1e9(name, q, c):
    """The normalised c-map (what propagates through depth) against nested scipy quad, q up to 1e3."""
    act, phi = A.get(name), PHI[name]
    sw, sb = 3.0, 0.1
    ref = (sw * _kernel(phi, phi, q, c) + sb) / (sw * _expect(lambda u: phi(u) ** 2, 0.0, q) + sb)
    assert float(mf.c_map(c, q, sw, sb, name)) == pytest.approx(ref, abs=1e-9)
    assert float(act.grad_kernel(q, c)) == pytest.approx(_kernel(DPHI[name], DPHI[name], q, c), rel=1e-9)


def test_gelu_propagation_over_30_layers_matches_a_scipy_recursion():
    """sigma_w2 = 3, sigma_b2 = 0.1: q grows to ~4e5 by layer 30; the old 64 x 64 Gauss-Hermite rule was
    6e-3 off in c there. Reference: the recursion with `_gelu_kernel_1d` and a quad second moment."""
    sw, sb, depth = 3.0, 0.1, 30
    q_th, c_th = (np.asarray(x) for x in mf.propagate(sw, sb, "gelu", depth))
    q, c = sw + sb, sb / (sw + sb)
    q_ref, c_ref = [q], [c]
    for _ in range(depth - 1):
        v = _expect(lambda u: PHI["gelu"](u) ** 2, 0.0, q)
        q, c = sw * v + sb, (sw * _gelu_kernel_1d(q, c) + sb) / (sw * v + sb)
        q_ref.append(q)
        c_ref.append(c)
    assert q_th[-1] > 1e5
    np.testing.assert_allclose(q_th, q_ref, rtol=1e-10)
    np.testing.assert_allclose(c_th, c_ref, atol=1e-9, rtol=0)


def test_silu_is_a_gelu_mixture():
    """sigmoid(x) = sum_k a_k Phi(s_k x) up to e(x/2)/2 of tanh's erf expansion (|e| < 3e-10)."""
    w, s = G.silu_mixture(A.TANH_ERF_A, A.TANH_ERF_B)
    x = np.linspace(-80, 80, 40_001)
    assert np.abs(special.ndtr(np.outer(x, s)) @ w - special.expit(x)).max() < 2e-10
    np.testing.assert_allclose(np.asarray(G.silu(jnp.asarray(x))), x * special.expit(x), rtol=1e-14, atol=1e-300)
    np.testing.assert_allclose(np.asarray(G.gelu_grad(jnp.asarray(x[::100]))), [DPHI["gelu"](u) for u in x[::100]],
                               rtol=1e-13, atol=1e-15)


@pytest.mark.parametrize("name", ["gelu", "silu"])
def test_kernels_are_differentiable_with_price_theorem(name):
    """d K / d c = q G (Price), also at c = 1 and at large q; finite derivatives in q."""
    act = A.get(name)
    q, c = np.meshgrid([0.7, 1e3], [0.2, 0.95, 1.0])
    dk = jax.jit(jax.vmap(jax.grad(act.kernel, argnums=1)))(q.ravel(), c.ravel())
    np.testing.assert_allclose(dk, q.ravel() * act.grad_kernel(q.ravel(), c.ravel()), rtol=1e-10)
    assert np.isfinite(jax.jit(jax.vmap(jax.grad(act.kernel)))(q.ravel(), c.ravel())).all()
