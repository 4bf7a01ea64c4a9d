"""Figures from a hand-made run directory (jaxinit.forgetting.plotting): files appear, CLI fails cleanly."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jaxinit.errors import ConfigError
from jaxinit.forgetting import figures, memory, plotting
from jaxinit.shared import history

ROOT = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def _layers(sigma: float, seed: int, epoch: int) -> dict:
    """Per-leaf norms: two kernels (one the head's) that scale with sigma_w, and BatchNorm / bias leaves that do not."""
    return {"dense_0/kernel": 3 * sigma + epoch + seed, "head/kernel": 4 * sigma, "dense_0/bias": 1.0,
            "batchnorm_0/scale": 27.7, "batchnorm_0/bias": 0.5}


def _write_run(d: Path, lr: float = 0.1, epochs: int = 4) -> Path:
    """A small finished run: 2 settings x 3 sigma_w x 2 seeds, plus one diverged member."""
    d.mkdir(parents=True)
    rows, m = [], 0
    for opt in ("sgd", "sgd_l2"):
        for seed in (0, 1):
            for sigma in (0.3, 1.0, 2.5):
                for e in range(epochs + 1):
                    acc = min(1.0, 0.1 + 0.3 * e) * (1 - 0.05 * sigma)
                    rows.append({"member": m, "optimizer": opt, "sigma_w": sigma, "seed": seed,
                                 "epoch": e, "step": 10 * e, "lr": lr, "train_loss": 1 / (1 + e),
                                 "train_acc": min(1.0, 0.1 + 0.3 * e), "val_loss": abs(e - 2) + sigma,
                                 "val_acc": acc, "test_acc": acc, "test_loss": 1.0,
                                 "param_norm": 10 * sigma + e, "param_norm_layers": _layers(sigma, seed, e),
                                 "diverged": False, "diverged_step": None})
                m += 1
    for e in range(epochs + 1):
        bad = e >= 2  # non-finite from step 15 on; the run loop freezes the step counter there
        rows.append({"member": m, "optimizer": "sgd", "sigma_w": 5.0, "seed": 0, "epoch": e,
                     "step": 15 if bad else 10 * e, "lr": lr, "train_loss": math.nan if bad else 2.0,
                     "train_acc": 0.1, "val_loss": math.nan if bad else 2.0, "val_acc": None if bad else 0.1,
                     "test_acc": None if bad else 0.1, "test_loss": None, "param_norm": None if bad else 50.0,
                     "param_norm_layers": {}, "diverged": bad, "diverged_step": 15 if bad else None})
    with open(d / "metrics.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
        f.write('{"member": 0, "epo')  # a killed run's partial line
    l2 = {i: (0.01 if i >= 6 and i < 12 else 0.0) for i in range(m + 1)}
    summary = memory.summarize(history.read_metrics(d / "metrics.jsonl"), None,
                               np.full(10 * epochs, lr), 32, l2)
    (d / "summary.json").write_text(json.dumps(summary, allow_nan=False))
    return d


def _assert_png(p: Path):
    data = p.read_bytes()
    assert data[:8] == PNG_MAGIC and len(data) > 5000, p


def test_make_all_writes_nonempty_pngs(tmp_path):
    run = _write_run(tmp_path / "run")
    written = plotting.make_all(run)
    names = sorted(p.name for p in written)
    assert names == ["acc_vs_sigma.png", "norm_trajectories.png", "spread_vs_clocks.png"]
    for p in written:
        assert p.parent == run / "figures"
        _assert_png(p)


def test_make_all_rejects_a_dir_without_results(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match="summary.json"):
        plotting.make_all(tmp_path / "empty")


def test_cli_several_runs_writes_a_combined_figure(tmp_path, capsys):
    a = _write_run(tmp_path / "b32", lr=0.1, epochs=4)
    b = _write_run(tmp_path / "b128", lr=0.05, epochs=6)
    assert plotting.main([str(a), str(b), "--out", str(tmp_path / "combined")]) == 0
    _assert_png(tmp_path / "combined" / "spread_vs_clocks.png")
    _assert_png(b / "figures" / "norm_trajectories.png")
    printed = capsys.readouterr().out.splitlines()
    assert len(printed) == 7  # 3 figures per run + the combined one


def test_cli_missing_dir_is_one_line_and_exit_2(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "jaxinit.forgetting.plotting", str(tmp_path / "nope")],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert len(proc.stderr.strip().splitlines()) == 1 and "nope" in proc.stderr
    assert proc.stdout == ""


def test_plotting_does_not_import_jax():
    code = "import sys, jaxinit.forgetting.plotting; print(sorted(m for m in sys.modules if m.split('.')[0] == 'jax'))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.strip() == "[]"


# --------------------------------------------------------------------------- kernel norms, selection, clocks
def test_norm_figure_plots_seed_mean_kernel_norms():
    rows = [{"member": m, "optimizer": "sgd", "sigma_w": s, "seed": seed, "epoch": e,
             "param_norm_layers": _layers(s, seed, e)}
            for m, (s, seed) in enumerate([(0.5, 0), (0.5, 1), (2.0, 0)]) for e in range(3)]
    curves = figures.kernel_norm_curves(rows)
    epochs, y = curves["sgd"][0.5]
    assert epochs == [0, 1, 2]
    # seed 0: sqrt((1.5 + e)^2 + 2^2), seed 1: sqrt((2.5 + e)^2 + 2^2); BatchNorm and bias leaves left out
    want = [(math.hypot(1.5 + e, 2.0) + math.hypot(2.5 + e, 2.0)) / 2 for e in range(3)]
    assert y == pytest.approx(want, rel=1e-12)
    assert curves["sgd"][2.0][1] == pytest.approx([math.hypot(6.0 + e, 8.0) for e in range(3)])


def test_spread_points_follow_the_selection_rule_and_clock_basis(tmp_path):
    summary = json.loads((_write_run(tmp_path / "run") / "summary.json").read_text())
    spread = summary["spread"]["sgd"]
    at_best = {p["label"]: p for p in figures.spread_points(summary)}
    assert at_best["sgd"]["spread"] == spread["spread_pp"] and at_best["sgd"]["ci"] == spread["spread_ci95"]
    assert at_best["sgd"]["x"]["T_SGD"] == spread["clocks_at_best"]["T_SGD"]
    assert at_best["sgd"]["x"]["T_SGD"] < spread["clocks"]["T_SGD"]   # best epoch 2 of 4
    end = {p["label"]: p for p in figures.spread_points(summary, clock_basis="end", epochs=4)}
    assert end["sgd"]["x"]["T_SGD"] == spread["clocks"]["T_SGD"] and end["sgd"]["x"]["epochs"] == 4
    assert at_best["sgd"]["x"]["epochs"] == 2    # the median selected epoch
    final = {p["label"]: p for p in figures.spread_points(summary, "final")}
    assert final["sgd_l2"]["spread"] == summary["spread"]["sgd_l2"]["spread_pp_final"]
    assert final["sgd_l2"]["ci"] == summary["spread"]["sgd_l2"]["spread_final_ci95"]
    assert final["sgd_l2"]["x"]["T_adapt"] == summary["spread"]["sgd_l2"]["clocks"]["T_adapt"]
    with pytest.raises(ConfigError):
        figures.spread_points(summary, "latest")
    with pytest.raises(ValueError, match="clock basis"):
        figures.spread_points(summary, clock_basis="start")


def test_cli_selection_and_clock_basis(tmp_path):
    run = _write_run(tmp_path / "run")
    assert plotting.main([str(run), "--selection", "best_val_interpolated", "--clock-basis=end"]) == 0
    _assert_png(run / "figures" / "spread_vs_clocks.png")


def test_cli_unknown_selection_rule_is_one_line_and_exit_2(tmp_path):
    run = _write_run(tmp_path / "run")
    proc = subprocess.run([sys.executable, "-m", "jaxinit.forgetting.plotting", str(run), "--selection", "best"],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "'best'" in proc.stderr
    assert not (run / "figures").exists()


# --------------------------------------------------------------------------- a summary that does not match its rows
def _stale(kind: str, run: Path) -> None:
    summary = json.loads((run / "summary.json").read_text())
    if kind == "best_epoch":
        summary["members"][2]["best_epoch"] += 1
    elif kind == "test_acc":
        summary["members"][2]["test_acc_at_best"] += 0.01
    elif kind == "missing_rows":
        summary["members"].append({**summary["members"][-1], "member": 99})
    elif kind == "extra_member":
        summary["members"].pop(2)
    elif kind == "last_epoch":
        summary["members"][2]["final_epoch"] -= 1
    (run / "summary.json").write_text(json.dumps(summary))


@pytest.mark.parametrize("kind", ["best_epoch", "test_acc", "missing_rows", "extra_member", "last_epoch"])
def test_a_stale_summary_is_refused(tmp_path, kind):
    run = _write_run(tmp_path / "run")
    _stale(kind, run)
    with pytest.raises(plotting.StaleSummaryError, match="does not match metrics.jsonl"):
        plotting.make_all(run)
    assert not (run / "figures").exists()


def test_a_summary_older_than_its_rows_is_refused(tmp_path):
    run = _write_run(tmp_path / "run", epochs=3)
    newer = _write_run(tmp_path / "newer", epochs=4)     # the run went on: one more epoch of rows
    (run / "metrics.jsonl").write_text((newer / "metrics.jsonl").read_text())
    with pytest.raises(plotting.StaleSummaryError):
        plotting.make_all(run)


def test_cli_stale_summary_is_one_line_and_exit_2(tmp_path):
    run = _write_run(tmp_path / "run")
    _stale("best_epoch", run)
    proc = subprocess.run([sys.executable, "-m", "jaxinit.forgetting.plotting", str(run)],
                          cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.strip().splitlines()) == 1 and "member 2" in proc.stderr
