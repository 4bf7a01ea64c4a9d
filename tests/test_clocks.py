"""`python -m experiments.clocks`: the sweep's points, its verdict arithmetic, the smoke run, bad input."""
import json
import math
from dataclasses import replace

import pytest

from experiments import clocks as experiment
from jaxinit.forgetting import clocks as C


def test_points_sweep_each_family_along_its_own_knob():
    ps = C.points(C.CPU_CLOCKS)
    by = {p.name: p for p in ps}
    assert [p.name for p in ps if p.reference] == ["sgd_lr0.05_b128"]
    assert {p.clock for p in ps if p.family == "momentum"} == {"T_SGD"}
    assert {p.clock for p in ps if p.family == "sgd_l2"} == {"T_L2"}
    assert by["sgd_lr0.05_b16"].batch_size == 16 and by["sgd_lr0.05_b16"].lr == 0.05
    assert by["adam_lr0.0064_e20"].epochs == 20 and by["adamw_lr0.025_e80"].weight_decay == 0.05
    assert len({p.name for p in ps}) == len(ps)
    cfg = C.point_config(C.CPU_CLOCKS, by["sgd_l2_lam0.005"])
    assert cfg.sweep.optimizers == ("sgd_l2",) and cfg.opt.setting_weight_decay == ("sgd_l2=0.005",)
    # the adaptive lr sweep reaches the paper's order of T_adapt: 0.025 x 25 steps x 80 epochs = 50
    assert max(p.lr * p.epochs * 25 for p in ps if p.family == "adam") >= 50


def test_crossing_is_log_linear_between_bracketing_points():
    assert C.crossing([1, 10, 100], [20, 10, 2], 5) == pytest.approx(10 ** (1 + 5 / 8))
    assert C.crossing([1, 10], [4, 3], 5) == 1                # already below at the first point
    assert C.crossing([1, 10], [20, 10], 5) is None           # never within the swept range
    assert C.crossing([10, 1, 100], [10, 20, 2], 15) == pytest.approx(10 ** 0.5)   # sorted by clock first


def _line(fam, clock, x, y, ref=False):
    return {"setting": fam, "clock": clock, "clock_value": x, "spread_selected": y, "reference": ref}


def test_verdicts_and_collapse_on_hand_made_lines():
    lines = [_line("sgd", "T_SGD", 0.01, 20.0, True), _line("sgd", "T_SGD", 1.0, 8.0),
             _line("adam", "T_adapt", 0.1, 16.0), _line("adam", "T_adapt", 10.0, 4.0)]
    v = C.verdicts(lines)
    assert v["reference_spread_pp"] == 20.0
    assert v["families"]["sgd"]["below_half_reference_at"] == pytest.approx(10 ** (-2 + 2 * 10 / 12))
    assert v["families"]["sgd"]["below_5pp_at"] is None
    assert v["families"]["adam"]["below_5pp_at"] == pytest.approx(10 ** (-1 + 2 * 11 / 12))
    (pair,) = v["collapse"]
    assert pair["overlap"] == [0.1, 1.0]
    # at 0.1: sgd 20 - 12 * 0.5 = 14 vs adam 16; at 1: sgd 8 vs adam 10: the gap is 2 pp throughout
    assert pair["max_gap_pp"] == pytest.approx(2.0)


def test_smoke_sweep_end_to_end_and_resume_reuses_points(tmp_path):
    out = tmp_path / "c"
    assert experiment.run_cli(["--preset", "smoke", "--out", str(out)]) == 0
    lines = [json.loads(s) for s in (out / "clocks.jsonl").read_text().splitlines()]
    assert [ln["point"] for ln in lines] == [p.name for p in C.points(C.SMOKE_CLOCKS)]
    need = {"setting", "clock", "clock_value", "clock_value_end", "spread_pp", "spread_ci95",
            "spread_pp_interpolated", "n_seeds", "lr", "weight_decay", "batch_size", "epochs"}
    for ln in lines:
        assert need <= set(ln) and ln["n_seeds"] == 1
        assert ln["clock_value"] <= ln["clock_value_end"] + 1e-12
        assert ln["n_kernel_weights"] == 64 * 32 + 32 * 32 + 32 * 10     # the smoke MLP's kernels
    adam = [ln for ln in lines if ln["setting"] == "adam"]
    assert adam[1]["clock_value_end"] == pytest.approx(10 * adam[0]["clock_value_end"], rel=1e-6)
    assert (out / "figures" / "spread_vs_own_clock.png").stat().st_size > 0
    summary = json.loads((out / "summary.json").read_text())
    assert set(summary["verdicts"]["families"]) == {"sgd", "adam"}
    first = (out / "clocks.jsonl").read_bytes()
    assert experiment.run_cli(["--out", str(out), "--resume"]) == 0
    assert (out / "clocks.jsonl").read_bytes() == first


@pytest.mark.parametrize("args, fragment", [
    (["--clocks.families=sgd,lion"], "unknown or repeated family"),
    (["--clocks.families=sgd,sgd"], "unknown or repeated family"),
    (["--clocks.families=sgd_l2", "--clocks.sgd_l2_lambda="], "comma-separated"),
    (["--clocks.adam_lr_epochs=0.1@x"], "lr@epochs"),
    (["--clocks.reference_lr=0.3"], "reference_lr"),
    (["--clocks.sgd_lr=0,1"], "must be > 0"),
])
def test_bad_sweeps_are_one_line_exit_2(tmp_path, capsys, args, fragment):
    assert experiment.run_cli(["--preset", "smoke", "--out", str(tmp_path / "c")] + args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err
    assert not (tmp_path / "c").exists()


def test_empty_family_sweep_is_refused():
    cfg = replace(C.SMOKE_CLOCKS, clocks=replace(C.SMOKE_CLOCKS.clocks, families=("momentum",), momentum_lr=()))
    with pytest.raises(Exception, match="sweep of momentum is empty"):
        C.validate(cfg)
    assert math.isfinite(C.HALF)
