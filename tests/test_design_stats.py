"""Statistics of designs replicated over data splits (jaxinit.forgetting.design_stats) and the effective clocks
of BatchNorm-invariant kernels (jaxinit.forgetting.effective): each finds a planted effect and not a null one."""

import numpy as np
import pytest

from jaxinit.forgetting import design_stats as D
from jaxinit.forgetting import effective as E
from jaxinit.shared import nulls


def _replicates(splits: int, seeds: int) -> list[tuple[int, int]]:
    return [(j, s) for j in range(splits) for s in range(seeds)]


def test_mixed_interval_covers_with_a_split_effect_where_the_seed_interval_does_not():
    rng = np.random.default_rng(0)
    reps = _replicates(6, 2)
    split_of = [j for j, _ in reps]
    hit_mixed = hit_naive = 0
    n_sim = 400
    for _ in range(n_sim):
        a = rng.normal(0.0, 2.0, 6)                       # split effects, sd 2 (planted)
        x = np.array([a[j] + rng.normal(0.0, 1.0) for j in split_of])
        lo, hi = D.mixed_interval(x, split_of)["ci95"]
        hit_mixed += lo <= 0.0 <= hi
        lo, hi = D.mixed_interval(x, [0] * len(x))["ci95"]   # one split: the seed t interval
        hit_naive += lo <= 0.0 <= hi
    assert hit_mixed / n_sim >= 0.92
    assert hit_naive / n_sim <= 0.85


def test_mixed_interval_has_split_degrees_of_freedom_and_one_split_falls_back_to_seeds():
    x = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    res = D.mixed_interval(x, [0, 0, 1, 1, 2, 2])
    assert res["df"] == 2 and res["n_splits"] == 3 and res["mean"] == pytest.approx(3.5)
    one = D.mixed_interval(x, [0] * 6)
    assert one["df"] == 5 and one["n_splits"] == 1
    assert (res["ci95"][1] - res["ci95"][0]) > (one["ci95"][1] - one["ci95"][0])


def test_components_recover_a_planted_split_variance_and_find_none_without_it():
    rng = np.random.default_rng(1)
    split_of = [j for j in range(40) for _ in range(3)]
    a = rng.normal(0, 2.0, 40)
    with_split = [a[j] + rng.normal(0, 1.0) for j in split_of]
    c = D.components(with_split, split_of)
    assert 2.0 < c["var_split"] < 7.0 and 0.6 < c["var_seed"] < 1.5
    without = [rng.normal(0, 1.0) for _ in split_of]
    assert D.components(without, split_of)["var_split"] < 0.3


def _accuracies(effect: float, splits=6, seeds=2, k=6, noise=0.01, interaction=0.0, seed=0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    x = np.log(np.linspace(0.1, 2.5, k))
    rows = []
    for j in range(splits):
        tilt = interaction * rng.standard_normal()           # a split's own slope over sigma_w
        for _ in range(seeds):
            rows.append(0.6 + (effect + tilt) * (x - x.mean()) + noise * rng.standard_normal(k))
    return np.array(rows)


def test_cell_finds_a_planted_memory_and_not_a_null_one():
    grid = list(np.linspace(0.1, 2.5, 6))
    reps = _replicates(6, 2)
    planted = D.cell(_accuracies(-0.03), reps, grid, n_draws=2000)
    assert planted["spread_p"] < 0.01 and planted["slope_p"] < 0.01
    assert planted["slope"]["ci95"][1] < 0 and planted["spread"]["mean"] > planted["null"]
    false = sum(D.cell(_accuracies(0.0, seed=s), reps, grid, n_draws=500)["spread_p"] < 0.05 for s in range(40))
    assert false <= 6     # a 5 % test: about 2 of 40, at most 6


def test_blocked_floor_removes_split_by_sigma_interaction_that_the_pooled_floor_counts_as_noise():
    a = _accuracies(0.0, noise=0.0, interaction=0.02)   # each split tilts the curve, no seed noise
    split_of = np.array([j for j, _ in _replicates(6, 2)])
    assert D._blocked_floor(a, split_of) < 1e-6
    assert nulls.noise_floor(a) > 1.0


def test_paired_finds_a_planted_shift_and_not_a_null_one():
    rng = np.random.default_rng(2)
    reps = _replicates(6, 2)
    a = {r: 10 + rng.normal() for r in reps}
    shifted = D.paired(a, {r: v - 3 + 0.5 * rng.normal() for r, v in a.items()})
    assert shifted["ci95"][1] < 0 and shifted["p"] < 0.01 and shifted["n"] == 12
    null = D.paired(a, {r: v + 0.5 * rng.normal() for r, v in a.items()})
    assert null["ci95"][0] < 0 < null["ci95"][1] and null["p"] > 0.05


def test_resample_draws_whole_splits_then_seeds_within_them():
    reps = _replicates(4, 3)
    rng = np.random.default_rng(3)
    for _ in range(20):
        idx = D.resample(reps, rng)
        assert idx.size == 12
        blocks = [{reps[i][0] for i in idx[3 * b:3 * b + 3]} for b in range(4)]
        assert all(len(b) == 1 for b in blocks)           # each block of three is one split's seeds
    one = _replicates(1, 5)
    draws = [D.resample(one, rng) for _ in range(20)]
    assert all(d.size == 5 and d.min() >= 0 and d.max() < 5 for d in draws)
    assert any(len(set(d.tolist())) < 5 for d in draws)     # seeds drawn with replacement


# --------------------------------------------------------------------------- effective clocks
def _rows(norms: list[float], steps: list[int], head: float = 1.0) -> list[dict]:
    return [{"epoch": e, "step": s, "param_norm_layers": {"dense_0/kernel": n, "bn_0/scale": 5.0, "head/kernel": head}}
            for e, (n, s) in enumerate(zip(norms, steps))]


def test_effective_clocks_of_constant_norms_are_the_clocks_over_sigma_squared():
    sigma, eta, b = 2.0, np.full(100, 0.1), 16
    c = E.member_clocks(_rows([4.0, 4.0, 4.0], [0, 50, 100]), eta, sigma, b)
    assert c["T_adapt_eff"] == pytest.approx(eta.sum() / sigma ** 2)
    assert c["T_SGD_eff"] == pytest.approx(np.square(eta).sum() / sigma ** 4 / b)


def test_effective_clocks_slow_down_when_the_norm_grows_and_ignore_the_head():
    eta = np.full(100, 0.1)
    flat = E.member_clocks(_rows([1.0, 1.0, 1.0], [0, 50, 100]), eta, 1.0, 16)
    grown = E.member_clocks(_rows([1.0, 2.0, 2.0], [0, 50, 100], head=9.0), eta, 1.0, 16)
    # second half at 1/4 the step; first half by the trapezoid (1 + 1/4) / 2
    assert grown["T_adapt_eff"] == pytest.approx(5.0 * (1 + 0.25) / 2 + 5.0 * 0.25)
    assert grown["T_adapt_eff"] < flat["T_adapt_eff"]
    assert E.invariant_kernels({"dense_0/kernel": 1, "head/kernel": 1, "bn_0/scale": 1}) == ["dense_0/kernel"]
    assert E.invariant_kernels({"dense_0/kernel": 1}, batchnorm=False) == []
    assert E.member_clocks(_rows([1.0, 1.0], [0, 50]), eta[:10], 1.0, 16)["T_SGD_eff"] is None   # etas too short


def test_run_clocks_take_the_median_and_the_slowest_member_of_each_seed():
    members = [{"seed": s, "sigma_w": w, "T_SGD_eff": t, "T_adapt_eff": 10 * t}
               for s, ts in ((0, (1.0, 4.0, 9.0)), (1, (2.0, 3.0, 8.0))) for w, t in zip((0.1, 1.0, 2.5), ts)]
    c = E.run_clocks(members)
    assert c["T_SGD_eff"] == pytest.approx(3.5) and c["T_SGD_eff_slowest"] == pytest.approx(1.5)
    assert c["T_adapt_eff_slowest"] == pytest.approx(15.0)
    assert E.run_clocks([])["T_SGD_eff"] is None
