"""Mean-field maps, fixed points, edge of chaos, neutrality line, propagation vs wide networks at init."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import integrate, optimize

from theory import activations, meanfield as mf

PI = math.pi


def _gauss_1d(f, q):
    return integrate.quad(lambda z: f(math.sqrt(q) * z) * math.exp(-0.5 * z * z) / math.sqrt(2 * PI),
                          -np.inf, np.inf, epsabs=1e-15, epsrel=1e-14, limit=400)[0]


def test_x64_stays_scoped_to_theory():
    mf.fixed_point(2.0, 0.1, "tanh")
    mf.propagate(2.0, 0.1, "relu", 5)
    assert jnp.zeros(1).dtype == jnp.float32
    assert not jax.config.jax_enable_x64
    q, c = mf.fixed_point(2.0, 0.1, "tanh")
    assert isinstance(q, jax.Array) and q.dtype == jnp.float64      # jax arrays out, float64 kept
    assert np.asarray(q).dtype == np.float64


def test_tanh_eoc_matches_scipy_quad_to_1e8():
    """chi_1 = 1 and q = V(q)/D(q) + sigma_b2 solved with scipy quad + brentq inside the test."""
    for sb in (0.05, 0.3):
        v = lambda q: _gauss_1d(lambda u: math.tanh(u) ** 2, q)
        d = lambda q: _gauss_1d(lambda u: (1 - math.tanh(u) ** 2) ** 2, q)
        q_ref = optimize.brentq(lambda q: sb + v(q) / d(q) - q, sb + 1e-6, 50.0, xtol=1e-14, rtol=1e-14)
        assert float(mf.eoc(sb, "tanh")) == pytest.approx(1.0 / d(q_ref), abs=1e-8)
        assert float(mf.fixed_point(1.0 / d(q_ref), sb, "tanh")[0]) == pytest.approx(q_ref, abs=1e-8)


def test_eoc_oracles():
    sb = np.array([0.0, 0.05, 0.1])
    tanh = np.asarray(mf.eoc(sb, "tanh"))
    np.testing.assert_allclose(tanh[1:], [1.760955, 1.986073], atol=5e-7)           # docs/theory.md section 4
    np.testing.assert_allclose(mf.fixed_point(tanh[1:], sb[1:], "tanh")[0], [0.570048, 0.805799], atol=5e-7)
    assert tanh[0] == 1.0                            # q* = 0: 1/tanh'(0)^2 exactly, not the expansion's 1 + 4.1e-9
    assert float(mf.neutrality_line(0.0, "tanh")) == 1.0
    assert float(mf.eoc(0.0, "tanh+avgpool")) == 2.0 and float(mf.eoc(0.0, "tanh+maxpool")) == 1.0
    # chi_1 there comes from the expansion: 1 - 4.1e-9, its |e'(0)| = 2.0e-9 squared into tanh'(0)^2
    assert float(mf.chi1(1.0, 0.0, "tanh")) == pytest.approx(1.0 - 4.1e-9, abs=1e-10)
    assert float(mf.eoc(0.0, "erf")) == pytest.approx(PI / 4, abs=1e-12)
    np.testing.assert_allclose(mf.eoc(sb, "relu"), 2.0, rtol=1e-14)
    np.testing.assert_allclose(mf.eoc(sb, "relu", "gradient"), 2.0, rtol=1e-14)
    np.testing.assert_allclose(mf.eoc(sb, "linear"), 1.0, rtol=1e-14)
    np.testing.assert_allclose(mf.eoc(sb, "relu+maxpool"), 4 * PI / (3 * PI + 2), rtol=1e-14)
    np.testing.assert_allclose(mf.eoc(sb, "relu+maxpool", "gradient"), 4 / 3, rtol=1e-14)
    np.testing.assert_allclose(mf.eoc(sb, "relu+avgpool"), 4 * PI / (PI + 1), rtol=1e-14)
    np.testing.assert_allclose(mf.eoc(sb, "relu+avgpool", "gradient"), 4.0, rtol=1e-14)
    np.testing.assert_allclose(mf.eoc(sb, "tanh+avgpool"), 2 * tanh, rtol=1e-10)
    np.testing.assert_allclose(mf.eoc(sb, "tanh+avgpool", "gradient"), 2 * tanh, rtol=1e-10)


@pytest.mark.parametrize("act", ["tanh", "erf", "tanh+avgpool"])
def test_eoc_gives_chi1_one(act):
    sb = np.array([0.01, 0.05, 0.3, 1.0])
    sw = mf.eoc(sb, act)
    np.testing.assert_allclose(mf.chi1(sw, sb, act), 1.0, atol=1e-10)
    # and it is a crossing: ordered just left, chaotic just right
    assert (mf.chi1(sw * 0.99, sb, act) < 1).all() and (mf.chi1(sw * 1.01, sb, act) > 1).all()


def test_forward_and_gradient_criteria_for_pooled_relu():
    for act in ("relu+maxpool", "relu+avgpool"):
        for crit in ("forward", "gradient"):
            sw = mf.eoc(0.1, act, crit)
            assert float(mf.criticality(sw, 0.1, act, crit)) == pytest.approx(1.0, abs=1e-14)
    assert float(mf.chi1_tilde(2.0, 0.0, "relu")) == float(mf.chi1(2.0, 0.0, "relu")) == 1.0
    with pytest.raises(ValueError, match="criterion"):
        mf.eoc(0.1, "relu", "backward")


@pytest.mark.parametrize("act,points", [
    ("tanh", [(1.2, 0.05), (1.760955, 0.05), (3.0, 0.1), (5.0, 0.5), (2.5, 0.0)]),
    ("erf", [(0.6, 0.1), (2.0, 0.2)]),
    ("tanh+maxpool", [(1.5, 0.1), (3.0, 0.1)]),
    ("tanh+avgpool", [(3.0, 0.05), (6.0, 0.2)]),
    ("relu", [(1.5, 0.1), (1.9, 0.3)]),
    ("relu+maxpool", [(0.9, 0.2)]),
])
def test_fixed_points_satisfy_their_equations(act, points):
    sw, sb = np.array(points).T
    q, c = mf.fixed_point(sw, sb, act)
    assert np.isfinite(q).all()
    np.testing.assert_allclose(mf.q_map(q, sw, sb, act), q, atol=1e-12 * (1 + q.max()), rtol=0)
    np.testing.assert_allclose(mf.c_map(c, q, sw, sb, act), c, atol=1e-12, rtol=0)
    # stability decides c* = 1 exactly: chi_1 <= 1 (ordered, EOC) <=> c* = 1 for bounded psi
    chi = mf.chi1(sw, sb, act)
    bounded = activations.get(act).bounded
    np.testing.assert_array_equal(c == 1.0, (chi <= 1.0) | (not bounded))
    assert (c[chi > 1] < 1).all() if bounded else True


def test_c_star_is_exactly_one_where_approach_is_algebraic():
    """At the EOC the approach to c = 1 is algebraic: iterating stops short, the solver must not."""
    _, c_relu = mf.propagate(2.0, 0.0, "relu", 200)
    assert c_relu[-1] < 0.9999
    assert float(mf.fixed_point(2.0, 0.0, "relu")[1]) == 1.0
    sw = float(mf.eoc(0.1, "tanh"))
    _, c_tanh = mf.propagate(sw, 0.1, "tanh", 200)
    assert c_tanh[-1] < 0.9999
    assert float(mf.fixed_point(sw * (1 - 1e-9), 0.1, "tanh")[1]) == 1.0


def test_relu_oracles_and_unbounded_q_star():
    """c2, c5, c10 from c1 = 0 at sigma_b2 = 0 (docs/theory.md section 3); q* = sigma_b2/(1 - sigma_w2/2) or inf."""
    q, c = map(np.asarray, mf.propagate(2.0, 0.0, "relu", 10))
    np.testing.assert_allclose(c[[1, 4, 9]], [0.3183099, 0.6809535, 0.8548092], atol=5e-8)
    np.testing.assert_allclose(q, 2.0, rtol=1e-14)
    q_star = np.asarray(mf.fixed_point(np.array([1.0, 1.5, 2.0, 3.0]), 0.2, "relu")[0])
    np.testing.assert_allclose(q_star[:2], [0.2 / 0.5, 0.2 / 0.25], rtol=1e-14)
    assert np.isinf(q_star[2:]).all()
    # 1 - c_l ~ 9 pi^2 / (2 l^2) at the ReLU EOC (approached from below, like 1 - O(1/l))
    c = np.asarray(mf.propagate(2.0, 0.0, "relu", 1600)[1])
    layers = np.array([100, 400, 1600])
    ratio = (1 - c[layers - 1]) * layers ** 2 / (9 * PI ** 2 / 2)
    assert ratio[-1] == pytest.approx(1.0, rel=0.03) and (np.diff(ratio) > 0).all()


def test_propagate_conventions_and_broadcasting():
    q, c = mf.propagate(np.array([1.5, 2.5]), 0.1, "tanh", 6, q0=1.0, c0=0.0)
    assert q.shape == c.shape == (2, 6)
    np.testing.assert_allclose(q[:, 0], [1.6, 2.6], rtol=1e-15)                       # layer 1 linear
    np.testing.assert_allclose(c[:, 0], [0.1 / 1.6, 0.1 / 2.6], rtol=1e-15)
    np.testing.assert_allclose(q[:, 1], mf.q_map(q[:, 0], [1.5, 2.5], 0.1, "tanh"), rtol=1e-14)
    np.testing.assert_allclose(c[:, 1], mf.c_map(c[:, 0], q[:, 0], [1.5, 2.5], 0.1, "tanh"), rtol=1e-14)
    q1, c1 = mf.propagate(1.5, 0.1, "tanh", 6, q0=2.0, c0=0.5)
    assert q1[0] == pytest.approx(3.1) and c1[0] == pytest.approx((1.5 * 0.5 * 2.0 + 0.1) / 3.1)
    with pytest.raises(ValueError):
        mf.propagate(1.0, 0.1, "tanh", 0)


def test_neutrality_line_gives_c_star_one_half():
    sb = np.array([0.05, 0.1, 0.3, 0.8])
    for act in ("tanh", "tanh+avgpool"):
        sw = mf.neutrality_line(sb, act)
        assert np.isfinite(sw).all() and (sw > mf.eoc(sb, act)).all()
        np.testing.assert_allclose(mf.fixed_point(sw, sb, act)[1], 0.5, atol=1e-8)
    assert np.isnan(mf.neutrality_line(sb, "relu")).all()
    assert float(mf.neutrality_line(0.0, "tanh")) == pytest.approx(float(mf.eoc(0.0, "tanh")), abs=1e-14)  # (1, 0)
    # Tanh + MaxPool: c* stays above 1/2 over any practical range (a boundary exists only at sigma_w2 ~ 39)
    assert (mf.neutrality_line(sb[:2], "tanh+maxpool") > 30).all()
    assert (mf.fixed_point(np.full(4, 8.0), sb, "tanh+maxpool")[1] > 0.5).all()


def test_depth_scales_and_backward_factor():
    xi_q, xi_c = mf.depth_scales(np.array([1.2, 1.9, 3.0]), 0.1, "tanh")
    chi = mf.chi1(np.array([1.2, 1.9, 3.0]), 0.1, "tanh")
    assert xi_c[0] == pytest.approx(-1 / math.log(chi[0]), rel=1e-12)               # c* = 1: chi_c = chi_1
    assert np.isfinite(xi_q).all() and (xi_c[1:] > 0).all()
    assert float(mf.depth_scales(float(mf.eoc(0.1, "tanh")), 0.1, "tanh")[1]) > 1e6   # diverges at the EOC
    q_star = mf.fixed_point(1.9, 0.1, "tanh")[0]
    assert float(mf.backward_factor(q_star, 1.9, "tanh")) == pytest.approx(float(mf.chi1(1.9, 0.1, "tanh")), rel=1e-14)
    assert float(mf.backward_factor(7.0, 1.5, "relu+maxpool")) == pytest.approx(1.5 * 0.75, rel=1e-15)


# --------------------------------------------------------------------------- wide networks at init
def _wide_network_moments(act, sigma_w2, sigma_b2, depth, width, n_inputs, n_nets, seed):
    """Q = mean_a G_aa, P = mean_{a != b} G_ab per layer, averaged over `n_nets` networks of `width` units.

    docs/theory.md convention: W ~ N(0, sigma_w2 / fan_in), b ~ N(0, sigma_b2), inputs orthogonal with
    |x|^2/d = 1; pooled activations see k * width pre-activations. W_l a is drawn row by row from its
    exact law N(0, sigma_w2 a^T a / fan_in) (the rows of W_l are iid), identical to drawing W_l.
    """
    info = activations.get(act)
    rng = np.random.default_rng(seed)
    m = info.nodes * width
    q_sum, p_sum = np.zeros(depth), np.zeros(depth)
    with jax.enable_x64(True):
        for _ in range(n_nets):
            gram = np.eye(n_inputs)   # a^T a / fan_in of the inputs
            for layer in range(depth):
                chol = np.linalg.cholesky(sigma_w2 * gram + 1e-14 * np.eye(n_inputs))
                h = rng.standard_normal((m, n_inputs)) @ chol.T + math.sqrt(sigma_b2) * rng.standard_normal((m, 1))
                g = h.T @ h / m
                q_sum[layer] += np.trace(g) / n_inputs
                p_sum[layer] += (g.sum() - np.trace(g)) / (n_inputs * (n_inputs - 1))
                a = np.asarray(info.psi(jnp.asarray(h.T)))          # (inputs, width)
                gram = a @ a.T / width
    return q_sum / n_nets, p_sum / n_nets


@pytest.mark.parametrize("act,sw,sb", [
    ("tanh", 2.5, 0.5), ("relu", 2.0, 0.2), ("relu+maxpool", 1.5, 0.2), ("relu+avgpool", 3.5, 0.2),
    ("tanh+maxpool", 2.5, 0.3), ("tanh+avgpool", 5.0, 0.3)])
def test_wide_networks_reproduce_c_and_gamma_per_layer(act, sw, sb):
    depth = 6
    q_th, c_th = mf.propagate(sw, sb, act, depth)
    q, p = _wide_network_moments(act, sw, sb, depth, width=1000, n_inputs=8, n_nets=48, seed=7)
    np.testing.assert_allclose(q, q_th, rtol=0.05)
    np.testing.assert_allclose(p / q, c_th, rtol=0.05)                      # c per layer
    np.testing.assert_allclose(p / (q - p), c_th / (1 - c_th), rtol=0.05)   # gamma_corr per layer


def test_chi1_tilde_is_the_slope_of_the_length_map_for_homogeneous_psi():
    """chi_1~ = dq'/dq (q' linear in q for the ReLU family): a finite difference of the public q_map;
    for pooled ReLU it is not the gradient criterion chi_1 = sigma_w2 E|grad psi|^2."""
    for act, moment in (("relu", 0.5), ("relu+maxpool", 0.75 + 0.5 / PI), ("relu+avgpool", 0.25 + 0.25 / PI)):
        sw, sb, q, h = 1.3, 0.2, 2.0, 1e-3
        slope = (float(mf.q_map(q + h, sw, sb, act)) - float(mf.q_map(q - h, sw, sb, act))) / (2 * h)
        assert float(mf.chi1_tilde(sw, sb, act)) == pytest.approx(slope, rel=1e-10)
        assert float(mf.chi1_tilde(sw, sb, act)) == pytest.approx(sw * moment, rel=1e-14)
    assert float(mf.chi1_tilde(1.3, 0.2, "relu+maxpool")) != pytest.approx(float(mf.chi1(1.3, 0.2, "relu+maxpool")))
    np.testing.assert_array_equal(np.asarray(mf.chi1_tilde(SW_GRID, 0.1, "tanh")), np.asarray(mf.chi1(SW_GRID, 0.1, "tanh")))


SW_GRID = np.array([0.5, 1.5, 3.0])


def test_tanh_maxpool_neutrality_line_is_finite_far_out():
    """The values the neutrality_line docstring states, and c* = 1/2 there."""
    sb = np.array([0.0, 0.1, 0.5, 1.0])
    sw = np.asarray(mf.neutrality_line(sb, "tanh+maxpool"))
    np.testing.assert_allclose(sw, [37.6, 39.7, 47.3, 56.1], atol=0.06)
    np.testing.assert_allclose(np.asarray(mf.fixed_point(sw, sb, "tanh+maxpool")[1]), 0.5, atol=1e-8)
    assert np.isnan(np.asarray(mf.neutrality_line(sb, "gelu"))).all()
    assert np.isnan(np.asarray(mf.neutrality_line(sb, "silu"))).all()


@pytest.mark.parametrize("act", ["gelu", "silu"])
def test_unbounded_smooth_fixed_points(act):
    """sigma_b2 = 0, ordered: q* = 0 and c* = 1 (psi is linear on the vanishing scale); chaotic: q* = inf,
    chi_1 = sigma_w2 / 2 (the ReLU limit); ordered with bias: finite q* solving the length map."""
    q, c = (np.asarray(x) for x in mf.fixed_point(np.array([0.3, 1.8, 3.0, 1.0]), np.array([0.0, 0.0, 0.1, 0.1]), act))
    assert (q[:2] < 1e-30).all()
    np.testing.assert_array_equal(c, 1.0)
    assert np.isinf(q[2]) and float(mf.chi1(3.0, 0.1, act)) == 1.5
    assert float(mf.q_map(q[3], 1.0, 0.1, act)) == pytest.approx(q[3], rel=1e-12) and 0 < q[3] < 1
