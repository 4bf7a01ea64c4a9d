"""Per-setting spreads (jaxinit.forgetting.memory / stats): three selection rules side by side, what is
dropped and why, the common sigma_w grid, the t interval over seeds; hand-made histories, values by hand."""
from __future__ import annotations

import json
import math

import numpy as np
import pytest

from jaxinit.errors import ConfigError
from jaxinit.forgetting import memory as M
from jaxinit.shared import seed_stats as stats

SIGMAS = (0.5, 1.0, 2.0)


def rows_of(member, sigma_w, seed, *, val_loss, train_acc, test_acc, optimizer="sgd", diverged_from=None,
            diverged_step=None, steps=None):
    """One member's rows, epochs 0..n-1, 10 steps an epoch; from `diverged_from` on flagged and frozen
    at `diverged_step` as the run loop does (step counter held at the step that went non-finite)."""
    n = len(val_loss)
    steps = steps or [10 * e for e in range(n)]
    out = []
    for e in range(n):
        flagged = diverged_from is not None and e >= diverged_from
        out.append({"member": member, "optimizer": optimizer, "sigma_w": sigma_w, "seed": seed, "epoch": e,
                    "step": diverged_step if flagged else steps[e], "lr": 0.1, "train_loss": 1.0,
                    "train_acc": train_acc[e], "val_loss": val_loss[e], "val_acc": 0.5, "test_loss": 1.0,
                    "test_acc": test_acc[e], "param_norm": 10.0,
                    "param_norm_layers": {"dense_0/kernel": sigma_w, "bn_0/scale": 16.0},
                    "diverged": flagged, "diverged_step": diverged_step if flagged else None})
    return out


def summarize(rows):
    return M.summarize(rows, None, np.full(40, 0.1), 10, 0.0)  # one schedule shared by all members


# --------------------------------------------------------------------------- selection side by side
# best val at epoch 1 (not interpolating), best val among interpolating epochs at epoch 2, final epoch 3
BEST = {0: (0.80, 0.70, 0.60), 1: (0.82, 0.74, 0.66)}     # 20 and 16 pp
INTERP = {0: (0.80, 0.78, 0.76), 1: (0.80, 0.79, 0.78)}   # 4 and 2 pp
FINAL = {0: (0.81, 0.80, 0.79), 1: (0.80, 0.80, 0.80)}    # 2 and 0 pp
TRAIN_AT_BEST = {0: (0.97, 0.96, 0.98), 1: (0.95, 0.97, 0.97)}


def side_by_side_rows():
    rows, m = [], 0
    for seed in (0, 1):
        for j, s in enumerate(SIGMAS):
            rows += rows_of(m, s, seed, val_loss=[2.0, 0.5, 0.6, 0.7],
                            train_acc=[0.1, TRAIN_AT_BEST[seed][j], 0.996, 1.0],
                            test_acc=[0.1, BEST[seed][j], INTERP[seed][j], FINAL[seed][j]])
            m += 1
    return rows


def test_three_selection_rules_side_by_side():
    sp = summarize(side_by_side_rows())["spread"]["sgd"]
    assert sp["spread_pp_per_seed"] == pytest.approx([20.0, 16.0])
    assert sp["spread_pp"] == pytest.approx(18.0)
    assert sp["spread_pp_interpolated_per_seed"] == pytest.approx([4.0, 2.0])
    assert sp["spread_pp_interpolated"] == pytest.approx(3.0)
    assert sp["spread_pp_final_per_seed"] == pytest.approx([2.0, 0.0])
    assert sp["spread_pp_final"] == pytest.approx(1.0)
    assert sp["train_acc_at_best_min"] == 0.95    # the paper's rule picks predictors that do not interpolate
    assert sp["all_interpolated"] is True
    # clocks: best val at step 10, interpolated at step 20, end of the 40 steps given
    assert sp["clocks_at_best"]["T_adapt"] == pytest.approx(1.0)
    assert sp["clocks_at_best_interpolated"]["T_adapt"] == pytest.approx(2.0)
    assert sp["clocks"]["T_adapt"] == pytest.approx(4.0)


def test_interpolated_spread_null_if_a_usable_member_never_interpolates():
    rows = side_by_side_rows()
    for r in rows:
        if r["member"] == 4:
            r["train_acc"] = min(r["train_acc"], 0.99)
    sp = summarize(rows)["spread"]["sgd"]
    assert sp["spread_pp_interpolated"] is None and sp["spread_interpolated_ci95"] is None
    assert sp["spread_pp_interpolated_per_seed"] == []
    assert sp["spread_pp"] == pytest.approx(18.0) and sp["all_interpolated"] is False


# --------------------------------------------------------------------------- statistics
def test_t_interval_by_hand():
    # mean 15, s = 5, n = 3, t_{0.975, 2} = 4.302653 (tables): half width 4.302653 * 5 / sqrt(3) = 12.4207
    half = 4.302653 * 5 / math.sqrt(3)
    assert stats.t_interval([20.0, 10.0, 15.0]) == pytest.approx([15 - half, 15 + half], rel=1e-6)
    assert stats.t_interval([7.0]) is None
    assert stats.t_interval([]) is None
    assert stats.t_interval([3.0, 3.0]) == [3.0, 3.0]


def test_spread_ci95_over_seeds():
    # per-seed 20 and 16: mean 18, s / sqrt(n) = 2, t_{0.975, 1} = 12.706205 -> 18 -+ 25.41241
    sp = summarize(side_by_side_rows())["spread"]["sgd"]
    half = 12.706205 * 2
    assert sp["spread_ci95"] == pytest.approx([18 - half, 18 + half], rel=1e-6)
    assert sp["spread_pp_std"] == pytest.approx(math.sqrt(8.0))
    # interpolated: 4 and 2 -> 3 -+ 12.706205; final: 2 and 0 -> 1 -+ 12.706205
    assert sp["spread_interpolated_ci95"] == pytest.approx([3 - 12.706205, 3 + 12.706205], rel=1e-6)
    assert sp["spread_final_ci95"] == pytest.approx([1 - 12.706205, 1 + 12.706205], rel=1e-6)


# --------------------------------------------------------------------------- what is dropped, and why
def _three_sigma_seed(seed, accs, first_member=0, **special):
    """Rows of one seed over SIGMAS (val loss lowest at epoch 2); `special[j]` replaces member j's kwargs."""
    rows = []
    for j, (s, a) in enumerate(zip(SIGMAS, accs)):
        kw = dict(val_loss=[2.0, 0.8, 0.5, 0.6], train_acc=[0.1, 0.9, 1.0, 1.0], test_acc=[0.1, 0.5, a, a])
        kw.update(special.get(f"m{j}", {}))
        rows += rows_of(first_member + j, s, seed, **kw)
    return rows


def test_member_diverged_after_its_best_epoch_keeps_its_predictor():
    # sigma_w = 2 diverges mid-way through epoch 3, after its best epoch 2
    late = dict(val_loss=[2.0, 0.8, 0.5, None], train_acc=[0.1, 0.9, 1.0, 0.1], test_acc=[0.1, 0.5, 0.6, 0.1],
                diverged_from=3, diverged_step=25)
    s = summarize(_three_sigma_seed(0, (0.9, 0.8, 0.0), m2=late))
    assert s["members"][2]["diverged"] is True and s["members"][2]["diverged_before_best"] is False
    sp = s["spread"]["sgd"]
    assert sp["n_diverged"] == 1 and sp["n_dropped"] == 0 and sp["dropped"] == []
    assert sp["spread_pp"] == pytest.approx(30.0)   # 0.9 - 0.6: the late diverger's predictor counts


def test_member_diverged_before_its_best_epoch_is_dropped_with_its_reason():
    # sigma_w = 2 goes non-finite at step 15; the frozen state, evaluated at epochs 2 and 3, has the lowest loss
    early = dict(val_loss=[2.0, 0.8, 0.3, 0.3], train_acc=[0.1, 0.9, 0.95, 0.95], test_acc=[0.1, 0.5, 0.2, 0.2],
                 diverged_from=2, diverged_step=15)
    s = summarize(_three_sigma_seed(0, (0.9, 0.8, 0.0), m2=early))
    assert s["members"][2]["best_epoch"] == 2 and s["members"][2]["diverged_before_best"] is True
    sp = s["spread"]["sgd"]
    assert sp["n_diverged"] == 1 and sp["n_dropped"] == 1
    assert sp["dropped"] == [{"member": 2, "sigma_w": 2.0, "seed": 0, "reason": "diverged before its best epoch"}]
    assert sp["spread_pp"] == pytest.approx(10.0)   # over sigma_w 0.5 and 1 only
    assert sp["sigma_w_used"] == [0.5, 1.0] and sp["sigma_w_excluded"] == [2.0]


def test_member_without_finite_validation_loss_is_dropped_even_if_not_flagged_diverged():
    never = dict(val_loss=[None, math.nan, None, math.inf])
    s = summarize(_three_sigma_seed(0, (0.9, 0.8, 0.7), m1=never))
    assert s["members"][1]["diverged"] is False and s["members"][1]["best_epoch"] is None
    sp = s["spread"]["sgd"]
    assert sp["n_diverged"] == 0 and sp["n_dropped"] == 1
    assert sp["dropped"] == [{"member": 1, "sigma_w": 1.0, "seed": 0, "reason": "no finite validation loss"}]
    assert sp["spread_pp"] == pytest.approx(20.0)   # 0.9 vs 0.7
    json.dumps(s, allow_nan=False)


# --------------------------------------------------------------------------- one sigma_w grid for all seeds
def test_per_seed_spreads_over_the_sigma_w_common_to_every_seed():
    # seed 0 has 0.5, 1, 2 usable; seed 1 loses sigma_w = 2 (no finite val loss); a sigma_w = 4 member of
    # seed 0 alone is outside the common grid but not dropped
    rows = _three_sigma_seed(0, (0.9, 0.8, 0.5))
    rows += _three_sigma_seed(1, (0.85, 0.8, 0.6), first_member=3, m2=dict(val_loss=[None] * 4))
    rows += rows_of(6, 4.0, 0, val_loss=[2.0, 0.8, 0.5, 0.6], train_acc=[0.1, 0.9, 1.0, 1.0],
                    test_acc=[0.1, 0.5, 0.1, 0.1])
    sp = summarize(rows)["spread"]["sgd"]
    assert sp["sigma_w_used"] == [0.5, 1.0] and sp["sigma_w_excluded"] == [2.0, 4.0]
    assert sp["spread_pp_per_seed"] == pytest.approx([10.0, 5.0])   # not 80 (seed 0 over 0.5..4) and 5
    assert sp["spread_pp"] == pytest.approx(7.5) and sp["n_seeds"] == 2 and sp["seeds"] == [0, 1]
    assert sp["n_dropped"] == 1 and sp["dropped"][0]["member"] == 5
    assert sp["spread_pp_final_per_seed"] == pytest.approx([10.0, 5.0])


def test_common_grid_and_per_seed_spreads_helpers():
    assert stats.common_grid({0: {0.5, 1.0, 2.0}, 1: {1.0, 2.0, 4.0}}) == [1.0, 2.0]
    assert stats.common_grid({}) == []
    vals = {1: {1.0: 0.7, 2.0: 0.9}, 0: {1.0: 0.8, 2.0: 0.6}}
    assert stats.per_seed_spreads(vals, [1.0, 2.0]) == pytest.approx([20.0, 20.0])
    assert stats.per_seed_spreads(vals, [1.0]) is None
    assert stats.per_seed_spreads({0: {1.0: 0.8, 2.0: math.nan}}, [1.0, 2.0]) is None


# --------------------------------------------------------------------------- selection rules by name
def test_selection_rules_name_their_summary_keys():
    assert M.SELECTION_RULES == {"best_val": "spread_pp", "best_val_interpolated": "spread_pp_interpolated",
                                 "final": "spread_pp_final"}
    sp = summarize(side_by_side_rows())["spread"]["sgd"]
    for rule, key in M.SELECTION_RULES.items():
        assert M.check_selection(rule) == key
        keys = M.selection_keys(rule)
        assert {keys["spread"], keys["std"], keys["ci"], keys["per_seed"]} <= set(sp)


def test_unknown_selection_rule_is_a_one_line_config_error():
    with pytest.raises(ConfigError, match="best_vall") as e:
        M.check_selection("best_vall")
    assert "\n" not in str(e.value) and "best_val_interpolated" in str(e.value)


def test_spreads_over_time_select_among_the_epochs_seen_so_far():
    from jaxinit.forgetting.horizon import spreads_over_time

    def rows(seed, sigma, member, accs, losses):
        return [{"member": member, "optimizer": "sgd", "sigma_w": sigma, "seed": seed, "epoch": e, "step": 10 * e,
                 "train_acc": 1.0, "val_loss": l, "val_acc": 0.5, "test_acc": a, "diverged": False}
                for e, (a, l) in enumerate(zip(accs, losses))]
    hist = (rows(0, 0.5, 0, [0.1, 0.6, 0.7, 0.8], [3, 2, 1, 0.5]) +
            rows(0, 2.0, 1, [0.1, 0.4, 0.7, 0.8], [3, 2.5, 1, 0.4]))
    by_t = {e["epoch"]: e for e in spreads_over_time(hist, [1, 3, 9])}
    assert set(by_t) == {1, 3}                                  # 9 is past the last evaluation
    assert by_t[1]["spread_pp"] == pytest.approx(20.0)          # best at epoch 1 for both: 0.6 vs 0.4
    assert by_t[3]["spread_pp"] == pytest.approx(0.0) and by_t[3]["best_epoch_median"] == 3
