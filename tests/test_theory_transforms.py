"""The theory under jax.jit and jax.grad: jit == eager for every public function, gradients == central
finite differences, no nan where c reaches 1 exactly, float64 never switched on globally."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from theory import igb, meanfield as mf, phase

SW, SB = np.array([1.2, 3.0]), np.array([0.1, 0.3])
# (function, positional args, keyword args, static argument names)
PUBLIC = {
    "q_map": (mf.q_map, (np.array([0.5, 4.0]), SW, SB, "tanh"), {}, ("act",)),
    "c_map": (mf.c_map, (np.array([0.2, 0.9]), np.array([0.5, 40.0]), SW, SB, "gelu"), {}, ("act",)),
    "propagate": (mf.propagate, (SW, SB, "silu", 12), {"q0": 2.0, "c0": 0.3}, ("act", "depth")),
    # relu+maxpool, a closed form: tanh+maxpool's 1-D integral costs 5 s of compile here for the same code path;
    # its fixed point is checked in test_theory_meanfield and its propagate under jit and grad below.
    "fixed_point": (mf.fixed_point, (SW, SB, "relu+maxpool"), {}, ("act",)),
    "chi1": (mf.chi1, (SW, SB, "gelu"), {}, ("act",)),
    "chi1_tilde": (mf.chi1_tilde, (SW, SB, "relu+maxpool"), {}, ("act",)),
    "criticality": (mf.criticality, (SW, SB, "relu+avgpool", "gradient"), {}, ("act", "criterion")),
    "backward_factor": (mf.backward_factor, (np.array([0.5, 4.0]), SW, "erf"), {}, ("act",)),
    "backward_product": (mf.backward_product, (SW, SB, "tanh", 9), {"q0": 1.5}, ("act", "depth")),
    "eoc": (mf.eoc, (SB, "tanh"), {"criterion": "forward"}, ("act", "criterion")),
    "neutrality_line": (mf.neutrality_line, (SB, "tanh"), {}, ("act",)),
    "depth_scales": (mf.depth_scales, (SW, SB, "tanh"), {}, ("act",)),
    "gamma_from_c": (igb.gamma_from_c, (np.array([0.1, 0.5, 1.0]),), {}, ()),
    "c_from_gamma": (igb.c_from_gamma, (np.array([0.1, 1.0, np.inf]),), {}, ()),
    "g0_density": (igb.g0_density, (np.array([0.1, 0.5]), 3.0), {}, ()),
    "fmax_binary_mean": (igb.fmax_binary_mean, (np.array([0.3, 30.0]),), {}, ()),
    "fmax_mean": (igb.fmax_mean, (np.array([0.3, 30.0, 1e8]), 10), {}, ("n_classes",)),
    "estimate": (igb.estimate, (np.random.default_rng(0).standard_normal((50, 6)) + 0.5,), {}, ()),
    "classify": (phase.classify, (np.array([0.5, 1.5]), np.array([1.0, 0.3])), {}, ()),
    "phase_diagram": (phase.phase_diagram, ("tanh", SW, SB, 6), {}, ("act", "depth", "eoc_tol", "criterion")),
}


@pytest.mark.parametrize("name", list(PUBLIC))
def test_jit_equals_eager(name):
    fn, args, kwargs, static = PUBLIC[name]
    with jax.enable_x64(True):          # inputs traced as float64, so both see the same digits
        eager = fn(*args, **kwargs)
        jitted = jax.jit(fn, static_argnames=static)(*args, **kwargs)
    leaves_e, leaves_j = jax.tree.leaves(eager), jax.tree.leaves(jitted)
    assert len(leaves_e) == len(leaves_j) > 0
    for e, j in zip(leaves_e, leaves_j):
        assert isinstance(e, jax.Array) and isinstance(j, jax.Array)
        assert e.dtype == j.dtype and e.dtype in (jnp.float64, jnp.int32)
        np.testing.assert_allclose(np.asarray(j), np.asarray(e), rtol=1e-12, atol=1e-300)
    assert not jax.config.jax_enable_x64


def test_fmax_samples_under_jit():
    with jax.enable_x64(True):
        f = jax.jit(igb.fmax_samples, static_argnames=("n_classes", "n_networks"))
        for n in (2, 5):
            np.testing.assert_array_equal(np.asarray(f(jax.random.key(3), 2.0, n, 64)),
                                          np.asarray(igb.fmax_samples(jax.random.key(3), 2.0, n, 64)))
    assert (np.asarray(igb.fmax_samples(jax.random.key(0), np.inf, 10, 16)) == 1.0).all()


def _central(f, x, rel=1e-5):
    h = rel * max(abs(x), 1.0)
    return (float(f(x + h)) - float(f(x - h))) / (2 * h)


def _check_grad(f, x, rtol=1e-6):
    """jax.grad of a scalar theory function (jitted: eager dispatch of every small op is what costs time
    here, and jit == eager is its own test above) against its central finite difference, in float64."""
    with jax.enable_x64(True):
        g = float(jax.jit(jax.grad(f))(jnp.float64(x)))
        fd = _central(jax.jit(f), x)
    assert g == pytest.approx(fd, rel=rtol, abs=1e-9)
    return g


# tanh+maxpool at depth 8: its 1-D integral per layer makes depth 30 a 40 s compile for the same check.
@pytest.mark.parametrize("act,sw,sb,depth", [("tanh", 3.0, 0.1, 30), ("tanh", 1.2, 0.05, 30), ("relu", 1.5, 0.2, 30),
                                             ("relu", 2.5, 0.2, 30), ("gelu", 3.0, 0.1, 30),
                                             ("tanh+maxpool", 2.5, 0.3, 8)])
def test_grad_of_c_at_depth_wrt_sigma_w2_matches_finite_difference(act, sw, sb, depth):
    g = _check_grad(lambda w: mf.propagate(w, sb, act, depth)[1][-1], sw)
    assert abs(g) > 1e-6        # a real dependence, not a vanishing one


@pytest.mark.parametrize("act,sw", [("tanh", 1.5), ("tanh", 3.0), ("gelu", 1.0), ("relu", 1.5), ("erf", 2.0)])
def test_grad_of_q_star_wrt_sigma_b2_is_implicit_not_bisection(act, sw):
    """d q*/d sigma_b2 through the root solve (bisection alone would give 0)."""
    g = _check_grad(lambda b: mf.fixed_point(sw, b, act)[0], 0.1)
    assert g > 0.5


def test_grads_of_c_star_chi1_eoc_and_neutrality_line():
    assert _check_grad(lambda w: mf.fixed_point(w, 0.1, "tanh")[1], 3.0) < 0      # more chaos, lower c*
    assert _check_grad(lambda w: mf.chi1(w, 0.1, "tanh"), 1.5) > 0
    assert _check_grad(lambda b: mf.eoc(b, "tanh"), 0.1) > 0
    assert _check_grad(lambda b: mf.neutrality_line(b, "tanh"), 0.3) > 0
    assert _check_grad(lambda b: mf.depth_scales(1.5, b, "tanh")[0], 0.1) != 0


def test_grad_of_backward_product_matches_finite_difference():
    assert _check_grad(lambda w: mf.backward_product(w, 0.1, "tanh", 30), 2.4) > 0
    assert _check_grad(lambda b: mf.backward_product(2.4, b, "tanh", 30), 0.1) < 0    # larger q, smaller tanh'


def test_grad_of_fmax_mean_wrt_gamma():
    assert _check_grad(lambda g: igb.fmax_mean(g, 10), 4.0) > 0
    assert _check_grad(lambda g: igb.fmax_mean(g, 10), 1e6, rtol=1e-5) == pytest.approx(
        0.868148 / 2 * 1e6 ** -1.5, rel=1e-3)                                         # d/dg of 1 - C / sqrt(g)


@pytest.mark.parametrize("act", ["relu", "relu+maxpool", "relu+avgpool", "tanh+maxpool", "tanh", "gelu"])
def test_no_nan_gradients_at_c_equal_one(act):
    """Identical inputs (c0 = 1) keep c == 1.0 exactly at every layer; the closed forms hold
    sqrt(1 - c^2), whose autodiff derivative is nan there (the ReLU kernels use Price's theorem instead)."""
    f = lambda w, b, c: mf.propagate(w, b, act, 6, c0=c)[1][-1]
    with jax.enable_x64(True):
        assert (np.asarray(mf.propagate(0.9, 0.3, act, 6, c0=1.0)[1]) == 1.0).all()
        gw, gb, gc = (float(g) for g in jax.grad(f, argnums=(0, 1, 2))(*map(jnp.float64, (0.9, 0.3, 1.0))))
    assert abs(gw) < 1e-12 and abs(gb) < 1e-12      # c stays 1 whatever sigma_w2, sigma_b2
    assert np.isfinite(gc) and gc > 0


def test_grad_without_x64_scope_returns_float32_close_to_float64():
    f = lambda w: mf.propagate(w, 0.125, "tanh", 30)[1][-1]     # 0.125 and 3.0: exact in float32
    g32 = jax.grad(f)(3.0)
    assert g32.dtype == jnp.float32 and not jax.config.jax_enable_x64
    with jax.enable_x64(True):
        g64 = float(jax.grad(f)(jnp.float64(3.0)))
    assert float(g32) == pytest.approx(g64, rel=1e-6)


def test_vmap_of_grad_equals_a_loop():
    f = lambda w: mf.propagate(w, 0.1, "tanh", 10)[1][-1]
    w = np.array([0.8, 1.5, 3.0])
    with jax.enable_x64(True):
        batched = np.asarray(jax.vmap(jax.grad(f))(jnp.asarray(w)))
        loop = [float(jax.grad(f)(jnp.float64(x))) for x in w]
    np.testing.assert_allclose(batched, loop, rtol=1e-12)
