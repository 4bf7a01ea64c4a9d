"""Phase classification and vectorised phase diagrams (docs/theory.md section 5)."""
import numpy as np
import pytest

from theory import igb, meanfield as mf, phase


def test_legend_has_the_five_phases_of_the_trainability_paper_and_the_pooled_band():
    assert sorted(phase.PHASE_LEGEND) == [0, 1, 2, 3, 4, 5]
    assert phase.PHASE_LEGEND[phase.NEUTRALITY] == "neutrality"
    assert phase.PHASE_LEGEND[phase.ORDERED_DEEP].startswith("ordered deep prejudice")
    assert "vanishing" in phase.PHASE_LEGEND[phase.VANISHING_GRADIENT_DEEP]


def test_classify_rules():
    chi = np.array([0.5, 1.005, 1.5, 1.5, 1.5, 0.995])
    c_star = np.array([1.0, 1.0, 1.0, 0.8, 0.3, 1.0])
    codes = np.asarray(phase.classify(chi, c_star, eoc_tol=0.01))
    assert codes.tolist() == [phase.ORDERED_DEEP, phase.TRANSIENT_DEEP, phase.CHAOTIC_DEEP, phase.PREJUDICE,
                              phase.NEUTRALITY, phase.TRANSIENT_DEEP]
    assert np.asarray(phase.classify(1.005, 1.0, eoc_tol=0.001)) == phase.CHAOTIC_DEEP
    # both criteria given: chi1~ > 1 > chi1 is the pooled band, under either criterion, outside the EOC band
    tilde, grad = np.array([1.1, 1.1, 1.5, 0.9, 1.005]), np.array([0.9, 0.9, 1.2, 0.7, 0.995])
    assert np.asarray(phase.classify(tilde, 1.0, 0.01, tilde, grad)).tolist() == [
        phase.VANISHING_GRADIENT_DEEP, phase.VANISHING_GRADIENT_DEEP, phase.CHAOTIC_DEEP, phase.ORDERED_DEEP,
        phase.TRANSIENT_DEEP]
    assert np.asarray(phase.classify(grad, 1.0, 0.01, tilde, grad)).tolist() == [
        phase.VANISHING_GRADIENT_DEEP, phase.VANISHING_GRADIENT_DEEP, phase.CHAOTIC_DEEP, phase.ORDERED_DEEP,
        phase.TRANSIENT_DEEP]


def test_tanh_diagram_equals_pointwise_theory():
    """vmap == loop: every grid value equals the scalar public functions at that point."""
    w, b = np.array([0.8, 1.7, 2.6, 4.0, 5.5]), np.array([0.0, 0.05, 0.3])
    res = phase.phase_diagram("tanh", w, b, 12)
    assert res["phase"].shape == (5, 3) and res["phase"].dtype == np.int32
    ww, bb = np.meshgrid(w, b, indexing="ij")
    q, c = mf.fixed_point(ww, bb, "tanh")
    np.testing.assert_allclose(res["q_star"], q, rtol=1e-13)
    np.testing.assert_allclose(res["c_star"], c, atol=1e-13)
    np.testing.assert_allclose(res["chi1"], mf.chi1(ww, bb, "tanh"), rtol=1e-13)
    c_depth = mf.propagate(ww, bb, "tanh", 12)[1][..., -1]
    np.testing.assert_allclose(res["c_depth"], c_depth, rtol=1e-13)
    np.testing.assert_allclose(res["gamma_depth"], igb.gamma_from_c(c_depth), rtol=1e-12)
    np.testing.assert_array_equal(res["phase"], np.asarray(phase.classify(res["chi1_tilde"], res["c_star"])))
    # sigma_b2 = 0.3: ordered at 0.8, prejudice then neutrality deep in chaos; sigma_b2 = 0: neutral (c* = 0)
    assert res["phase"][0, 2] == phase.ORDERED_DEEP and res["phase"][4, 0] == phase.NEUTRALITY
    assert {phase.PREJUDICE, phase.NEUTRALITY} <= set(res["phase"][:, 2].tolist())


def test_relu_diagram_is_deep_prejudice_everywhere_and_uses_the_forward_criterion():
    w, b = np.array([1.0, 1.99, 2.0, 3.0]), np.array([0.0, 0.2])
    res = phase.phase_diagram("relu+maxpool", w, b, 8)
    np.testing.assert_array_equal(res["c_star"], 1.0)
    np.testing.assert_allclose(res["chi1_tilde"][:, 0], w * (0.75 + 0.5 / np.pi), rtol=1e-14)
    assert set(res["phase"].ravel().tolist()) <= {phase.ORDERED_DEEP, phase.TRANSIENT_DEEP, phase.CHAOTIC_DEEP}
    assert (res["phase"][2:] == phase.CHAOTIC_DEEP).all()       # forward-critical at 1.0999 < 2
    grad = phase.phase_diagram("relu+maxpool", w, b, 8, criterion="gradient")
    assert (grad["phase"][0] == phase.ORDERED_DEEP).all()        # gradient-critical only at 4/3
    assert np.isinf(res["q_star"][2:]).all()


@pytest.mark.parametrize("act", ["relu+maxpool", "relu+avgpool"])
def test_pooled_band_between_the_criteria_is_vanishing_gradient_not_chaotic(act):
    """Between the forward (chi1~ = 1) and gradient (chi1 = 1) edges the variance grows but chi1 < 1."""
    forward, gradient = float(mf.eoc(0.0, act)), float(mf.eoc(0.0, act, "gradient"))
    w = np.array([0.5 * forward, 0.5 * (forward + gradient), 1.5 * gradient])
    for criterion in ("forward", "gradient"):
        res = phase.phase_diagram(act, w, np.array([0.0, 0.1]), 30, criterion=criterion)
        assert (res["chi1_tilde"][1] > 1).all() and (res["chi1"][1] < 1).all()
        assert (res["phase"][1] == phase.VANISHING_GRADIENT_DEEP).all()
        assert (res["phase"][0] == phase.ORDERED_DEEP).all() and (res["phase"][2] == phase.CHAOTIC_DEEP).all()
    # the two edges themselves are each criterion's EOC band
    edges = phase.phase_diagram(act, np.array([forward, gradient]), np.array([0.1]), 30)["phase"][:, 0]
    assert edges.tolist() == [phase.TRANSIENT_DEEP, phase.CHAOTIC_DEEP]
    edges = phase.phase_diagram(act, np.array([forward, gradient]), np.array([0.1]), 30, criterion="gradient")
    assert edges["phase"][:, 0].tolist() == [phase.VANISHING_GRADIENT_DEEP, phase.TRANSIENT_DEEP]


def test_changing_grid_values_does_not_recompile():
    w, b = np.linspace(0.5, 4, 6), np.linspace(0, 0.4, 5)
    phase.phase_diagram("relu", w, b, 10)
    size = phase._diagram._cache_size()
    phase.phase_diagram("relu", w * 1.1, b + 0.01, 10)
    assert phase._diagram._cache_size() == size


def test_bad_arguments_raise():
    with pytest.raises(ValueError):
        phase.phase_diagram("tanh", [1.0], [0.1], 0)
    with pytest.raises(ValueError):
        phase.phase_diagram("softmax", [1.0], [0.1], 5)
    with pytest.raises(ValueError):
        phase.phase_diagram("tanh", [1.0], [0.1], 5, criterion="sideways")


def test_paired_points_carry_the_diagram_values_and_the_depth_scale_and_backward_product():
    from theory import meanfield as mf
    from theory.phase import phase_diagram, phase_points
    sw, sb = np.array([1.2, 1.986, 2.4, 4.4, 1.1999]), np.array([0.1, 0.1, 0.05, 0.3, 0.0])
    pts = phase_points("tanh", sw, sb, 30)
    for i in range(len(sw)):
        d = phase_diagram("tanh", sw[i:i + 1], sb[i:i + 1], 30)
        for k in ("phase", "chi1", "c_star", "q_star", "c_depth"):
            np.testing.assert_allclose(np.asarray(pts[k][i]), np.asarray(d[k]).ravel()[0], rtol=1e-12)
    np.testing.assert_allclose(pts["xi_c"], mf.depth_scales(sw, sb, "tanh")[1], rtol=1e-12)
    np.testing.assert_allclose(pts["backward_product"], mf.backward_product(sw, sb, "tanh", 30), rtol=1e-12)
    pooled = phase_points("relu+maxpool", np.array([1.2]), np.array([0.0]), 10)
    assert int(pooled["phase"][0]) == 5                 # between the two criteria: vanishing-gradient, not exploding
    with pytest.raises(ValueError, match="paired points"):
        phase_points("tanh", np.ones(2), np.ones(3), 3)
