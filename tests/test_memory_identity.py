"""The continuous identity statistic of the joined study (jaxinit.memory.identity): a planted association is found
and a null one is not, the permutation null is exact where it says so, the across-seed mean is removed, and the
paired difference has the sign of its planted contrast."""
import itertools

import numpy as np
import pytest

from jaxinit.memory import identity

C = 10


def planted(rng, points: int, seeds: int, a: float, shared: float = 0.6) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Init frequencies F0 (Dirichlet per member) and trained F1 = shared x (a common vector: the data's bias) +
    (1 - shared) x ((1 - a) x fresh noise + a x F0): ``a`` is the planted share of each seed's own init."""
    f0 = rng.dirichlet(np.full(C, 0.5), points * seeds)
    common = rng.dirichlet(np.full(C, 2.0))
    noise = rng.dirichlet(np.full(C, 0.5), points * seeds)
    f1 = shared * common + (1 - shared) * ((1 - a) * noise + a * f0)
    return f0, f1, np.repeat(np.arange(points), seeds)


def test_a_planted_association_is_found_and_a_null_one_is_not():
    rng = np.random.default_rng(0)
    found = identity.test(*planted(rng, 4, 6, a=0.5), n_draws=2000, n_boot=300)
    assert found["p"] < 0.01 and found["ci95"][0] > 0.2 and found["r"] > 0.4
    assert 0 < found["beta"] < 1 and found["beta_ci95"][0] > 0
    null = identity.test(*planted(rng, 4, 6, a=0.0), n_draws=2000, n_boot=300)
    assert null["p"] > 0.05 and null["ci95"][0] < 0 < null["ci95"][1]
    assert abs(null["null_mean"]) < 0.01 and null["mde80"] == pytest.approx(2.486 * null["null_sd"], rel=1e-3)


def test_the_null_rejects_at_its_level_over_many_null_data_sets():
    rng = np.random.default_rng(1)
    ps = [identity.test(*planted(rng, 3, 6, a=0.0), n_draws=400, n_boot=10)["p"] for _ in range(150)]
    assert 0.01 <= np.mean(np.array(ps) < 0.05) <= 0.11
    planted_ps = [identity.test(*planted(rng, 3, 6, a=0.4), n_draws=400, n_boot=10)["p"] for _ in range(40)]
    assert np.mean(np.array(planted_ps) < 0.05) > 0.9


def test_what_every_seed_shares_is_removed_and_an_untouched_preference_gives_one():
    rng = np.random.default_rng(2)
    f0 = rng.dirichlet(np.full(C, 0.5), 5)
    shifted = 0.5 * f0 + 0.5 * np.eye(C)[3]                  # every seed pulled to class 3 alike: own part kept
    out = identity.test(f0, shifted, np.zeros(5), n_draws=100, n_boot=50)
    assert out["r"] == pytest.approx(1.0) and out["beta"] == pytest.approx(0.5)
    assert out["exact"] is True and out["p"] == pytest.approx(1 / 120)       # only the identity of 5! reaches r = 1
    flipped = identity.test(f0, 0.5 * (2 / C - f0) + 0.5 * np.eye(C)[3], np.zeros(5), n_draws=100, n_boot=50)
    assert flipped["r"] == pytest.approx(-1.0) and flipped["p"] == pytest.approx(1.0)


def test_the_exact_null_is_every_within_point_arrangement_and_has_mean_zero():
    rng = np.random.default_rng(3)
    f0, f1 = rng.dirichlet(np.ones(C), 6), rng.dirichlet(np.ones(C), 6)
    strata = np.array([0, 0, 0, 1, 1, 1])
    out = identity.test(f0, f1, strata, n_draws=10, n_boot=50)
    null = []
    for p0, p1 in itertools.product(itertools.permutations(range(3)), repeat=2):
        f1p = np.concatenate([f1[:3][list(p0)], f1[3:][list(p1)]])
        null.append(identity.correlation([f0[:3], f0[3:]], [f1p[:3], f1p[3:]]))
    assert out["exact"] is True and out["null_mean"] == pytest.approx(np.mean(null)) == pytest.approx(0.0, abs=1e-12)
    assert out["p"] == pytest.approx(np.mean(np.array(null) >= out["r"] - 1e-12))
    assert out["null_sd"] == pytest.approx(np.std(null))


def test_pooling_weights_points_by_their_seed_specific_variation_and_drops_thin_strata():
    rng = np.random.default_rng(4)
    f0 = rng.dirichlet(np.ones(C), 7)
    f1 = rng.dirichlet(np.ones(C), 7)
    strata = np.array([0, 0, 0, 1, 1, 1, 2])               # stratum 2 has one member: no seed-specific part
    g0, g1 = identity.split(f0, f1, strata)
    assert [g.shape[0] for g in g0] == [3, 3]
    r0 = [identity.residuals(g) for g in g0]
    r1 = [identity.residuals(g) for g in g1]
    want = sum(np.sum(a * b) for a, b in zip(r0, r1)) / np.sqrt(sum(np.sum(a * a) for a in r0)
                                                                 * sum(np.sum(b * b) for b in r1))
    assert identity.correlation(g0, g1) == pytest.approx(want)
    f1[0] = np.nan                                          # a member with no vector is left out
    assert identity.test(f0, f1, strata, n_draws=10, n_boot=10)["n"] == 5
    same = np.tile(f0[:1], (3, 1))                          # no variation across seeds: nothing to correlate
    assert identity.test(same, f1[:3], np.zeros(3))["r"] is None


def test_the_paired_difference_has_the_sign_of_the_planted_contrast():
    rng = np.random.default_rng(5)
    strong, weak = planted(rng, 1, 8, a=0.8), planted(rng, 1, 8, a=0.0)
    seeds = np.arange(8)
    d = identity.paired_difference((*strong, seeds), (*weak, seeds), n_boot=400)
    assert d["diff"] > 0.4 and d["ci95"][0] > 0 and d["n_seeds"] == 8
    back = identity.paired_difference((*weak, seeds), (*strong, seeds), n_boot=400)
    assert back["diff"] == pytest.approx(-d["diff"]) and back["ci95"][1] < 0


def test_power_grows_with_the_design():
    small, large = identity.power(0.3), identity.power(0.05)
    assert small["mde80"] > large["mde80"] and small["power_r03"] < 0.5 < 0.99 < large["power_r03"]
