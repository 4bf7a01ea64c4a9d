"""`meanfield.backward_product` against an independent recursion, and the pooled-ReLU correlation slope."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate

from theory import meanfield as mf

PI = math.pi


def _gauss(f, q):
    """E[f(sqrt(q) z)] by scipy quad (independent of theory's closed forms and erf expansion)."""
    return integrate.quad(lambda z: f(math.sqrt(q) * z) * math.exp(-0.5 * z * z) / math.sqrt(2 * PI),
                          -np.inf, np.inf, epsabs=1e-15, epsrel=1e-13, limit=400)[0]


def _sech4(u):
    e = math.exp(-2.0 * abs(u))
    return (4.0 * e / (1.0 + e) ** 2) ** 2


def _tanh_product_by_quad(sw, sb, depth, q0=1.0):
    """prod_{l=1}^{L-1} sw E[tanh'(sqrt(q_l) z)^2] along q_{l+1} = sw E[tanh^2] + sb, q_1 = sw q0 + sb."""
    q, prod = sw * q0 + sb, 1.0
    for _ in range(depth - 1):
        prod *= sw * _gauss(_sech4, q)
        q = sw * _gauss(lambda u: math.tanh(u) ** 2, q) + sb
    return prod


@pytest.mark.parametrize("sw,sb,depth", [(1.4896, 0.1, 30), (1.986073, 0.1, 30), (4.3871, 0.1, 12),
                                         (2.5, 0.0, 20), (1.2, 0.3, 5)])
def test_tanh_backward_product_matches_a_scipy_recursion(sw, sb, depth):
    got = float(mf.backward_product(sw, sb, "tanh", depth))
    # measured agreement 1e-14 .. 6e-14: the expansion's |e'| < 2.1e-9 oscillates and averages out in E[tanh'^2]
    assert got == pytest.approx(_tanh_product_by_quad(sw, sb, depth), rel=1e-12)


def test_tanh_transient_is_not_chi1_power():
    """At the EOC (sigma_b2 = 0.1) chi_1 = 1 but q_1 = 2.09 > q* = 0.81 lowers the first factors: 0.54."""
    sw = float(mf.eoc(0.1, "tanh"))
    assert float(mf.chi1(sw, 0.1, "tanh")) == pytest.approx(1.0, abs=1e-10)
    prod = np.asarray(mf.backward_product(sw, 0.1, "tanh", np.int64(30)))
    assert prod == pytest.approx(0.5417, abs=1e-4)
    # starting on the fixed point (q0 chosen so that q_1 = q*), the product is chi_1^(L-1) = 1
    q_star = float(mf.fixed_point(sw, 0.1, "tanh")[0])
    assert float(mf.backward_product(sw, 0.1, "tanh", 30, q0=(q_star - 0.1) / sw)) == pytest.approx(1.0, abs=1e-8)


def test_relu_family_backward_product_is_the_closed_form_whatever_q():
    sw = np.array([1.0, 2.0, 3.0])
    for depth in (1, 2, 30, 100):
        for sb, q0 in ((0.0, 1.0), (0.3, 5.0)):
            got = np.asarray(mf.backward_product(sw, sb, "relu", depth, q0=q0))
            np.testing.assert_allclose(got, (sw / 2) ** (depth - 1), rtol=1e-13)
    np.testing.assert_allclose(mf.backward_product(sw, 0.1, "relu+maxpool", 10), (0.75 * sw) ** 9, rtol=1e-13)
    np.testing.assert_allclose(mf.backward_product(sw, 0.1, "relu+avgpool", 10), (0.25 * sw) ** 9, rtol=1e-13)


def test_backward_product_layers_are_one_to_depth_minus_one():
    """The product uses q_1 .. q_{L-1} of `propagate` (not q_L): checked factor by factor for erf."""
    sw, sb, depth = 2.0, 0.2, 6
    q = np.asarray(mf.propagate(sw, sb, "erf", depth)[0])
    factors = np.asarray(mf.backward_factor(q, sw, "erf"))
    expected = np.prod(factors[:-1])
    assert float(mf.backward_product(sw, sb, "erf", depth)) == pytest.approx(expected, rel=1e-13)
    assert expected != pytest.approx(np.prod(factors[1:]), rel=1e-3)    # the layer choice matters here


def test_backward_product_broadcasts_jits_and_differentiates():
    sw, sb = np.array([[1.5], [2.5]]), np.array([0.05, 0.1, 0.3])
    out = mf.backward_product(sw, sb, "tanh", 8)
    assert out.shape == (2, 3) and out.dtype == jnp.float64
    with jax.enable_x64(True):
        jitted = jax.jit(mf.backward_product, static_argnames=("act", "depth"))(sw, sb, "tanh", 8)
        np.testing.assert_allclose(np.asarray(jitted), np.asarray(out), rtol=1e-12)
        g = float(jax.grad(lambda w: mf.backward_product(w, 0.0, "relu", 11))(jnp.float64(2.2)))
    assert g == pytest.approx(10 / 2 * 1.1 ** 9, rel=1e-12)     # d/dw (w/2)^10
    with pytest.raises(ValueError, match="depth"):
        mf.backward_product(1.0, 0.1, "tanh", 0)


# (G(1), K(1)) at unit variance: E|grad psi|^2 and E psi^2 (docs/theory.md section 3)
POOLED = {"relu+maxpool": (0.75, 0.75 + 0.5 / PI), "relu+avgpool": (0.25, 0.25 + 0.25 / PI)}


@pytest.mark.parametrize("act,slope,xi_c", [("relu+maxpool", 0.8249, 5.196), ("relu+avgpool", 0.7585, 3.619)])
def test_pooled_relu_has_no_critical_point_in_c(act, slope, xi_c):
    """Homogeneous pooled psi: c-map slope at c = 1 is G(1)/K(1) at every sigma_w2 with q* = inf."""
    g1, k1 = POOLED[act]
    ratio = g1 / k1
    assert ratio == pytest.approx(slope, abs=1e-4) and -1 / math.log(ratio) == pytest.approx(xi_c, abs=1e-3)
    forward, gradient = float(mf.eoc(0.0, act)), float(mf.eoc(0.0, act, "gradient"))
    sw = np.array([forward, 0.5 * (forward + gradient), gradient, 2 * gradient])
    for sb in (0.0, 0.1):
        np.testing.assert_allclose(mf.depth_scales(sw, sb, act)[1], -1 / math.log(ratio), rtol=1e-12)
    # at sigma_b2 = 0 the c-map does not depend on sigma_w2 at all: c_100 is the same everywhere
    c100 = np.asarray(mf.propagate(np.array([0.5, 1.0, 2.0, 5.0]), 0.0, act, 100)[1][..., -1])
    np.testing.assert_allclose(c100, c100[0], rtol=1e-15)
    assert 0 < 1 - c100[0] < 1e-9
    # plain ReLU is the critical one: slope 1, xi_c infinite
    assert np.isinf(np.asarray(mf.depth_scales(3.0, 0.1, "relu")[1]))
