"""The clock test (issue 18): its design points, the horizon summaries of each run, the collapse verdict
per group of families, and the measured update clocks the step now writes."""
import json
from dataclasses import replace

import jax.numpy as jnp
import numpy as np
import pytest

from experiments import clocks as experiment
from jaxinit.errors import ConfigError
from jaxinit.forgetting import clock_test as T
from jaxinit.forgetting import clock_presets as P
from jaxinit.forgetting import clocks as C


def test_clock_test_design_holds_equal_t_sgd_equal_sum_eta_and_equal_steps():
    ps = {p.name: p for p in C.points(P.CLOCK_TEST)}
    assert set(ps) == {"sgd_lr0.05_b128", "sgd_lr0.2_b128_e20", "sgd_lr0.1_b128_e40", "sgd_lr0.025_b128_e320",
                       "sgd_lr0.05_b32_e20", "sgd_lr0.05_b64_e40"}
    n = 3200
    def t_sgd(p, e):
        return e * (n // p.batch_size) * p.lr ** 2 / p.batch_size
    def sum_eta(p, e):
        return e * (n // p.batch_size) * p.lr
    # equal T_SGD, sum eta x2 apart: 0.2 x 5, 0.1 x 20, 0.05 x 80, 0.025 x 320 (each a horizon of its run)
    eq_t = [(ps["sgd_lr0.2_b128_e20"], 5), (ps["sgd_lr0.1_b128_e40"], 20), (ps["sgd_lr0.05_b128"], 80),
            (ps["sgd_lr0.025_b128_e320"], 320)]
    assert all(e in T.horizons(p.epochs) for p, e in eq_t)
    assert len({round(t_sgd(p, e), 12) for p, e in eq_t}) == 1
    assert len({round(sum_eta(p, e), 9) for p, e in eq_t}) == 4
    # equal sum eta, T_SGD x2 apart: 0.2 x 20, 0.1 x 40, 0.05 x 80, 0.025 x 160
    eq_s = [(ps["sgd_lr0.2_b128_e20"], 20), (ps["sgd_lr0.1_b128_e40"], 40), (ps["sgd_lr0.05_b128"], 80),
            (ps["sgd_lr0.025_b128_e320"], 160)]
    assert all(e in T.horizons(p.epochs) for p, e in eq_s)
    assert len({round(sum_eta(p, e), 9) for p, e in eq_s}) == 1
    # equal lr and steps (2,000), batch 32 / 64 / 128: four and two times the gradient noise
    steps = {p.batch_size: p.epochs * (n // p.batch_size) for p in ps.values() if p.lr == 0.05}
    assert steps == {32: 2000, 64: 2000, 128: 2000}
    assert P.CLOCK_TEST.sweep.seeds >= 5 and P.ADAPTIVE_TEST.sweep.seeds >= 5
    C.validate(P.CLOCK_TEST)
    C.validate(P.ADAPTIVE_TEST)


def test_horizons_are_the_grid_up_to_the_last_epoch_and_respect_eval_every():
    assert T.horizons(20) == [1, 2, 3, 5, 7, 10, 14, 20]
    assert T.horizons(25) == [1, 2, 3, 5, 7, 10, 14, 20, 25]
    assert T.horizons(40, eval_every=5) == [5, 10, 20, 40]


@pytest.mark.parametrize("text, parsed", [("0.2@20", (0.2, 20, None)), ("0.05@20@32", (0.05, 20, 32))])
def test_sgd_runs_parse(text, parsed):
    assert C.sgd_run(text) == parsed


@pytest.mark.parametrize("change, fragment", [
    ({"sgd_lr_epochs": ("0.2@x",)}, "--clocks.sgd_lr_epochs: expected lr@epochs"),
    ({"sgd_lr_epochs": ("0.2@20@0",)}, "batch >= 1"),
    ({"sgd_lr_epochs": ("0.2@20@b",)}, "batch >= 1"),
    ({"sgd_lr_epochs": ("0.2@20", "0.2@20")}, "--clocks.sgd_lr_epochs: duplicate value"),
    # the same run as the lr sweep's point (lr 0.05 at the base batch and epochs) under another name
    ({"sgd_lr_epochs": ("0.05@2",)}, "appears twice"),
    ({"sgd_lr_epochs": ("0.05@2@64",)}, "appears twice"),
])
def test_bad_sgd_runs_are_one_line_config_errors(change, fragment):
    cfg = replace(P.SMOKE_CLOCKS, clocks=replace(P.SMOKE_CLOCKS.clocks, **change))
    with pytest.raises(ConfigError) as e:
        C.validate(cfg)
    assert fragment in str(e.value) and "\n" not in str(e.value)


def test_bad_sgd_run_on_the_command_line_is_one_line_exit_2(tmp_path, capsys):
    assert experiment.run(["--preset", "smoke", "--out", str(tmp_path / "c"), "--clocks.sgd_lr_epochs=0.1@"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "sgd_lr_epochs" in err[0], err
    assert not (tmp_path / "c").exists()


def _entries(lr: float, epochs: list[int], spread_of, seeds=5, noise=0.3, rng=None):
    """Horizon entries of one sgd run at b = 128 on 25 steps an epoch, spread = spread_of(T_SGD, sum eta)."""
    rng = rng or np.random.default_rng(0)
    out = []
    for e in epochs:
        t_sgd, s_eta = e * 25 * lr ** 2 / 128, e * 25 * lr
        per_seed = (spread_of(t_sgd, s_eta) + noise * rng.standard_normal(seeds)).tolist()
        out.append({"epoch": e, "setting": "sgd", "seeds": list(range(seeds)), "spread_pp": float(np.mean(per_seed)),
                    "spread_pp_per_seed": per_seed, "clocks": {"T_SGD": t_sgd, "T_adapt": s_eta}})
    return out


@pytest.mark.parametrize("truth, expect", [
    (lambda t, s: 20 - 3 * np.log(t), "T_SGD"),         # memory decays with the noise clock
    (lambda t, s: 20 - 3 * np.log(s), "T_adapt"),       # ... with sum eta
])
def test_collapse_tests_find_the_planted_clock(truth, expect):
    rng = np.random.default_rng(1)
    entries = {f"sgd_lr{lr}": _entries(lr, list(T.horizons(e)), truth, rng=rng)
               for lr, e in ((0.2, 20), (0.1, 40), (0.05, 80), (0.025, 320))}
    res = T.collapse_tests(T.curves(entries, {n: "sgd" for n in entries}), n_boot=200)
    assert set(res) == {"sgd"}
    sgd = res["sgd"]
    assert sgd["better"] == expect and sgd["decisive"], sgd
    assert sgd["points"] == list(entries) and sgd["n_runs"] == 4
    other = "T_adapt" if expect == "T_SGD" else "T_SGD"
    assert sgd["difference_ci95"][other][0] > 0


def test_collapse_tests_skip_groups_with_one_point_and_table_rows_are_flat():
    entries = {"sgd_a": _entries(0.1, [1, 2, 5], lambda t, s: 10.0), "adam_b": []}
    assert T.collapse_tests(T.curves(entries, {"sgd_a": "sgd", "adam_b": "adam"})) == {}
    rows = T.table_rows({"sgd_a": entries["sgd_a"]})
    assert [r["epoch"] for r in rows] == [1, 2, 5] and rows[0]["point"] == "sgd_a"
    assert rows[0]["per_seed"] == entries["sgd_a"][0]["spread_pp_per_seed"] and rows[0]["clocks"]["T_SGD"] > 0
    assert T.group_of("muon") == ("adaptive", ("T_adapt", "T_update", "T_update2")) and T.group_of("sgd_l2") is None


def test_add_update_sizes_sums_the_rms_and_mean_square_of_each_applied_update():
    from jaxinit.train.step import add_update_sizes
    old = {"k": jnp.zeros((2, 2)), "b": jnp.zeros((3,))}
    new = {"k": jnp.array([[3.0, 0.0], [0.0, 4.0]]), "b": jnp.ones((3,))}
    zeros = {"k": jnp.float32(0), "b": jnp.float32(0)}
    rms, ms = add_update_sizes((zeros, zeros), new, old)
    assert float(ms["k"]) == pytest.approx(25 / 4) and float(rms["k"]) == pytest.approx(5 / 2)
    rms, ms = add_update_sizes((rms, ms), new, new)          # a step that moved nothing adds nothing
    assert float(rms["k"]) == pytest.approx(2.5) and float(rms["b"]) == pytest.approx(1.0)


def test_smoke_rows_carry_update_sums_and_horizons(tmp_path):
    """Plain SGD moves a kernel by eta |g| per step, so T_update grows ~linearly in eta: the 0.05 point's
    measured clock is larger than the 0.02 point's, and every row's sums are non-decreasing."""
    out = tmp_path / "c"
    cfg = ["--preset", "smoke", "--out", str(out), "--clocks.families=sgd"]
    assert experiment.run(cfg) == 0
    from jaxinit.shared.history import measured_clocks, read_metrics
    ends = {}
    for name in ("sgd_lr0.02_b64", "sgd_lr0.05_b64"):
        rows = read_metrics(out / "points" / name / "metrics.jsonl")
        by_member = {}
        for r in rows:
            by_member.setdefault(r["member"], []).append(measured_clocks(r)["T_update"])
        for vals in by_member.values():
            assert vals[0] == 0.0 and all(b > a for a, b in zip(vals, vals[1:])), vals
        ends[name] = np.median([v[-1] for v in by_member.values()])
        horizons = json.loads((out / "points" / name / "horizons.json").read_text())
        assert [h["epoch"] for h in horizons] == T.horizons(2)
    assert ends["sgd_lr0.05_b64"] > 1.5 * ends["sgd_lr0.02_b64"]
    summary = json.loads((out / "summary.json").read_text())
    sgd = summary["verdicts"]["collapse_test"]["sgd"]
    assert sgd["points"] == ["sgd_lr0.02_b64", "sgd_lr0.05_b64"] and set(sgd["clocks"]) == {"T_SGD", "T_adapt"}
    assert (out / "figures" / "collapse_sgd.png").stat().st_size > 0
    rows = [json.loads(s) for s in (out / "horizons.jsonl").read_text().splitlines()]
    assert {r["point"] for r in rows} == {"sgd_lr0.02_b64", "sgd_lr0.05_b64"}
    assert all(r["clocks"]["T_update"] is not None for r in rows if r["epoch"] > 0)


# --------------------------------------------------------------------------- paired comparison of runs
def _summary(slopes: dict, spreads: dict | None = None):
    seeds = sorted(slopes)
    spreads = spreads or {s: 10.0 for s in seeds}
    return {"spread": {"sgd": {"seeds": seeds, "memory_slope_per_seed": [slopes[s] for s in seeds],
                               "spread_pp_per_seed": [spreads[s] for s in seeds], "spread_pp": 10.0,
                               "spread_ci95": [9.0, 11.0], "spread_null_pp": 2.0, "memory_slope": -5.0,
                               "memory_slope_ci95": [-6.0, -4.0]}}}


def test_paired_difference_matches_seeds_and_its_sign_flip_p_detects_a_shift():
    from jaxinit.forgetting import compare
    a = _summary({0: -6.0, 1: -5.0, 2: -7.0, 3: -6.5, 4: -5.5, 5: -6.2})
    b = _summary({0: -4.0, 1: -3.1, 2: -5.0, 3: -4.4, 4: -3.6, 5: -4.1, 9: 0.0})   # seed 9 unpaired: ignored
    d = compare.paired_difference(a, b, "sgd")
    assert d["seeds"] == [0, 1, 2, 3, 4, 5] and d["mean"] == pytest.approx(2.0, abs=0.1)
    assert d["ci95"][0] > 0 and d["p"] == pytest.approx(2 / 64)      # every seed moved up: the extreme flips only
    same = compare.paired_difference(a, a, "sgd")
    assert same["mean"] == 0.0 and same["p"] == 1.0
    mixed = compare.paired_difference(a, _summary({0: -5.0, 1: -6.0, 2: -6.0, 3: -7.5, 4: -4.5, 5: -7.2}), "sgd")
    assert mixed["p"] > 0.5
    text = compare.table([("all", a), ("hidden", b)])
    assert "| sgd | hidden |" in text and "p = 0.031" in text


def test_compare_cli_bad_input_is_one_line_exit_2(tmp_path, capsys):
    from jaxinit.forgetting import compare
    assert compare.main([str(tmp_path)]) == 2
    assert compare.main([str(tmp_path / "a"), str(tmp_path / "b")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "cannot read" in err[1]
