"""Figures from a hand-made run directory (jaxinit.forgetting.plotting): files appear, CLI fails cleanly."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from jaxinit.forgetting import memory, plotting

ROOT = Path(__file__).resolve().parents[1]
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


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
                                 "param_norm": 10 * sigma + e, "param_norm_layers": {"w": sigma},
                                 "diverged": False})
                m += 1
    for e in range(epochs + 1):
        bad = e >= 2
        rows.append({"member": m, "optimizer": "sgd", "sigma_w": 5.0, "seed": 0, "epoch": e,
                     "step": 10 * e, "lr": lr, "train_loss": math.nan if bad else 2.0, "train_acc": 0.1,
                     "val_loss": math.nan if bad else 2.0, "val_acc": None if bad else 0.1,
                     "test_acc": None if bad else 0.1, "test_loss": None, "param_norm": None if bad else 50.0,
                     "param_norm_layers": {}, "diverged": bad})
    with open(d / "metrics.jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
        f.write('{"member": 0, "epo')  # a killed run's partial line
    l2 = {i: (0.01 if i >= 6 and i < 12 else 0.0) for i in range(m + 1)}
    summary = memory.summarize(memory.read_metrics(d / "metrics.jsonl"), None,
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
