"""Issue 18's statistics of initialization memory on hand-made member summaries and histories: the signed
memory slope, the noise floor and randomization p-values, norm coupling, matched progress, measured clocks,
the clocks along a run and the clock-collapse statistic (jaxinit.forgetting.memory / nulls / horizon)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from jaxinit.forgetting import horizon
from jaxinit.forgetting import memory as M
from jaxinit.shared import history as H, nulls

GRID = (0.1, 0.3, 0.6, 1.0, 1.6, 2.5)


def member(sigma_w, seed, acc, *, n0=None, n_best=None, n_final=None, at_train=None, optimizer="sgd"):
    """A usable member summary; kernel norms default to ones proportional to sigma_w (fully coupled)."""
    n0 = 10.0 * sigma_w if n0 is None else n0
    return {"optimizer": optimizer, "sigma_w": sigma_w, "seed": seed, "best_epoch": 3, "diverged": False,
            "diverged_before_best": False, "tau_interp": 5, "repair_gap": 0.01,
            "test_acc_at_best": acc, "test_acc_at_best_interpolated": acc, "test_acc_final": acc,
            "train_acc_at_best": 0.99, "kernel_norm_init": n0,
            "kernel_norm_best": n0 if n_best is None else n_best,
            "kernel_norm_best_interpolated": n0 if n_best is None else n_best,
            "kernel_norm_final": n0 if n_final is None else n_final,
            "test_acc_at_train_acc": at_train or {}, "epoch_at_train_acc": {k: 4 for k in (at_train or {})}}


def setting(acc_of, seeds=3, **kw):
    return [member(s, seed, acc_of(s, seed), **kw) for seed in range(seeds) for s in GRID]


# --------------------------------------------------------------------------- memory slope
def test_memory_slope_value_and_sign_in_pp_per_e_fold():
    # acc = 0.8 - 0.03 ln sigma_w + a seed offset: -3 pp per e-fold in every seed
    sp = M.spread(setting(lambda s, seed: 0.8 - 0.03 * math.log(s) + 0.01 * seed), "sgd")
    assert sp["memory_slope_per_seed"] == pytest.approx([-3.0] * 3)
    assert sp["memory_slope"] == pytest.approx(-3.0)
    assert sp["memory_slope_ci95"] == pytest.approx([-3.0, -3.0])
    # the same rules' suffixes: final and interpolated selections carry their own slope
    assert sp["memory_slope_final"] == pytest.approx(-3.0) and sp["memory_slope_interpolated"] == pytest.approx(-3.0)
    up = M.spread(setting(lambda s, seed: 0.5 + 0.02 * math.log(s) * (1 + seed)), "sgd")
    assert up["memory_slope_per_seed"] == pytest.approx([2.0, 4.0, 6.0]) and up["memory_slope"] == pytest.approx(4.0)
    lo, hi = up["memory_slope_ci95"]
    assert lo < 4.0 < hi and lo == pytest.approx(4.0 - 4.302653 * 2 / math.sqrt(3), rel=1e-5)   # t_{0.975, 2}


def test_slope_and_nulls_are_none_below_two_grid_points_and_spread_null_needs_two_seeds():
    one = M.spread([member(1.0, seed, 0.7 + 0.01 * seed) for seed in range(3)], "sgd")
    assert one["memory_slope"] is None and one["spread_p"] is None and one["slope_p"] is None
    assert one["spread_null_pp"] is None and one["memory_slope_per_seed"] == []
    single = M.spread(setting(lambda s, seed: 0.8 - 0.05 * math.log(s), seeds=1), "sgd")
    assert single["spread_null_pp"] is None and single["spread_p"] is None   # no seed-to-seed noise to measure
    # one seed, 6! = 720 relabellings enumerated: only the identity and none other reach |slope| of a line
    assert single["null_exact"] is True and single["null_draws"] == 720
    assert single["slope_p"] == pytest.approx(1 / 720)


# --------------------------------------------------------------------------- noise floor, randomization test
def test_noise_floor_by_hand():
    a = np.array([[0.50, 0.60, 0.70], [0.52, 0.60, 0.66]])
    # column means 0.51, 0.60, 0.68: residual rows (-0.01, 0, 0.02) and (0.01, 0, -0.02), both of range 0.03
    assert nulls.noise_floor(a) == pytest.approx(100 * math.sqrt(2) * 0.03)
    assert nulls.noise_floor(a[:1]) is None
    # a sigma_w effect shared by the seeds does not enter it
    assert nulls.noise_floor(a + np.array([0.0, 0.3, -0.2])) == pytest.approx(nulls.noise_floor(a))


def test_exact_enumeration_of_within_seed_relabellings():
    a = np.array([[0.9, 0.8, 0.7], [0.85, 0.8, 0.75]])
    out = nulls.randomization_test(a, (0.5, 1.0, 2.0))
    assert out["null_exact"] and out["null_draws"] == 36
    # the 6 arrangements relabelling both seeds alike keep the curves aligned (floor as observed): p = 6/36
    assert out["spread_p"] == pytest.approx(6 / 36)
    # |mean slope| is reached only with both seeds as they are or both reversed (ln sigma_w symmetric about 0)
    assert out["slope_p"] == pytest.approx(2 / 36)


def test_randomization_p_small_with_a_planted_sigma_w_dependence():
    rng = np.random.default_rng(3)
    noise = 0.01 * rng.standard_normal((3, len(GRID)))
    sp = M.spread(setting(lambda s, seed: 0.75 - 0.04 * math.log(s) + noise[seed, GRID.index(s)]), "sgd")
    assert not sp["null_exact"] and sp["null_draws"] == nulls.N_DRAWS
    assert sp["spread_p"] < 0.01 and sp["slope_p"] < 0.01
    assert sp["memory_slope_ci95"][1] < 0
    # the floor is the noise's, not the memory's: the same noise without the dependence has the same floor
    flat = M.spread(setting(lambda s, seed: 0.75 + noise[seed, GRID.index(s)]), "sgd")
    assert sp["spread_null_pp"] == pytest.approx(flat["spread_null_pp"]) and sp["spread_null_pp"] < sp["spread_pp"] / 3
    assert flat["spread_p"] > 0.05 and flat["slope_p"] > 0.05


def test_randomization_p_roughly_uniform_without_sigma_w_dependence():
    rng = np.random.default_rng(7)
    ps = {"spread_p": [], "slope_p": []}
    floors, spreads = [], []
    for _ in range(200):
        a = 0.7 + 0.01 * rng.standard_normal((3, len(GRID))) + 0.03 * rng.standard_normal((3, 1))
        out = nulls.randomization_test(a, GRID, n_draws=500, seed=int(rng.integers(1 << 30)))
        for k in ps:
            ps[k].append(out[k])
        floors.append(out["spread_null_pp"])
        spreads.append(100 * np.ptp(a, axis=1).mean())
    for k, p in ps.items():
        p = np.asarray(p)
        assert 0.4 < p.mean() < 0.6, k
        assert (p < 0.05).mean() < 0.1, k
    # with no dependence the floor estimates the spread itself (~2.53 sd for 6 Gaussian values)
    assert np.mean(floors) == pytest.approx(np.mean(spreads), rel=0.1)
    assert np.mean(spreads) == pytest.approx(2.53, rel=0.1)


def test_equal_inputs_give_equal_p_values():
    ms = setting(lambda s, seed: 0.7 + 0.01 * math.sin(7 * s + seed))
    assert M.spread(ms, "sgd") == M.spread(list(ms), "sgd")


# --------------------------------------------------------------------------- norm coupling
def test_norm_coupling_one_for_coupled_zero_for_equalised_norms():
    acc = lambda s, seed: 0.8 - 0.01 * s   # noqa: E731
    coupled = M.spread(setting(acc, n_best=None, n_final=None), "sgd")["norm_coupling"]
    assert coupled["best"] == pytest.approx(1.0) and coupled["final"] == pytest.approx(1.0)
    proportional = [{**m, "kernel_norm_final": 3.0 * m["kernel_norm_init"]} for m in setting(acc)]
    assert M.spread(proportional, "sgd")["norm_coupling"]["final"] == pytest.approx(1.0)
    flat = [{**m, "kernel_norm_final": 7.0 + 0.001 * m["seed"]} for m in setting(acc)]
    nc = M.spread(flat, "sgd")["norm_coupling"]
    assert nc["final"] == pytest.approx(0.0, abs=1e-12) and nc["final_ci95"] == pytest.approx([0.0, 0.0], abs=1e-12)
    half = [{**m, "kernel_norm_best": 2.0 * math.sqrt(m["kernel_norm_init"])} for m in setting(acc)]
    assert M.spread(half, "sgd")["norm_coupling"]["best"] == pytest.approx(0.5)
    # an offset line is nearly linear in the init norm (Pearson r ~ 1) but barely coupled
    offset = [{**m, "kernel_norm_final": 40.0 + 0.5 * m["kernel_norm_init"]} for m in setting(acc)]
    sp = M.spread(offset, "sgd")
    assert sp["radial_memory"] == pytest.approx(1.0) and sp["norm_coupling"]["final"] < 0.3


def test_norm_coupling_none_without_norms():
    ms = [{**m, "kernel_norm_final": None} for m in setting(lambda s, seed: 0.8)]
    nc = M.spread(ms, "sgd")["norm_coupling"]
    assert nc["final"] is None and nc["final_per_seed"] == [] and nc["best"] == pytest.approx(1.0)


# --------------------------------------------------------------------------- matched progress
def test_at_train_acc_first_epoch_reaching_each_threshold_before_divergence():
    rows = [{"epoch": e, "step": 10 * e, "train_acc": tr, "test_acc": te, "diverged": False}
            for e, (tr, te) in enumerate([(0.1, 0.1), (0.85, 0.6), (0.93, 0.65), (0.97, 0.7)])]
    rows.append({"epoch": 4, "step": 35, "train_acc": 0.999, "test_acc": 0.1, "diverged": True, "diverged_step": 35})
    acc, epoch = H.at_train_acc(rows)
    assert acc == {"0.8": 0.6, "0.9": 0.65, "0.95": 0.7, "0.995": None}   # the frozen row does not count
    assert epoch == {"0.8": 1, "0.9": 2, "0.95": 3, "0.995": None}
    s = H.member_summary(rows, {"optimizer": "sgd", "sigma_w": 1.0, "seed": 0}, None, 10, 0.0)
    assert s["test_acc_at_train_acc"] == acc and s["epoch_at_train_acc"] == epoch


def test_spread_at_matched_train_accuracy_and_null_where_a_member_never_gets_there():
    def at(s, seed):
        out = {"0.8": 0.6 - 0.02 * math.log(s), "0.9": 0.65 + 0.001 * seed, "0.95": 0.7}
        return out if s < 2.0 else {**out, "0.95": None}   # the largest sigma_w never reaches 95 %
    ms = [member(s, seed, 0.8, at_train=at(s, seed)) for seed in range(2) for s in GRID]
    m = M.spread(ms, "sgd")["spread_at_train_acc"]
    assert set(m) == {"0.8", "0.9", "0.95", "0.995"}
    assert m["0.8"]["spread_pp"] == pytest.approx(200 * 0.01 * (math.log(2.5) - math.log(0.1)))
    assert m["0.8"]["memory_slope"] == pytest.approx(-2.0) and m["0.8"]["n_reached"] == 12
    assert m["0.8"]["epoch_median"] == 4
    assert m["0.9"]["spread_pp"] == pytest.approx(0.0, abs=1e-9) and m["0.9"]["memory_slope"] == pytest.approx(0.0)
    assert m["0.95"]["spread_pp"] is None and m["0.95"]["memory_slope"] is None and m["0.95"]["n_reached"] == 10
    assert m["0.995"]["spread_pp"] is None and m["0.995"]["n_reached"] == 0


# --------------------------------------------------------------------------- repair gap, measured clocks
def test_repair_gap_median_in_pp():
    ms = setting(lambda s, seed: 0.8)
    ms = [{**m, "repair_gap": g} for m, g in zip(ms, [0.02, -0.01, 0.03] * 6)]
    assert M.spread(ms, "sgd")["repair_gap_median_pp"] == pytest.approx(2.0)


def _rows_with_updates(member_i, sigma_w, rms, ms):
    return [{"member": member_i, "optimizer": "adam", "sigma_w": sigma_w, "seed": 0, "epoch": e, "step": 10 * e,
             "train_acc": 0.5 + 0.1 * e, "val_loss": [2.0, 0.5, 0.7][e], "val_acc": 0.5, "test_acc": 0.6,
             "param_norm_layers": {"dense_0/kernel": sigma_w, "dense_0/bias": 0.0},
             "update_rms_sum": {"dense_0/kernel": rms[e], "head/kernel": 3 * rms[e], "dense_0/bias": 100.0},
             "update_ms_sum": {"dense_0/kernel": ms[e], "head/kernel": ms[e], "dense_0/bias": 100.0},
             "diverged": False} for e in range(3)]


def test_measured_update_clocks_mean_over_kernels_at_the_end_and_at_the_selected_epoch():
    rows = _rows_with_updates(0, 1.0, [0.0, 1.0, 2.0], [0.0, 0.1, 0.4])
    assert H.measured_clocks(rows[2]) == pytest.approx({"T_update": 4.0, "T_update2": 0.4})   # biases ignored
    assert H.measured_clocks({"epoch": 0}) == {"T_update": None, "T_update2": None}         # an old run's row
    s = H.member_summary(rows, {"optimizer": "adam", "sigma_w": 1.0, "seed": 0}, np.full(20, 0.1), 10, 0.0)
    assert s["clocks"]["T_update"] == pytest.approx(4.0) and s["clocks"]["T_adapt"] == pytest.approx(2.0)
    assert s["clocks_at_best"]["T_update"] == pytest.approx(2.0) and s["clocks_at_best"]["T_update2"] == pytest.approx(0.1)
    rows += _rows_with_updates(1, 2.0, [0.0, 3.0, 4.0], [0.0, 0.3, 0.6])
    sp = M.summarize(rows, None, np.full(20, 0.1), 10, 0.0)["spread"]["adam"]
    assert sp["clocks"]["T_update"] == pytest.approx((8.0 + 4.0) / 2)   # median of the two members
    assert sp["clocks_at_best"]["T_update2"] == pytest.approx(0.2)


# --------------------------------------------------------------------------- along the run, clock collapse
def test_spreads_over_time_report_the_clocks_reached_at_each_horizon():
    rows = []
    for i, (s, accs) in enumerate(((0.5, [0.1, 0.6, 0.7, 0.8]), (2.0, [0.1, 0.4, 0.6, 0.8]))):
        rows += [{"member": i, "optimizer": "sgd", "sigma_w": s, "seed": 0, "epoch": e, "step": 25 * e,
                  "train_acc": 1.0, "val_loss": 3.0 - e, "val_acc": 0.5, "test_acc": a, "diverged": False}
                 for e, a in enumerate(accs)]
    out = {e["epoch"]: e for e in horizon.spreads_over_time(rows, [1, 3], np.full(75, 0.05), 128, 0.0)}
    assert out[1]["clocks"]["T_SGD"] == pytest.approx(25 * 0.05 ** 2 / 128)
    assert out[3]["clocks"]["T_SGD"] == pytest.approx(75 * 0.05 ** 2 / 128)
    assert out[3]["clocks"]["T_adapt"] == pytest.approx(75 * 0.05)
    assert out[1]["spread_pp"] == pytest.approx(20.0) and out[1]["spread_pp_per_seed"] == pytest.approx([20.0])
    assert out[3]["memory_slope"] == pytest.approx(0.0) and out[1]["seeds"] == [0]
    bare = horizon.spreads_over_time(rows, [3])[0]
    assert bare["clocks"]["T_SGD"] is None and bare["spread_pp"] == out[3]["spread_pp"]


def _synthetic_runs(generating_clock, n_seeds=5, seed=0):
    """Constant-lr runs whose spread is one curve in ln(generating clock) plus seed noise."""
    rng = np.random.default_rng(seed)
    runs = []
    for lr, epochs in ((0.2, 5), (0.1, 20), (0.05, 80), (0.025, 320)):
        t = np.geomspace(1, epochs, 8)
        clk = {"T_SGD": t * 25 * lr ** 2 / 128, "T_adapt": t * 25 * lr}
        truth = 5.0 - 3.0 * np.log(clk[generating_clock])      # one curve for every run in that clock
        runs.append({"clocks": {c: v.tolist() for c, v in clk.items()},
                     "per_seed": truth + 0.8 * rng.standard_normal((n_seeds, t.size))})
    return runs


@pytest.mark.parametrize("truth, other", [("T_SGD", "T_adapt"), ("T_adapt", "T_SGD")])
def test_clock_collapse_prefers_the_clock_that_generated_the_data(truth, other):
    out = horizon.clock_collapse(_synthetic_runs(truth), n_boot=300)
    assert out["better"] == truth and out["decisive"] is True
    assert out["clocks"][truth]["residual_var_pp2"] < out["clocks"][other]["residual_var_pp2"] / 5
    lo, hi = out["clocks"][truth]["ci95"]
    assert lo <= out["clocks"][truth]["residual_var_pp2"] <= hi
    assert out["difference_ci95"][other][0] > 0 and out["n_runs"] == 4 and out["n_points"] == 32
    assert out == horizon.clock_collapse(_synthetic_runs(truth), n_boot=300)   # seeded: equal inputs, equal output


def test_clock_collapse_is_undecided_when_the_runs_share_lr_over_b():
    # equal lr / b and equal steps: T_SGD and T_adapt are proportional, so neither can collapse better
    runs = _synthetic_runs("T_SGD")[:1] * 3
    out = horizon.clock_collapse(runs, n_boot=200)
    v = [out["clocks"][c]["residual_var_pp2"] for c in ("T_SGD", "T_adapt")]
    assert v[0] == pytest.approx(v[1], rel=1e-6) and out["decisive"] is False


def test_collapse_curve_from_spreads_over_time_entries():
    entries = [{"epoch": e, "setting": "sgd", "seeds": [0, 2], "spread_pp_per_seed": [10.0 + e, 12.0 + e],
                "clocks": {"T_SGD": 0.01 * e, "T_adapt": e}} for e in (2, 1)]
    c = horizon.collapse_curve(entries, "sgd")
    assert c["clocks"]["T_SGD"] == [0.01, 0.02] and c["per_seed"].tolist() == [[11.0, 12.0], [13.0, 14.0]]


def test_member_kernel_norm_at_the_interpolated_selection():
    rows = [{"epoch": e, "step": 10 * e, "train_acc": tr, "val_loss": vl, "test_acc": 0.5, "diverged": False,
             "param_norm_layers": {"dense_0/kernel": n, "bn_0/scale": 9.0}}
            for e, (tr, vl, n) in enumerate([(0.1, 2.0, 1.0), (0.9, 0.5, 2.0), (1.0, 0.6, 4.0), (1.0, 0.7, 5.0)])]
    s = H.member_summary(rows, {"optimizer": "sgd", "sigma_w": 1.0, "seed": 0}, None, 10, 0.0)
    assert (s["best_epoch"], s["best_epoch_interpolated"]) == (1, 2)
    assert (s["kernel_norm_best"], s["kernel_norm_best_interpolated"], s["kernel_norm_final"]) == (2.0, 4.0, 5.0)
