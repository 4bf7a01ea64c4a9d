"""Designs over data splits (jaxinit.forgetting.design, clock_presets, pooled): the points run on every split,
cells pool the replicates, contrasts resolve to horizons, and the clock test over trained cells finds a planted
clock; runs of one preset on two splits pool into one interval."""
import json
from dataclasses import replace

import numpy as np
import pytest

from experiments import clocks as experiment
from jaxinit.errors import ConfigError
from jaxinit.forgetting import clock_presets as P
from jaxinit.forgetting import clock_run, clocks as C, design, pooled


@pytest.fixture(scope="module")
def smoke_design():
    return clock_run.run(P.DESIGN_SMOKE, None, progress=False).summary["design"]


def test_a_design_runs_every_point_on_every_split_and_pools_the_replicates(smoke_design):
    d = smoke_design
    assert d["splits"] == 2 and d["seeds"] == 2
    assert set(d["points"]) == {"sgd_lr0.05_b64", "sgd_lr0.1_b32_e3"}
    cell = d["points"]["sgd_lr0.1_b32_e3"]["cells"][-1]
    st = cell["final"]
    assert st["spread"]["n"] == 4 and st["spread"]["n_splits"] == 2 and st["spread"]["df"] == 1
    assert len(st["spread_per_replicate"]) == 4 and st["null"] is not None
    # the pair and the series are B - A over the same four replicates, under every rule both cells have
    pr = d["pairs"]["eq"]
    assert pr["a"] == ["sgd_lr0.05_b64", 2] and pr["b"] == ["sgd_lr0.1_b32_e3", 1]
    assert pr["final"]["spread_diff"]["n"] == 4 and "p" in pr["final"]["spread_diff"]
    assert d["series"]["b"]["batch_sizes"] == [64, 32] and d["series"]["b"]["final"]["n"] == 4
    # clocks of the cells: T_SGD, sum eta, steps and epochs at the horizon, the effective clocks of the kernels
    clk = d["points"]["sgd_lr0.1_b32_e3"]["cells"][-1]["clocks"]
    assert clk["epochs"] == 3 and clk["steps"] > 0 and clk["T_SGD_eff_slowest"] > 0 and clk["T_adapt"] > 0


def test_split_points_train_on_other_splits_with_their_own_directories():
    p = C.points(P.DESIGN_SMOKE)[0]
    assert C.point_dir(p, 0) == p.name and C.point_dir(p, 2) == f"{p.name}_split2"
    assert C.point_config(P.DESIGN_SMOKE, p, 2).data.split_seed == P.DESIGN_SMOKE.data.split_seed + 2
    # long points evaluate less often (design.evals), the horizons that remain are still evaluated epochs
    assert C.eval_every(P.FORGET_SGD, 400) == 5 and C.eval_every(P.FORGET_SGD, 100) == 1


@pytest.mark.parametrize("field, value, fragment", [
    ("pairs", ("x=nope@1/sgd_lr0.05_b64@2",), "is not point@epoch"),
    ("pairs", ("x=sgd_lr0.05_b64@7/sgd_lr0.05_b64@2",), "is not a horizon"),
    ("pairs", ("no_equals",), "expected label=A@epoch/B@epoch"),
    ("batch_series", ("s=sgd_lr0.05_b64@2",), "over >= 2 batch sizes"),
])
def test_bad_contrasts_are_one_line_config_errors(field, value, fragment):
    cfg = replace(P.DESIGN_SMOKE, design=replace(P.DESIGN_SMOKE.design, **{field: value}))
    with pytest.raises(ConfigError) as e:
        C.validate(cfg)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_every_design_preset_validates_and_its_contrasts_are_at_equal_clocks():
    for name in ("forget_sgd", "forget_l2", "adaptive_tuned", "adaptive_tuned_resnet", "design_smoke"):
        C.validate(P.PRESETS[name])
    pairs, series = C.parse_pairs(P.FORGET_SGD)
    pts = {p.name: p for p in C.points(P.FORGET_SGD)}

    def clocks(ref):   # T_SGD and sum eta at a horizon on 1,600 examples
        p = pts[ref[0]]
        steps = ref[1] * (1600 // p.batch_size)
        return steps * p.lr ** 2 / p.batch_size, steps * p.lr
    for label, a, b in pairs:
        (ta, sa), (tb, sb) = clocks(a), clocks(b)
        if label.startswith("eqT"):
            assert ta == pytest.approx(tb) and sb == pytest.approx(2 * sa)
        elif label.startswith("eqS"):
            assert sa == pytest.approx(sb) and ta > tb
        else:   # linear scaling: equal T_SGD and sum eta at another batch size (b = 256 drops 64 of 1,600
            # examples an epoch, the last partial batch: 6 steps of 256 where 6.25 would be equal, 4 % short)
            assert ta == pytest.approx(tb, rel=0.05) and sa == pytest.approx(sb, rel=0.05)
    steps = {tuple(r): r[1] * (1600 // pts[r[0]].batch_size) for r in series[0][1]}
    assert set(steps.values()) == {2400} and {pts[n].batch_size for n, _ in series[0][1]} == {16, 32, 64, 128, 256}


def _cells(lr: float, epochs, spread_of, trained_from: int, seed: int) -> list[dict]:
    """Cells of one sgd point at b = 16 on 100 steps an epoch whose per-replicate spread is spread_of(T_SGD, S)."""
    rng = np.random.default_rng(seed)
    reps = [[j, s] for j in range(3) for s in range(2)]
    out = []
    for e in epochs:
        t, s = e * 100 * lr ** 2 / 16, e * 100 * lr
        per = spread_of(t, s) + 0.3 * rng.standard_normal(len(reps))
        acc = [[0.6, 0.6 - v / 100] for v in per]          # max - min over two sigma_w = the planted spread
        out.append({"epoch": e, "acc": {"final": acc}, "sigma_w": {"final": [0.1, 2.5]}, "replicates": {"final": reps},
                    "train_acc_final_min": 1.0 if e >= trained_from else 0.5,
                    "clocks": {"T_SGD": t, "T_adapt": s, "epochs": float(e)}})
    return out


@pytest.mark.parametrize("truth, expect", [(lambda t, s: 12 - 2 * np.log(t), "T_SGD"),
                                           (lambda t, s: 20 - 2 * np.log(s), "T_adapt")])
def test_the_clock_test_over_trained_cells_finds_the_planted_clock(truth, expect):
    cells = {f"p{lr}": _cells(lr, [5, 10, 20, 40, 80, 160], truth, 20, i) for i, lr in enumerate((0.05, 0.1, 0.2))}
    # untrained cells carry a spread no clock explains; the test must leave them out
    for c in cells.values():
        for cell in c:
            if cell["train_acc_final_min"] < 0.99:
                cell["acc"]["final"] = [[0.6, 0.6 - 0.4 * (k % 2)] for k in range(6)]
    res = design.collapse(cells, list(cells), ("T_SGD", "T_adapt", "epochs"), "final",
                          lambda c: design.trained(c, "final", 0.99), n_boot=200)
    assert res["better"] == expect and res["decisive"], res["clocks"]
    assert res["cells"] == {n: [20, 40, 80, 160] for n in cells}


def _summary(shift: float, seeds=3, effect=-0.04, rng_seed=0):
    grid = [0.1, 0.6, 2.5]
    rng = np.random.default_rng(rng_seed)
    members = [{"optimizer": "sgd", "sigma_w": w, "seed": s,
                **{k: 0.6 + shift + effect * np.log(w) + 0.005 * rng.standard_normal()
                   for k in ("test_acc_at_best", "test_acc_at_best_interpolated", "test_acc_final")},
                "kernel_norm_init": 10 * w, "kernel_norm_best": (10 * w) ** 0.5 * np.exp(0.01 * rng.standard_normal()),
                "kernel_norm_final": 5.0 * np.exp(0.01 * rng.standard_normal())}
               for s in range(seeds) for w in grid]
    return {"members": members, "spread": {"sgd": {}}}


def test_pooled_runs_of_two_splits_find_a_planted_memory_with_split_degrees_of_freedom(tmp_path, capsys):
    res = pooled.pooled([(0, _summary(0.0, rng_seed=1)), (1, _summary(0.05, rng_seed=2))])
    st = res["sgd"]["best_val"]
    assert st["spread"]["n_splits"] == 2 and st["spread"]["n"] == 6 and st["spread"]["df"] == 1
    assert st["slope"]["mean"] == pytest.approx(-4.0, abs=0.5) and st["slope_p"] < 0.01
    # planted couplings: half the log-norm kept at the selected epoch, none at the end
    assert res["sgd"]["coupling"]["best"]["mean"] == pytest.approx(0.5, abs=0.02)
    assert abs(res["sgd"]["coupling"]["final"]["mean"]) < 0.02 and res["sgd"]["coupling"]["best"]["n_splits"] == 2
    false = 0
    for k in range(20):
        flat = pooled.pooled([(0, _summary(0.0, effect=0.0, rng_seed=10 + 2 * k)),
                              (1, _summary(0.05, effect=0.0, rng_seed=11 + 2 * k))])["sgd"]["best_val"]
        false += flat["slope_p"] < 0.05
    assert false <= 3     # a 5 % test: about 1 of 20
    for k, shift in ((0, 0.0), (0, 0.05)):
        d = tmp_path / f"r{shift}"
        d.mkdir()
        (d / "summary.json").write_text(json.dumps(_summary(shift)))
        (d / "config.json").write_text(json.dumps({"data": {"split_seed": k}}))
    assert pooled.main([str(tmp_path / "r0.0"), str(tmp_path / "r0.05")]) == 2
    assert "share a data split" in capsys.readouterr().err


def test_a_design_preset_is_listed_with_what_it_decides(capsys):
    assert experiment.run(["--help"]) == 0
    out = capsys.readouterr().out
    for name in ("forget_sgd", "forget_l2", "adaptive_tuned", "adaptive_tuned_resnet"):
        assert name in out


@pytest.mark.parametrize("truth, expect, other", [(lambda t, s: 12 - 2 * np.log(t), "T_SGD", "T_adapt"),
                                                  (lambda t, s: 20 - 2 * np.log(s), "T_adapt", "T_SGD")])
def test_out_of_sample_prediction_favours_the_planted_clock_on_new_points(truth, expect, other):
    from jaxinit.forgetting import design_predict
    fit = {f"p{lr}": _cells(lr, [20, 40, 80, 160], truth, 0, i) for i, lr in enumerate((0.05, 0.1, 0.2))}
    new = {f"q{lr}": _cells(lr, [30, 60, 120], truth, 0, 10 + i) for i, lr in enumerate((0.07, 0.3))}
    res = design_predict.prediction(fit, new, ("T_SGD", "T_adapt"), "final", 0.99, n_boot=200)
    assert res["better"] == expect and res["n_fit"] == 12 and res["n_test"] == 6
    pair = res["pairwise"]["T_SGD - T_adapt"]
    assert (pair["ci95"][1] < 0) if expect == "T_SGD" else (pair["ci95"][0] > 0), pair
    assert res["mse"][other]["mse_pp2"] > res["mse"][expect]["mse_pp2"]


def test_a_points_line_over_splits_has_its_interval_over_the_split_means():
    from jaxinit.intervals import t_interval
    lines = [{"point": "p", "spread_per_seed_selected": [1.0, 3.0], "ci_selected": [0.0, 0.5]},
             {"point": "p", "spread_per_seed_selected": [5.0, 7.0], "ci_selected": [9.0, 9.5]}]
    merged = clock_run.merge_lines(lines)
    assert merged["spread_selected"] == 4.0 and merged["n_seeds"] == 4 and merged["splits"] == 2
    assert merged["ci_selected"] == t_interval([2.0, 6.0])     # not split 0's interval
    assert merged["ci_selected"][0] < merged["spread_selected"] < merged["ci_selected"][1]
