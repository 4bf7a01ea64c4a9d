"""Gaussian expectations of the activation registry: closed forms == quadrature == Monte Carlo."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, special

from theory import activations as A
from theory import quadrature as Q
from theory import special as S

PI = math.pi


@pytest.fixture(autouse=True)
def x64():
    with jax.enable_x64(True):
        yield


def _gauss_1d(f, q):
    """scipy quad of E[f(sqrt(q) z)] on the real line."""
    return integrate.quad(lambda z: f(math.sqrt(q) * z) * math.exp(-0.5 * z * z) / math.sqrt(2 * PI),
                          -np.inf, np.inf, epsabs=1e-14, epsrel=1e-13, limit=400)[0]


def _mc_pairs(q, c, n, seed, nodes):
    """Monte Carlo pre-activations for two inputs: (h_a, h_b), each [nodes, n], pairs iid with correlation c."""
    rng = np.random.default_rng(seed)
    z = rng.standard_normal((2, nodes, n))
    s = math.sqrt((1 - c) * (1 + c))
    return math.sqrt(q) * z[0], math.sqrt(q) * (c * z[0] + s * z[1])


def test_fast_arcsin_and_sin_match_numpy():
    x = np.linspace(-1, 1, 200_001)
    assert np.abs(np.asarray(S.arcsin(jnp.asarray(x))) - np.arcsin(x)).max() <= 2 * np.spacing(PI / 2)
    t = np.linspace(-PI / 2, PI / 2, 20_001)
    assert np.abs(np.asarray(S.sin_half_pi(jnp.asarray(t))) - np.sin(t)).max() < 5e-16
    g = jax.vmap(jax.grad(S.arcsin))(jnp.asarray(x[1:-1:7]))
    np.testing.assert_allclose(np.asarray(g), 1 / np.sqrt(1 - x[1:-1:7] ** 2), rtol=1e-11)


def test_tanh_erf_expansion_is_accurate_on_the_real_line():
    x = np.linspace(0, 60, 300_001)
    fit = special.erf(np.outer(x, A.TANH_ERF_B)) @ A.TANH_ERF_A
    dfit = (2 / math.sqrt(PI)) * np.exp(-np.outer(x, A.TANH_ERF_B) ** 2) @ (A.TANH_ERF_A * A.TANH_ERF_B)
    assert np.abs(fit - np.tanh(x)).max() < 3e-10
    assert np.abs(dfit - 1 / np.cosh(x) ** 2).max() < 2.5e-9
    assert A.TANH_ERF_A.sum() == pytest.approx(1.0, abs=1e-15) and (A.TANH_ERF_A > 0).all()


@pytest.mark.parametrize("q", [0.2, 1.0, 2.0])
def test_tanh_closed_form_matches_gauss_hermite(q):
    t = A.get("tanh")
    c = jnp.asarray([-0.6, 0.0, 0.3, 0.9, 0.999, 1.0])
    ref_k = Q.expect_2d(jnp.tanh, jnp.tanh, q, c, 300)
    dtanh = lambda u: 1 - jnp.tanh(u) ** 2
    ref_g = Q.expect_2d(dtanh, dtanh, q, c, 300)
    np.testing.assert_allclose(t.kernel(q, c), ref_k, atol=1e-12)
    np.testing.assert_allclose(t.grad_kernel(q, c), ref_g, atol=1e-10)


@pytest.mark.parametrize("q", [3.0, 7.0, 30.0])
def test_tanh_moments_at_large_q_match_scipy_quad(q):
    t = A.get("tanh")
    assert float(t.second_moment(q)) == pytest.approx(_gauss_1d(lambda u: math.tanh(u) ** 2, q), abs=1e-9)
    assert float(t.grad_moment(q)) == pytest.approx(_gauss_1d(lambda u: (1 - math.tanh(u) ** 2) ** 2, q), abs=5e-9)


def test_erf_closed_form_matches_quadrature():
    e = A.get("erf")
    for q in (0.1, 0.7, 1.5):
        c = jnp.asarray([-0.5, 0.2, 0.8, 1.0])
        np.testing.assert_allclose(e.kernel(q, c), Q.expect_2d(jax.scipy.special.erf, jax.scipy.special.erf, q, c, 200),
                                   atol=1e-12)
        assert float(e.second_moment(q)) == pytest.approx(_gauss_1d(lambda u: math.erf(u) ** 2, q), abs=1e-12)
        d = lambda u: 4 / PI * math.exp(-2 * u * u)
        assert float(e.grad_moment(q)) == pytest.approx(_gauss_1d(d, q), abs=1e-12)


@pytest.mark.parametrize("c", [-0.7, 0.0, 0.4, 0.95])
def test_relu_closed_form_matches_one_dimensional_quadrature(c):
    """Inner expectation in closed form (Gaussian relu mean), outer by quad on the smooth half line."""
    s = math.sqrt(1 - c * c)
    inner = lambda z1: c * z1 * special.ndtr(c * z1 / s) + s * math.exp(-0.5 * (c * z1 / s) ** 2) / math.sqrt(2 * PI)
    ref = integrate.quad(lambda z1: z1 * inner(z1) * math.exp(-0.5 * z1 * z1) / math.sqrt(2 * PI), 0, np.inf,
                         epsabs=1e-14)[0]
    assert float(A.get("relu").kernel(2.0, c)) == pytest.approx(2.0 * ref, abs=1e-12)
    ref_g = integrate.quad(lambda z1: special.ndtr(c * z1 / s) * math.exp(-0.5 * z1 * z1) / math.sqrt(2 * PI),
                           0, np.inf, epsabs=1e-14)[0]
    assert float(A.get("relu").grad_kernel(2.0, c)) == pytest.approx(ref_g, abs=1e-12)


def test_relu_normalised_map_oracles():
    """C(c) = (sqrt(1-c^2) + (pi - arccos c) c)/pi: C(0) = 1/pi, C(1) = 1, C'(1) = 1 (docs/theory.md section 3)."""
    k = lambda c: A.relu_kernel_unit(c) / 0.5
    assert float(k(0.0)) == pytest.approx(1 / PI, abs=1e-15)
    assert float(k(1.0)) == pytest.approx(1.0, abs=1e-15)
    assert float(A.relu_grad_kernel(1.0)) / 0.5 == pytest.approx(1.0, abs=1e-15)


def test_gaussian_max_identities_and_relu_maxpool_closed_form():
    """E[max] = 1/sqrt(pi), E[relu(max)^2] = 3/4 + 1/(2 pi), K(0) = E[relu(max)]^2, K(-1) = 1/pi, K(1) = m2."""
    rm = A.get("relu+maxpool")
    x, w = np.polynomial.hermite_e.hermegauss(200)
    w = w / math.sqrt(2 * PI)
    # E[max(z1, z2)] = E[2 z Phi(z)] (density of the max: 2 phi Phi), smooth: Gauss-Hermite
    assert float(w @ (2 * x * special.ndtr(x))) == pytest.approx(1 / math.sqrt(PI), abs=1e-14)
    assert float(rm.second_moment(1.0)) == pytest.approx(0.75 + 0.5 / PI, abs=1e-15)
    m1 = integrate.quad(lambda s: 1 - special.ndtr(s) ** 2, 0, np.inf, epsabs=1e-14)[0]
    assert float(rm.mean(1.0)) == pytest.approx(m1, abs=1e-12)
    assert float(rm.kernel(1.0, 0.0)) == pytest.approx(m1 ** 2, abs=1e-12)
    assert float(rm.kernel(1.0, -1.0)) == pytest.approx(1 / PI, abs=1e-12)
    assert float(rm.kernel(1.0, 1.0)) == pytest.approx(0.75 + 0.5 / PI, abs=1e-15)
    assert float(rm.grad_kernel(1.0, 1.0)) == 0.75 and float(rm.grad_kernel(1.0, -1.0)) == pytest.approx(0, abs=1e-15)


@pytest.mark.parametrize("name", ["relu+maxpool", "tanh+maxpool", "relu+avgpool", "tanh+avgpool"])
def test_pooled_kernels_match_monte_carlo(name):
    act = A.get(name)
    for q, c in ((0.7, 0.3), (3.0, 0.85), (1.5, -0.4)):
        ha, hb = _mc_pairs(q, c, 2, seed=int(q * 10), nodes=400_000)
        pa, pb = np.asarray(act.psi(jnp.asarray(ha))), np.asarray(act.psi(jnp.asarray(hb)))
        prod = pa * pb
        se = prod.std() / math.sqrt(prod.size)
        assert abs(float(act.kernel(q, c)) - prod.mean()) < 5 * se, (q, c)
        assert abs(float(act.mean(q)) - pa.mean()) < 5 * pa.std() / math.sqrt(pa.size)


@pytest.mark.parametrize("name", ["relu+maxpool", "tanh+maxpool"])
def test_maxpool_grad_kernel_matches_monte_carlo(name):
    """E<grad psi_a, grad psi_b>: the derivative of the max routed to the arg-max node of each input."""
    act = A.get(name)
    dphi = (lambda u: (u > 0).astype(float)) if name.startswith("relu") else (lambda u: 1 - np.tanh(u) ** 2)
    q, c = 1.3, 0.6
    ha, hb = _mc_pairs(q, c, 2, seed=5, nodes=400_000)
    ia, ib = ha.argmax(-1), hb.argmax(-1)
    take = lambda h, i: np.take_along_axis(h, i[:, None], -1)[:, 0]
    v = dphi(take(ha, ia)) * dphi(take(hb, ib)) * (ia == ib)
    assert abs(float(act.grad_kernel(q, c)) - v.mean()) < 5 * v.std() / math.sqrt(v.size)


@pytest.mark.parametrize("name", ["tanh", "erf", "relu", "relu+maxpool", "relu+avgpool", "tanh+maxpool", "tanh+avgpool"])
def test_price_theorem_links_kernel_and_grad_kernel(name):
    """d K / d c = q G(q, c) (Price), and K(q, 1) = E psi^2, G(q, 1) = E|grad psi|^2."""
    act = A.get(name)
    q = 1.7
    for c in (0.0, 0.5, 0.9):
        dk = jax.grad(lambda cc: act.kernel(q, cc))(c)
        assert float(dk) == pytest.approx(q * float(act.grad_kernel(q, c)), rel=1e-9, abs=1e-12)
    assert float(act.kernel(q, 1.0)) == pytest.approx(float(act.second_moment(q)), rel=1e-13)
    assert float(act.grad_kernel(q, 1.0)) == pytest.approx(float(act.grad_moment(q)), rel=1e-11)


def test_tanh_pooling_reductions():
    """Avg pool halves tanh's expectations; max pool keeps its even moments (docs/theory.md section 3)."""
    t, ta, tm = A.get("tanh"), A.get("tanh+avgpool"), A.get("tanh+maxpool")
    q, c = 0.9, 0.4
    assert float(ta.kernel(q, c)) == pytest.approx(0.5 * float(t.kernel(q, c)), rel=1e-15)
    assert float(tm.second_moment(q)) == pytest.approx(_gauss_1d(lambda u: math.tanh(u) ** 2, q), abs=1e-9)
    assert float(tm.grad_moment(q)) == float(t.grad_moment(q))
    assert float(tm.mean(q)) > 0.1   # the non-zero mean that removes the neutral region


@pytest.mark.parametrize("name", ["gelu", "silu"])
def test_quadrature_activations_match_scipy(name):
    act = A.get(name)
    phi = {"gelu": lambda u: u * special.ndtr(u), "silu": lambda u: u * special.expit(u)}[name]
    for q in (0.3, 2.0):
        assert float(act.second_moment(q)) == pytest.approx(_gauss_1d(lambda u: phi(u) ** 2, q), rel=1e-10)
        assert float(act.mean(q)) == pytest.approx(_gauss_1d(phi, q), rel=1e-10)
    ha, hb = _mc_pairs(1.0, 0.5, 1, seed=3, nodes=1_000_000)
    prod = phi(ha) * phi(hb)
    assert abs(float(act.kernel(1.0, 0.5)) - prod.mean()) < 5 * prod.std() / 1000


def test_unknown_activation_is_rejected():
    with pytest.raises(ValueError, match="unknown activation"):
        A.get("sigmoid")
