"""Initialization-memory metrics (jaxinit.forgetting.memory) on hand-made histories, values worked out by hand."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from jaxinit.forgetting import memory as M

DESIGN_MEMBER_KEYS = {"optimizer", "sigma_w", "seed", "best_epoch", "test_acc_at_best",
                      "train_acc_at_best", "tau_interp", "repair_gap", "param_norm_init",
                      "param_norm_final", "clocks", "diverged"}
DESIGN_SPREAD_KEYS = {"spread_pp", "min_test_acc", "max_test_acc", "all_interpolated"}


def history(member=0, optimizer="sgd", sigma_w=1.0, seed=0, *, val_loss, train_acc=None,
            val_acc=None, test_acc=None, param_norm=None, diverged_from=None):
    """Rows of one member, epoch 0..n-1; lists default to harmless constants."""
    n = len(val_loss)
    train_acc = train_acc or [0.5] * n
    val_acc = val_acc or [0.5] * n
    test_acc = test_acc or [0.5] * n
    param_norm = param_norm or [10.0] * n
    return [{"member": member, "optimizer": optimizer, "sigma_w": sigma_w, "seed": seed, "epoch": e,
             "step": 10 * e, "lr": 0.1, "train_loss": 1.0, "train_acc": train_acc[e],
             "val_loss": val_loss[e], "val_acc": val_acc[e], "test_loss": 1.0,
             "test_acc": test_acc[e], "param_norm": param_norm[e], "param_norm_layers": {"w": 1.0},
             "diverged": diverged_from is not None and e >= diverged_from} for e in range(n)]


# --------------------------------------------------------------------------- best epoch
def test_best_epoch_ties_pick_the_first():
    assert M.best_epoch(history(val_loss=[2.0, 1.0, 0.5, 0.5, 0.7])) == 2


def test_best_epoch_ignores_nan_and_none_and_row_order():
    rows = history(val_loss=[1.0, 0.4, math.nan, None, 0.4, float("inf")])
    assert M.best_epoch(rows[::-1]) == 1


def test_best_epoch_includes_the_init_evaluation():
    assert M.best_epoch(history(val_loss=[0.1, 0.5, 0.3])) == 0


def test_best_epoch_all_nan_is_none():
    assert M.best_epoch(history(val_loss=[math.nan, None])) is None


def test_duplicate_epoch_from_a_resume_keeps_the_later_row():
    rows = history(val_loss=[1.0, 0.9, 0.8])
    rows.append({**rows[1], "val_loss": 0.1})  # epoch 1 written again after a resume
    assert M.best_epoch(rows) == 1
    rows[-1] = {**rows[1], "val_loss": 5.0}
    assert M.best_epoch(rows) == 2


# --------------------------------------------------------------------------- tau_interp, repair gap
def test_tau_interp_first_epoch_at_threshold():
    rows = history(val_loss=[1] * 4, train_acc=[0.1, 0.9, 0.996, 0.999])
    assert M.tau_interp(rows) == 2
    assert M.tau_interp(rows, threshold=0.9) == 1


def test_tau_interp_never_reached_is_none():
    assert M.tau_interp(history(val_loss=[1] * 3, train_acc=[0.1, 0.99, 0.9949])) is None


def test_tau_interp_tolerates_float_rounding_of_the_threshold():
    # a mean of per-batch float32 accuracies can land a hair below an exact 99.5 %
    assert M.tau_interp(history(val_loss=[1, 1], train_acc=[0.5, 0.99499999])) == 1
    assert M.tau_interp(history(val_loss=[1, 1], train_acc=[0.5, 0.9949])) is None


def test_repair_gap_sign_and_value():
    up = history(val_loss=[1] * 4, train_acc=[0.1, 1.0, 1.0, 1.0], val_acc=[0.1, 0.70, 0.72, 0.75])
    down = history(val_loss=[1] * 4, train_acc=[0.1, 1.0, 1.0, 1.0], val_acc=[0.1, 0.80, 0.78, 0.74])
    assert M.repair_gap(up) == pytest.approx(0.05)
    assert M.repair_gap(down) == pytest.approx(-0.06)


def test_repair_gap_none_without_interpolation_or_final_accuracy():
    assert M.repair_gap(history(val_loss=[1] * 3, train_acc=[0.1, 0.2, 0.3])) is None
    rows = history(val_loss=[1] * 3, train_acc=[0.1, 1.0, 1.0], val_acc=[0.1, 0.8, math.nan])
    assert M.repair_gap(rows) is None


# --------------------------------------------------------------------------- clocks
def test_clocks_constant_schedule():
    c = M.clocks(np.full(100, 0.1), batch_size=10, l2=0.01)
    assert c == pytest.approx({"T_SGD": 0.1, "T_L2": 0.1, "T_adapt": 10.0})


def test_clocks_step_schedule():
    # 50 steps at 0.1 then 50 at 0.01: sum eta = 5.5, sum eta^2 = 0.5 + 0.005
    c = M.clocks([0.1] * 50 + [0.01] * 50, batch_size=10, l2=0.01)
    assert c == pytest.approx({"T_SGD": 0.0505, "T_L2": 0.055, "T_adapt": 5.5})


def test_clocks_no_l2_and_bad_batch():
    assert M.clocks([0.1, 0.2], batch_size=2, l2=0.0)["T_L2"] == 0.0
    with pytest.raises(ValueError):
        M.clocks([0.1], batch_size=0, l2=0.0)


# --------------------------------------------------------------------------- member summary
def test_member_summary_values_from_the_best_row():
    rows = history(val_loss=[2.0, 0.5, 0.9], train_acc=[0.1, 0.97, 1.0], val_acc=[0.1, 0.8, 0.85],
                   test_acc=[0.1, 0.79, 0.83], param_norm=[3.0, 4.0, 6.0])
    s = M.member_summary(rows, {"optimizer": "adam", "sigma_w": 0.5, "seed": 3},
                         np.full(100, 0.1), 10, 0.01)
    assert DESIGN_MEMBER_KEYS <= set(s)
    assert set(s["clocks"]) == {"T_SGD", "T_L2", "T_adapt"}
    assert (s["optimizer"], s["sigma_w"], s["seed"]) == ("adam", 0.5, 3)
    assert s["best_epoch"] == 1
    assert (s["test_acc_at_best"], s["train_acc_at_best"], s["val_acc_at_best"]) == (0.79, 0.97, 0.8)
    assert s["tau_interp"] == 2 and s["repair_gap"] == 0.0
    assert (s["param_norm_init"], s["param_norm_best"], s["param_norm_final"]) == (3.0, 4.0, 6.0)
    assert s["final_epoch"] == 2 and s["test_acc_final"] == 0.83
    assert s["clocks"]["T_adapt"] == pytest.approx(10.0)
    assert s["diverged"] is False


def test_member_summary_diverged_member_with_nan_rows():
    rows = history(val_loss=[2.0, 0.7, None, math.nan], test_acc=[0.1, 0.6, None, math.nan],
                   param_norm=[3.0, 5.0, math.nan, None], diverged_from=2)
    s = M.member_summary(rows, {"optimizer": "sgd", "sigma_w": 2.0, "seed": 0}, None, 10, 0.0)
    assert s["diverged"] is True
    assert s["best_epoch"] == 1 and s["test_acc_at_best"] == 0.6
    assert s["param_norm_final"] is None
    assert s["clocks"] == {"T_SGD": None, "T_L2": None, "T_adapt": None}
    json.dumps(s, allow_nan=False)


# --------------------------------------------------------------------------- spread
def _member(optimizer, sigma_w, seed, acc, *, tau=5, diverged=False, n0=1.0, n1=1.0, final=None):
    return {"optimizer": optimizer, "sigma_w": sigma_w, "seed": seed, "test_acc_at_best": acc,
            "test_acc_final": acc if final is None else final, "tau_interp": tau,
            "diverged": diverged, "param_norm_init": n0, "param_norm_best": n1,
            "param_norm_final": n1, "clocks": {"T_SGD": 0.1, "T_L2": 0.0, "T_adapt": 10.0}}


def test_spread_two_seeds_by_hand():
    # seed 0: 0.9, 0.8, 0.7 -> 20 pp; seed 1: 0.85, 0.8, 0.75 -> 10 pp; mean 15, std sqrt(50)
    ms = [_member("sgd", s, 0, a) for s, a in zip((0.5, 1.0, 2.0), (0.9, 0.8, 0.7))]
    ms += [_member("sgd", s, 1, a) for s, a in zip((0.5, 1.0, 2.0), (0.85, 0.8, 0.75))]
    ms += [_member("adam", 1.0, 0, 0.5)]  # another setting: must not leak in
    sp = M.spread(ms, "sgd")
    assert DESIGN_SPREAD_KEYS <= set(sp)
    assert sp["spread_pp"] == pytest.approx(15.0)
    assert sp["spread_pp_std"] == pytest.approx(math.sqrt(50.0))
    assert sp["spread_pp_per_seed"] == pytest.approx([20.0, 10.0])
    assert sp["n_seeds"] == 2 and sp["n_members"] == 6 and sp["n_diverged"] == 0
    # seed-averaged curve 0.875, 0.8, 0.725
    assert sp["min_test_acc"] == pytest.approx(0.725)
    assert sp["max_test_acc"] == pytest.approx(0.875)
    assert sp["all_interpolated"] is True
    assert sp["clocks"] == pytest.approx({"T_SGD": 0.1, "T_L2": 0.0, "T_adapt": 10.0})


def test_spread_excludes_and_counts_diverged_members():
    ms = [_member("sgd", s, 0, a) for s, a in zip((0.5, 1.0), (0.9, 0.8))]
    ms.append(_member("sgd", 4.0, 0, 0.1, tau=None, diverged=True))
    sp = M.spread(ms, "sgd")
    assert sp["spread_pp"] == pytest.approx(10.0)
    assert sp["n_diverged"] == 1 and sp["n_members"] == 3
    assert sp["spread_pp_std"] is None and sp["n_seeds"] == 1
    assert sp["all_interpolated"] is False  # the diverged member never interpolated


def test_spread_final_epoch_and_single_member_seed():
    ms = [_member("adam", 0.5, 0, 0.9, final=0.85), _member("adam", 2.0, 0, 0.7, final=0.82),
          _member("adam", 0.5, 1, 0.9)]  # seed 1 has one member: no spread from it
    sp = M.spread(ms, "adam")
    assert sp["n_seeds"] == 1 and sp["spread_pp"] == pytest.approx(20.0)
    assert sp["spread_pp_final"] == pytest.approx(3.0)


def test_radial_memory_sign():
    sig = (0.25, 0.5, 1.0, 2.0)
    keep = [_member("sgd", s, 0, 0.9, n0=10 * s, n1=5 + 3 * s) for s in sig]
    flip = [_member("sgd", s, 0, 0.9, n0=10 * s, n1=9 - s ** 2) for s in sig]
    flat = [_member("sgd", s, 0, 0.9, n0=10 * s, n1=7.0) for s in sig]
    assert M.spread(keep, "sgd")["radial_memory"] == pytest.approx(1.0)
    assert M.spread(flip, "sgd")["radial_memory"] < -0.9
    assert M.spread(flat, "sgd")["radial_memory"] is None
    assert M.spread(keep[:2], "sgd")["radial_memory"] is None  # 2 points: undefined


def test_spread_of_an_empty_setting():
    sp = M.spread([_member("sgd", 1.0, 0, 0.9)], "muon")
    assert sp["spread_pp"] is None and sp["all_interpolated"] is False and sp["n_members"] == 0


# --------------------------------------------------------------------------- summarize, JSON
def _run_rows():
    rows = []
    m = 0
    for opt in ("sgd", "adam"):
        for seed in (0, 1):
            for sigma in (0.5, 1.0, 2.0):
                acc = 0.9 - (0.1 * sigma if opt == "sgd" else 0.01 * sigma) - 0.01 * seed
                rows += history(m, opt, sigma, seed, val_loss=[2.0, 0.5, np.float32(0.6)],
                                train_acc=[0.1, 0.99, 1.0], val_acc=[0.1, acc, acc],
                                test_acc=[0.1, np.float32(acc), acc], param_norm=[10 * sigma, 11, 12])
                m += 1
    rows += history(m, "sgd", 4.0, 0, val_loss=[2.0, 1.5, math.nan], diverged_from=2,
                    test_acc=[0.1, 0.2, math.nan])
    return rows


def test_summarize_is_json_ready_ordered_and_deterministic():
    rows = _run_rows()
    rng = np.random.default_rng(0)
    shuffled = [rows[i] for i in rng.permutation(len(rows))]
    s1 = M.summarize(rows, None, np.full(100, 0.1), 10, {i: 0.01 for i in range(13)})
    s2 = M.summarize(shuffled, None, np.full(100, 0.1), 10, {i: 0.01 for i in range(13)})
    text = json.dumps(s1, allow_nan=False, sort_keys=True)  # raises on NaN or numpy scalars
    assert text == json.dumps(s2, allow_nan=False, sort_keys=True)
    assert [m["member"] for m in s1["members"]] == list(range(13))
    assert list(s1["spread"]) == ["sgd", "adam"]
    assert type(s1["members"][0]["test_acc_at_best"]) is float
    assert s1["members"][12]["diverged"] is True and s1["spread"]["sgd"]["n_diverged"] == 1
    # sgd: 0.1 * (2.0 - 0.5) = 15 pp in both seeds; adam: 1.5 pp
    assert s1["spread"]["sgd"]["spread_pp"] == pytest.approx(15.0, abs=1e-4)
    assert s1["spread"]["adam"]["spread_pp"] == pytest.approx(1.5, abs=1e-4)
    assert s1["members"][0]["clocks"]["T_L2"] == pytest.approx(0.1)


def test_summarize_with_member_info_and_per_member_schedules():
    rows = history(0, "sgd", 1.0, 0, val_loss=[1, 0.5]) + history(1, "sgd", 2.0, 0, val_loss=[1, 0.4])
    info = [{"optimizer": "sgd", "sigma_w": 1.0, "seed": 0}, {"optimizer": "sgd", "sigma_w": 2.0, "seed": 0}]
    s = M.summarize(rows, info, [[0.1] * 10, [0.2] * 10], [10, 5], [0.0, 0.1])
    assert s["members"][0]["clocks"] == pytest.approx({"T_SGD": 0.01, "T_L2": 0.0, "T_adapt": 1.0})
    assert s["members"][1]["clocks"] == pytest.approx({"T_SGD": 0.08, "T_L2": 0.2, "T_adapt": 2.0})


def test_to_jsonable_converts_numpy_and_nan():
    out = M.to_jsonable({"a": np.float32(0.5), "b": np.int64(3), "c": [np.nan, np.inf, 1.0],
                         "d": np.bool_(True), "e": (1, 2), "f": np.arange(2)})
    assert out == {"a": 0.5, "b": 3, "c": [None, None, 1.0], "d": True, "e": [1, 2], "f": [0, 1]}
    assert type(out["b"]) is int and type(out["d"]) is bool


# --------------------------------------------------------------------------- files, table
def test_read_metrics_drops_a_truncated_last_line(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"epoch": 0, "val_loss": NaN}\n{"epoch": 1, "val_loss": null}\n{"epoch": 2, "val_lo')
    rows = M.read_metrics(p)
    assert [r["epoch"] for r in rows] == [0, 1]
    assert math.isnan(rows[0]["val_loss"]) and rows[1]["val_loss"] is None


def test_read_metrics_rejects_corruption_in_the_middle(tmp_path):
    p = tmp_path / "metrics.jsonl"
    p.write_text('{"epoch": 0}\n{"epo\n{"epoch": 2}\n\n')
    with pytest.raises(ValueError, match="line 2"):
        M.read_metrics(p)


def test_markdown_table():
    s = M.summarize(_run_rows(), None, np.full(100, 0.1), 10, 0.0)
    table = M.markdown_table(s)
    lines = table.strip().splitlines()
    assert len(lines) == 4  # header, rule, sgd, adam
    assert lines[2].startswith("| sgd (1 diverged) | 2 | 15.0 ± 0.0 |")
    assert "| no |" in lines[2] and "| yes |" in lines[3]  # the diverged sgd member never interpolated
    assert lines[3].split("|")[-2].strip() == "10"  # T_adapt = 100 * 0.1
