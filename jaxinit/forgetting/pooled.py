"""One forgetting run per data split, read together: the memory of each setting over every (split, seed).

Runs of the same preset with different `data.split_seed` (and otherwise the same config) train the same
members on different train / validation splits. Pooled, each setting's test accuracies form a matrix of
replicates (split, seed) by sigma_w, and `design_stats.cell` gives its spread and slope with intervals
that hold over splits (the split a random effect: the t interval over split means), the split-blocked noise
floor and randomization p-values, under each selection rule (`RULES`).

    python -m jaxinit.forgetting.pooled RUN_SPLIT0 RUN_SPLIT1 [...]

prints one markdown row per setting and rule. Pure numpy on summary.json and config.json files.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from jaxinit.forgetting import design_stats
from jaxinit.shared.history import as_float
from jaxinit.forgetting.tables import _fmt

RULES = {"best_val": "test_acc_at_best", "best_val_interpolated": "test_acc_at_best_interpolated",
         "final": "test_acc_final"}


def _grid(members: Sequence[Mapping[str, Any]], label: str) -> list[float]:
    return sorted({round(float(m["sigma_w"]), 12) for m in members if m["optimizer"] == label})


def matrix(runs: Sequence[tuple[int, Mapping[str, Any]]], label: str, key: str):
    """(acc (R, K), replicates [(split, seed)], grid) of `label` under the member field `key` over every run
    (`runs`: (split, summary) pairs); None when a member on the common grid has no value."""
    grids = [_grid(s["members"], label) for _, s in runs]
    grid = sorted(set.intersection(*map(set, grids))) if grids else []
    rows, reps = [], []
    for split, s in runs:
        table: dict[int, dict[float, float]] = {}
        for m in s["members"]:
            if m["optimizer"] == label:
                table.setdefault(int(m["seed"]), {})[round(float(m["sigma_w"]), 12)] = as_float(m.get(key))
        for seed in sorted(table):
            rows.append([table[seed].get(g, float("nan")) for g in grid])
            reps.append((split, seed))
    acc = np.asarray(rows, np.float64)
    if len(grid) < 2 or not rows or not np.all(np.isfinite(acc)):
        return None
    return acc, reps, grid


def coupling(runs: Sequence[tuple[int, Mapping[str, Any]]], label: str, key: str = "kernel_norm_best") -> dict | None:
    """The norm coupling over replicates: per (split, seed) the log-log slope of `key` against the initial kernel
    norm over sigma_w (`stats.loglog_slopes`), with the mixed interval; None where a norm is missing."""
    from jaxinit.shared.seed_stats import loglog_slopes
    per, reps = [], []
    for split, s in runs:
        pairs: dict[int, list] = {}
        for m in s["members"]:
            if m["optimizer"] == label:
                pairs.setdefault(int(m["seed"]), []).append((as_float(m.get("kernel_norm_init")), as_float(m.get(key))))
        slopes = loglog_slopes(pairs)
        if slopes is None:
            return None
        per += slopes
        reps += [split] * len(slopes)
    return design_stats.mixed_interval(per, reps)


def pooled(runs: Sequence[tuple[int, Mapping[str, Any]]]) -> dict[str, dict[str, Any]]:
    """{setting: {rule: `design_stats.cell`, "coupling": {"best", "final"}}} of the settings every run has."""
    labels = [lab for lab in runs[0][1]["spread"] if all(lab in s["spread"] for _, s in runs)]
    out: dict[str, dict[str, Any]] = {}
    for label in labels:
        for rule, key in RULES.items():
            m = matrix(runs, label, key)
            out.setdefault(label, {})[rule] = None if m is None else design_stats.cell(*m)
        out[label]["coupling"] = {w: coupling(runs, label, f"kernel_norm_{w}") for w in ("best", "final")}
    return out


def table(result: Mapping[str, Mapping[str, Any]]) -> str:
    from jaxinit.forgetting.design_report import _ci, _p
    lines = ["| setting | rule | n (splits x seeds) | spread pp [95 % CI] | null pp | p | slope pp/e-fold [95 % CI] "
             "| slope p |", "|---|---|---|---|---|---|---|---|"]
    for label, rules in result.items():
        for rule, st in rules.items():
            if rule == "coupling":
                continue
            if st is None:
                lines.append(f"| {label} | {rule} | - | - | - | - | - | - |")
                continue
            n = f"{st['spread']['n_splits']} x {st['spread']['n'] // max(st['spread']['n_splits'], 1)}"
            lines.append(f"| {label} | {rule} | {n} | {_ci(st['spread'])} | {_fmt(st['null'], '.1f')} "
                         f"| {_p(st['spread_p'])} | {_ci(st['slope'])} | {_p(st['slope_p'])} |")
    lines += ["", "| setting | norm coupling at the selected epoch [95 % CI] | at the end [95 % CI] |", "|---|---|---|"]
    lines += [f"| {label} | {_ci(r['coupling']['best'], '.2f')} | {_ci(r['coupling']['final'], '.2f')} |"
              for label, r in result.items()]
    return "\n".join(lines)


def load(dirs: Sequence[str]) -> list[tuple[int, dict]]:
    """(split seed, summary) of each run; two runs on one split are refused (they are not replicates of it)."""
    runs = []
    for d in dirs:
        cfg = json.loads((Path(d) / "config.json").read_text())
        runs.append((int(cfg["data"]["split_seed"]), json.loads((Path(d) / "summary.json").read_text())))
    splits = [k for k, _ in runs]
    if len(set(splits)) != len(splits):
        raise ValueError(f"two runs share a data split ({splits}); give one run per --data.split_seed")
    return runs


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) < 2:
        print("usage: python -m jaxinit.forgetting.pooled RUN_DIR RUN_DIR [...] (one run per data split)",
              file=sys.stderr)
        return 2
    try:
        runs = load(args)
    except (OSError, ValueError, KeyError) as err:
        print(f"error: {str(err).splitlines()[0] if str(err) else type(err).__name__}", file=sys.stderr)
        return 2
    print(table(pooled(runs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
