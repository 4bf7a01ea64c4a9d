"""Initial Guessing Bias: gamma <-> c, estimators, f_max distributions (docs/theory.md section 5)."""
import math

import jax
import numpy as np
import pytest
from scipy import integrate, special

from theory import igb


def test_gamma_and_c_are_inverse_maps():
    c = np.array([0.0, 0.2, 0.5, 0.9, 1.0])
    g = np.asarray(igb.gamma_from_c(c))
    np.testing.assert_allclose(g[:4], c[:4] / (1 - c[:4]), rtol=1e-15)
    assert g[2] == 1.0 and np.isinf(g[4])
    np.testing.assert_allclose(igb.c_from_gamma(g), c, rtol=1e-15)


def _network_with_imbalance(gamma, n_nodes, n_inputs, seed):
    """h_ia = mu_i + y_ia with Var(mu) = gamma, Var(y) = 1: pre-activations of a known imbalance."""
    rng = np.random.default_rng(seed)
    return math.sqrt(gamma) * rng.standard_normal((n_nodes, 1)) + rng.standard_normal((n_nodes, n_inputs))


def test_estimate_bias_corrected_gamma_is_exact_in_c_and_naive_is_inflated():
    h = _network_with_imbalance(0.5, n_nodes=20_000, n_inputs=10, seed=0)
    est = {k: float(v) for k, v in igb.estimate(h).items()}
    g = h.T @ h / h.shape[0]
    q, p = np.trace(g) / 10, (g.sum() - np.trace(g)) / 90
    assert est["c"] == pytest.approx(p / q, rel=1e-12)
    assert est["gamma_corr"] / (1 + est["gamma_corr"]) == pytest.approx(est["c"], rel=1e-12)
    assert est["gamma_corr"] == pytest.approx(0.5, rel=0.05)
    # naive: inflated by about (1 + gamma) / (n - 1) with n = 10 inputs
    assert est["gamma"] - est["gamma_corr"] == pytest.approx(1.5 / 9, rel=0.1)
    with pytest.raises(ValueError):
        igb.estimate(np.ones(5))


def test_gamma_corr_is_uncentred_and_a_common_offset_does_not_cancel():
    """gamma_corr ~ (sigma_mu2 + m^2) / sigma_y2: an offset m = 2 at gamma = 1 gives 5, the naive gamma ~ 1."""
    h = _network_with_imbalance(1.0, n_nodes=40_000, n_inputs=20, seed=1)
    base = {k: float(v) for k, v in igb.estimate(h).items()}
    shifted = {k: float(v) for k, v in igb.estimate(h + 2.0).items()}
    assert base["gamma_corr"] == pytest.approx(1.0, rel=0.05)
    assert shifted["gamma_corr"] == pytest.approx(5.0, rel=0.05)
    assert shifted["gamma"] == pytest.approx(base["gamma"], rel=1e-9)      # centred: offset-free
    assert shifted["gamma"] == pytest.approx(1.0 + 2.0 / 19, rel=0.05)     # inflated by (1 + gamma)/(n - 1)


def test_binary_fmax_mean_and_uniform_g0_density_at_gamma_one():
    assert float(igb.fmax_mean(1.0, 2)) == pytest.approx(0.75, abs=1e-15)
    np.testing.assert_allclose(igb.fmax_mean(np.array([0.0, 1e12]), 2), [0.5, 1.0], atol=1e-6)
    g = np.linspace(0.01, 0.99, 99)
    np.testing.assert_allclose(igb.g0_density(g, 1.0), 1.0, atol=1e-14)
    # G0 = Phi(sqrt(gamma) delta): density(Phi(x)) phi(x) must be the N(0, gamma) density of x
    x = np.linspace(-6, 3, 181)          # x > 3: 1 - Phi(x) loses digits in float64
    for gamma in (0.3, 4.0):
        lhs = np.asarray(igb.g0_density(special.ndtr(x), gamma)) * np.exp(-x * x / 2)
        np.testing.assert_allclose(lhs, np.exp(-x * x / (2 * gamma)) / math.sqrt(gamma), rtol=1e-9)
        # U-shaped for gamma > 1 (prejudice), peaked at 1/2 for gamma < 1
        assert (float(igb.g0_density(0.5, gamma)) < float(igb.g0_density(0.05, gamma))) == (gamma > 1)


@pytest.mark.parametrize("gamma", [0.25, 1.0, 4.0])
def test_fmax_samples_agree_with_fmax_mean_binary(gamma):
    s = np.asarray(igb.fmax_samples(jax.random.key(1), gamma, 2, 40_000))
    assert s.shape == (40_000,) and (s >= 0.5).all() and (s <= 1).all()
    assert s.mean() == pytest.approx(float(igb.fmax_mean(gamma, 2)), abs=4 * s.std() / 200)


def test_n_class_mean_reduces_to_the_binary_law_and_limits():
    """The n-class quadrature at n = 2 equals the closed form; gamma = 0 gives 1/n; gamma -> inf gives 1."""
    with jax.enable_x64(True):
        for gamma in (0.05, 1.0, 30.0):
            assert 1 - float(igb._fmax_gap(np.float64(gamma), 2)) == pytest.approx(
                float(igb.fmax_binary_mean(gamma)), abs=1e-13)
    np.testing.assert_allclose(igb.fmax_mean(np.array([0.0, 0.0]), 5), 0.2, atol=1e-13)
    assert float(igb.fmax_mean(1e4, 3)) > 0.99
    means = np.asarray(igb.fmax_mean(np.array([0.5, 2.0, 8.0]), 3))
    assert (np.diff(means) > 0).all()


@pytest.mark.parametrize("n_classes", [3, 10])
def test_fmax_samples_agree_with_fmax_mean_n_classes(n_classes):
    for gamma in (0.5, 4.0):
        s = np.asarray(igb.fmax_samples(jax.random.key(n_classes), gamma, n_classes, 8_000))
        assert 1 / n_classes < s.min() and s.max() <= 1
        assert s.mean() == pytest.approx(float(igb.fmax_mean(gamma, n_classes)), abs=4 * s.std() / math.sqrt(8_000))
    # the top class's fraction is the largest of the n-class formula's fractions
    z = jax.random.normal(jax.random.key(0), (4, n_classes))
    with jax.enable_x64(True):
        for zz in np.asarray(z, np.float64):
            full = np.asarray(igb._class_fractions(zz, 2.0))
            assert float(igb._top_fraction(zz, 2.0)) == pytest.approx(full.max(), abs=1e-14)
            assert full.sum() == pytest.approx(1.0, abs=1e-10)


# --------------------------------------------------------------------------- n-class f_max at any gamma
def _owen_bvn(h, k, r):
    """P(X <= h, Y <= k), unit normals with correlation r, by Owen's T (scipy.special.owens_t)."""
    h, k = (x if x != 0 else 1e-300 for x in (h, k))
    s = math.sqrt((1 - r) * (1 + r))
    beta = 0.0 if h * k > 0 else 0.5
    return (0.5 * special.ndtr(h) + 0.5 * special.ndtr(k) - special.owens_t(h, (k - r * h) / (h * s))
            - special.owens_t(k, (h - r * k) / (k * s)) - beta)


def _fmax_gap_reference(gamma, n):
    """1 - E f_max from the defining formula: E f_max = n E_{z, xi}[g^(n-1)] with
    g = P(U < z, e < xi + sqrt(gamma)(z - U)) = Phi2(z, (xi + sqrt(gamma) z)/sqrt(1 + gamma); sqrt(gamma/(1 + gamma)))
    by Owen's T, the 2-D average by scipy dblquad, written as n E[Phi(z)^(n-1) - g^(n-1)] (n E Phi^(n-1) = 1)."""
    rho = math.sqrt(gamma / (1 + gamma))

    def integrand(xi, z):
        p = special.ndtr(z)
        g = _owen_bvn(z, (xi + math.sqrt(gamma) * z) / math.sqrt(1 + gamma), rho)
        e = p - g
        return n * e * sum(p ** (n - 2 - k) * g ** k for k in range(n - 1)) * math.exp(-0.5 * (xi * xi + z * z)) / (2 * math.pi)
    return integrate.dblquad(integrand, -12, 12, -12, 12, epsabs=1e-15, epsrel=1e-10)[0]


@pytest.mark.parametrize("gamma", [0.05, 1.0, 1e6, 1e8])
def test_ten_class_fmax_gap_matches_an_owen_t_integration(gamma):
    """1 - f_max to 1e-8 relative (the old quadrature was 12 % off at 1e6 and 27 % at 1e8)."""
    gap = 1 - float(np.asarray(igb.fmax_mean(gamma, 10)))
    assert gap == pytest.approx(_fmax_gap_reference(gamma, 10), rel=1e-8)


def test_ten_class_fmax_large_gamma_law_and_deep_prejudice():
    """1 - f_max ~ C / sqrt(gamma), C = n (n - 1) E[phi(z) Phi(z)^(n-2)] / sqrt(pi) = 0.868148 (n = 10);
    gamma = inf is deep prejudice: f_max = 1 exactly (was nan)."""
    e = integrate.quad(lambda z: math.exp(-z * z) / (2 * math.pi) * special.ndtr(z) ** 8, -np.inf, np.inf,
                       epsabs=1e-15)[0]
    c_10 = 90 * e / math.sqrt(math.pi)
    assert c_10 == pytest.approx(0.868148, abs=5e-7)
    gamma = np.array([1e10, 1e12, np.inf])
    with jax.enable_x64(True):
        gap = 1 - igb.fmax_mean(gamma, 10)
        binary_gap = 1 - igb.fmax_mean(gamma, 2)
    gap, binary_gap = np.asarray(gap), np.asarray(binary_gap)
    # relative correction ~ -0.215 / sqrt(gamma)
    assert gap[0] * 1e5 == pytest.approx(c_10, rel=3e-6) and gap[1] * 1e6 == pytest.approx(c_10, rel=3e-7)
    assert gap[2] == 0.0 and binary_gap[2] == 0.0
    assert float(igb.fmax_mean(np.inf, 3)) == 1.0
    assert float(igb.fmax_mean(0.0, 3)) == 1 / 3 and float(igb.fmax_mean(0.0, 2)) == 0.5


def test_ten_class_fmax_is_one_tenth_at_gamma_zero_and_grows_like_sqrt_gamma():
    """gamma = 0: 1/n exactly (the gap quadrature alone gives 0.1 + 2.2e-9). Small gamma: d f_c / d sqrt(gamma)
    = n (Z_c - mean Z) E[phi(xi) Phi(xi)^(n-2)], so E f_max - 1/n ~ n E[max Z] E[phi Phi^(n-2)] sqrt(gamma)."""
    n = 10
    phi = lambda x: math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
    e_max = integrate.quad(lambda x: n * x * phi(x) * special.ndtr(x) ** (n - 1), -np.inf, np.inf, epsabs=1e-14)[0]
    a = integrate.quad(lambda x: phi(x) ** 2 * special.ndtr(x) ** (n - 2), -np.inf, np.inf, epsabs=1e-14)[0]
    means = np.asarray(igb.fmax_mean(np.array([0.0, 1e-10, 1e-8]), n))
    assert means[0] == 0.1
    np.testing.assert_allclose((means[1:] - 0.1) / np.sqrt([1e-10, 1e-8]), n * e_max * a, rtol=2e-4)   # 0.26308


@pytest.mark.parametrize("gamma", [0.3, 1e6, 1e8])
def test_n_class_quadrature_at_two_classes_equals_the_closed_form(gamma):
    """The n-class gap computation at n = 2 against 1/2 - arctan(sqrt(gamma))/pi, relatively."""
    with jax.enable_x64(True):
        gap = float(igb._fmax_gap(np.float64(gamma), 2))
    assert gap == pytest.approx(0.5 - math.atan(math.sqrt(gamma)) / math.pi, rel=1e-9)
