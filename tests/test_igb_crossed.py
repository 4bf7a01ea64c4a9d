"""The crossed design (`jaxinit.igb.crossed`), the centred twins (`jaxinit.igb.centred`), the two-horizon arms
(`jaxinit.igb.reported.members`) and the crossed analysis (`jaxinit.igb.summary_crossed`)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from jaxinit.igb import centred, crossed, reported, summary_crossed
from jaxinit.models import deep
from jaxinit.shared import nets
from theory import meanfield as mf


@pytest.mark.parametrize("side", crossed.SIDES)
def test_points_sit_at_the_target_depth_scale_on_their_side(side):
    targets = np.array([4.0, 8.0, 16.0])
    sw = crossed.solve_sigma_w2("tanh", 0.1, targets, side)
    eoc = float(mf.eoc(0.1, "tanh"))
    assert np.all(sw < eoc) if side == "ordered" else np.all(sw > eoc)
    xi = np.asarray(mf.depth_scales(sw, np.full_like(sw, 0.1), "tanh")[1])
    np.testing.assert_allclose(xi, targets, rtol=1e-6)


def test_unreachable_targets_are_left_out_and_roles_parse():
    # xi_c = 2 on the chaotic side needs sigma_w2 far beyond 20: no such point
    assert np.isnan(crossed.solve_sigma_w2("tanh", 0.1, [2.0], "chaotic", hi=20.0))[0]
    rows = crossed.crossed_rows("tanh", 16, 0.1, (2.0, 8.0), 3)
    roles = [r[0] for r in rows]
    assert roles == ["EOC", "r2 ordered", "r8 ordered", "r2 chaotic"]
    assert crossed.parse("r8 ordered") == (8.0, "ordered") and crossed.parse("EOC") == (0.0, "EOC")
    assert crossed.parse("prejudice") is None and crossed.parse("r8 centred") is None
    assert crossed.parse_sweep("0.7xEOC") == (0.7, "ordered") and crossed.parse_sweep("1.3xEOC") == (1.3, "chaotic")
    assert crossed.parse_sweep("EOC") == (0.0, "EOC") and crossed.parse_sweep("r2 ordered") is None
    assert crossed.parse_sweep("1.3xEOC centred") is None and crossed.parse_sweep("axEOC") is None


def test_a_centred_twin_has_the_points_weights_and_zero_mean_logits_on_the_reference_inputs():
    net = nets.make_net(deep.DeepMLP(2, 16, 6, "tanh"), (8,))
    x_ref = jax.random.normal(jax.random.key(1), (32, 8))
    model = centred.model_of(x_ref)(net)
    key = jax.random.key(3)
    point, _ = model.init(key, (jnp.float32(1.9), jnp.float32(0.1), jnp.float32(0.0)))
    twin, _ = model.init(key, (jnp.float32(1.9), jnp.float32(0.1), jnp.float32(1.0)))
    own = nets.scaled_draw(net, key, 1.9, 0.1)
    for a, b in zip(jax.tree.leaves(point), jax.tree.leaves(own)):
        np.testing.assert_array_equal(a, b)
    assert not np.allclose(point["head"]["bias"], twin["head"]["bias"])
    np.testing.assert_array_equal(point["head"]["kernel"], twin["head"]["kernel"])
    mean_point = net.module.apply({"params": point}, x_ref).mean(0)
    mean_twin = net.module.apply({"params": twin}, x_ref).mean(0)
    assert float(jnp.abs(mean_point).max()) > 1e-2
    np.testing.assert_allclose(mean_twin, 0.0, atol=1e-5)
    assert centred.base_role("EOC centred") == "EOC" and centred.is_twin("EOC centred")


def test_the_short_horizons_rate_trains_only_where_it_differs():
    points = {"role": np.array(["a", "b", "c"]), "sigma_w2": np.array([1.0, 2.0, 3.0]),
              "sigma_b2": np.full(3, 0.1), "seeds": np.array([2, 2, 2])}
    chosen = {"point_lr": np.array([1e-3, 1e-2, 3e-3]), "point_lr_short": np.array([1e-3, 3e-2, 3e-3])}
    m = reported.members(points, chosen, short_arm=True)
    assert m["arm"].tolist() == [0] * 6 + [1] * 2
    assert m["point"][m["arm"] == 1].tolist() == [1, 1] and np.all(m["lr"][m["arm"] == 1] == 3e-2)
    assert m["seed"][m["arm"] == 1].tolist() == [0, 1]
    assert reported.members(points, chosen, short_arm=False)["arm"].tolist() == [0] * 6


def _results(depth_coef: float, rng, seeds=8, side_coef: float = 0.0):
    """Synthetic crossed results: trains with probability sigmoid(6 - r + depth_coef * (log2 L - 5) + side_coef
    [chaotic side])."""
    out = {}
    for L in (16, 32, 64, 128):
        roles = ["EOC"] + [crossed.role(r, s) for s in crossed.SIDES for r in (2, 4, 6, 8)]
        r_pt = np.array([crossed.parse(x)[0] for x in roles])
        chaotic = np.array([crossed.parse(x)[1] == "chaotic" for x in roles])
        point = np.repeat(np.arange(len(roles)), seeds)
        p = 1 / (1 + np.exp(-(6 - r_pt[point] + depth_coef * (np.log2(L) - 5) + side_coef * chaotic[point])))
        acc = np.where(rng.random(point.size) < p, 0.95, 0.6)
        out[f"tanh__d{L}__sgd"] = {
            "act": np.array("tanh"), "optimizer": np.array("sgd"), "depth": np.array(L), "target_acc": np.array(0.9),
            "point_role": np.array(roles), "point_depth_over_xi_c": r_pt,
            "point_theory_phase": np.array(["x"] * len(roles)), "point_lr": np.full(len(roles), 1e-3),
            "point": point, "seed": np.tile(np.arange(seeds), len(roles)), "arm": np.zeros(point.size, int),
            "test_acc": acc[None]}
    return out


def test_the_crossed_analysis_finds_a_planted_depth_effect_and_not_a_null_one():
    rng = np.random.default_rng(0)
    planted = summary_crossed.analyse(_results(-1.5, rng), 0.97, n_sims=10, n_perm=39)["tanh__sgd"]["at_H"]["models"]
    assert planted["M_rd"]["lrt_depth"]["p"] < 0.01 and planted["M_rd"]["depth_coef_ci95"][1] < 0
    assert planted["M_rd"]["permutation_depth"]["p"] == pytest.approx(1 / 40)    # no shuffle reaches it
    null = summary_crossed.analyse(_results(0.0, rng), 0.97, n_sims=10, n_perm=39)["tanh__sgd"]["at_H"]["models"]
    lo, hi = null["M_rd"]["depth_coef_ci95"]
    assert null["M_rd"]["lrt_depth"]["p"] > 0.05 and lo < 0 < hi
    assert null["M_rd"]["permutation_depth"]["p"] > 0.05
    r50 = null["M_r"]["r50"]
    assert r50["ci95"][0] < 6 < r50["ci95"][1]


def test_a_planted_side_effect_moves_the_threshold_on_the_chaotic_side_only():
    # sigmoid(6 - r - 3 [chaotic]) at the centre depth: r50 = 6 on the ordered side, 3 on the chaotic side
    m = summary_crossed.analyse(_results(0.0, np.random.default_rng(1), seeds=16, side_coef=-3.0), 0.97,
                                n_sims=10, n_perm=9)["tanh__sgd"]["at_H"]["models"]
    by_side = m["M_rds"]["r50_by_side"]
    lo_o, hi_o = by_side["ordered"]["ci95"]
    lo_c, hi_c = by_side["chaotic"]["ci95"]
    assert lo_o < 6 < hi_o and lo_c < 3 < hi_c and hi_c < lo_o
    assert m["M_rds"]["side_coef_ci95"][1] < 0 and m["M_rds"]["lrt_side"]["p"] < 0.01
    assert m["M_rds"]["permutation_side"]["n_perm"] == 9


def test_the_xi_sweeps_points_are_read_by_the_crossed_analysis_only_when_asked():
    # the same synthetic outcomes under sweep roles: '<f>xEOC' below 1 is the ordered side, above 1 the chaotic
    crossed_res = _results(0.0, np.random.default_rng(2))
    sweep_res = {}
    for name, r in crossed_res.items():
        side = {"ordered": 0.8, "chaotic": 1.2}
        roles = [x if x == "EOC" else f"{side[crossed.parse(x)[1]] + crossed.parse(x)[0] / 100:g}xEOC"
                 for x in r["point_role"].tolist()]
        sweep_res[name] = {**r, "point_role": np.array(roles)}
    assert summary_crossed.table(sweep_res)["r"].size == 0                   # not crossed points: left out
    a = summary_crossed.table(crossed_res)
    b = summary_crossed.table(sweep_res, parse=crossed.parse_sweep)
    for key in ("r", "depth", "side", "trains"):
        np.testing.assert_array_equal(a[key], b[key])


def test_the_permutation_keeps_each_points_seeds_together_and_the_other_covariates_in_place():
    tab = summary_crossed.table(_results(-1.5, np.random.default_rng(3)))
    depth = ("depth", ("r", "side"), [0, 1, 2], 2)
    out = summary_crossed.permutation_lrt(tab, *depth, n_perm=0)
    assert out["p"] == 1.0 and out["n_perm"] == 0 and out["stat"] > 10     # the observed statistic alone
    # each (r, side) at one depth only (r = 2 at 16, 4 at 32, 6 at 64, 8 at 128, the EOC at 16): a shuffle within
    # the strata moves nothing, so every shuffle's statistic is the observed one; across strata it would not be
    depth_of_r = {0.0: 16, 2.0: 16, 4.0: 32, 6.0: 64, 8.0: 128}
    keep = tab["depth"] == np.array([depth_of_r[r] for r in tab["r"]])
    one_each = {k: v[keep] for k, v in tab.items()}
    assert summary_crossed.permutation_lrt(one_each, *depth, n_perm=5)["p"] == 1.0


def test_a_planted_side_effect_survives_its_permutation_null_and_a_null_one_does_not():
    side = ("side", ("r", "depth"), [0, 1, 2, 3], 3)
    planted = summary_crossed.table(_results(0.0, np.random.default_rng(4), side_coef=-3.0))
    assert summary_crossed.permutation_lrt(planted, *side, n_perm=39)["p"] == pytest.approx(1 / 40)
    null = summary_crossed.table(_results(0.0, np.random.default_rng(5)))
    assert summary_crossed.permutation_lrt(null, *side, n_perm=39)["p"] > 0.05
