"""Paired comparison of finished forgetting runs that differ in one thing (the `sigma_w` scope, the lr).

Runs made with the same seeds draw the same data order and, where the change allows, the same
initial kernels, so the memory of one seed in run A and in run B differ by the change plus less noise
than two independent seeds would. For a statistic with per-seed values (`memory_slope`, the spread
`spread_pp`, under any selection rule) the effect of going from A to B is

    d_s = x_s(B) - x_s(A)   for every seed s both runs have,  mean_s d_s with a 95 % t interval,

and a sign-flip randomization test (H0: the label A/B of each seed is exchangeable; all 2^n flips
for n <= 16 seeds): `p` = share of flips with |mean| >= the observed |mean|.

    python -m jaxinit.forgetting.compare runs/scope_all runs/scope_hidden runs/scope_head

prints, per setting, each run's spread (with its null) and slope, and the paired slope and spread
differences against the first run. Pure numpy on summary.json files.
"""
from __future__ import annotations

import itertools
import json
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from jaxinit.shared import seed_stats as stats
from jaxinit.forgetting.memory import selection_keys
from jaxinit.forgetting.tables import _fmt, _with_ci

MAX_EXACT_SEEDS = 16


def per_seed(summary: Mapping[str, Any], setting: str, stat: str = "slope", selection: str = "best_val") -> dict:
    """{seed: value} of a setting's per-seed `stat` ("slope" or "spread") under `selection`."""
    s = summary["spread"][setting]
    values = s.get(selection_keys(selection)["slope_per_seed" if stat == "slope" else "per_seed"]) or []
    return {int(seed): float(v) for seed, v in zip(s.get("seeds") or [], values) if v is not None}


def sign_flip_p(d: Sequence[float], n_draws: int = 10_000, seed: int = 0) -> float | None:
    """Two-sided p of mean(d) = 0 against the sign flips of the d_s (exact up to MAX_EXACT_SEEDS)."""
    d = np.asarray(d, np.float64)
    if d.size < 2:
        return None
    obs = abs(d.mean())
    if d.size <= MAX_EXACT_SEEDS:
        signs = np.array(list(itertools.product((1.0, -1.0), repeat=d.size)))
        return float(np.mean(np.abs(signs @ d) / d.size >= obs * (1 - 1e-12)))
    signs = np.random.default_rng(seed).choice((1.0, -1.0), size=(n_draws, d.size))
    return float((1 + np.sum(np.abs(signs @ d) / d.size >= obs * (1 - 1e-12))) / (1 + n_draws))


def paired_difference(a: Mapping[str, Any], b: Mapping[str, Any], setting: str, stat: str = "slope",
                      selection: str = "best_val") -> dict[str, Any]:
    """mean_s [x_s(b) - x_s(a)] over the seeds both summaries have, with its t interval and sign-flip p."""
    xa, xb = per_seed(a, setting, stat, selection), per_seed(b, setting, stat, selection)
    seeds = sorted(set(xa) & set(xb))
    d = [xb[s] - xa[s] for s in seeds]
    return {"setting": setting, "stat": stat, "seeds": seeds, "per_seed": d,
            "mean": float(np.mean(d)) if d else None, "ci95": stats.t_interval(d), "p": sign_flip_p(d)}


def table(runs: Sequence[tuple[str, Mapping[str, Any]]], selection: str = "best_val") -> str:
    """Markdown: one row per (setting, run) with spread, null, slope and the paired differences against
    the first run (slope and spread, pp per e-fold and pp)."""
    k = selection_keys(selection)
    lines = ["| setting | run | spread pp [95 % CI] | null pp | slope pp/e-fold [95 % CI] "
             "| slope - first run [95 % CI], p | spread - first run [95 % CI], p |", "|---|---|---|---|---|---|---|"]
    base_name, base = runs[0]
    for setting in base["spread"]:
        for name, summary in runs:
            s = summary["spread"].get(setting)
            if s is None:
                continue
            diffs = ["-", "-"]
            if name != base_name:
                for i, stat in enumerate(("slope", "spread")):
                    d = paired_difference(base, summary, setting, stat, selection)
                    diffs[i] = f"{_with_ci(d['mean'], d['ci95'])}, p = {_fmt(d['p'], '.3f')}"
            lines.append(f"| {setting} | {name} | {_with_ci(s.get(k['spread']), s.get(k['ci']))} "
                         f"| {_fmt(s.get(k['null']), '.1f')} | {_with_ci(s.get(k['slope']), s.get(k['slope_ci']))} "
                         f"| {diffs[0]} | {diffs[1]} |")
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2:
        print("usage: python -m jaxinit.forgetting.compare RUN_DIR RUN_DIR [...] (the first is the baseline)",
              file=sys.stderr)
        return 2
    runs = []
    for d in args:
        path = Path(d) / "summary.json"
        try:
            runs.append((Path(d).name, json.loads(path.read_text())))
        except (OSError, ValueError) as err:
            print(f"{path}: cannot read a finished run's summary ({type(err).__name__})", file=sys.stderr)
            return 2
    print(table(runs))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
