"""A clock sweep's results, one point at a time: its clocks.jsonl line (`line`), the families' crossings of half
low-LR SGD's spread and of 5 pp with intervals (`verdicts`, `jaxinit.forgetting.crossings`), and the gap between
two families' spread curves where their clocks overlap (`collapse`). Pure numpy on summaries."""
from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from jaxinit.forgetting.clocks import FAMILY_CLOCK, Point
from jaxinit.forgetting.crossings import crossing, crossing_interval

HALF, FLOOR_PP = 0.5, 5.0   # the crossings: half of low-LR SGD's spread, and 5 pp

def line(p: Point, summary: dict, selection: str = "best_val") -> dict[str, Any]:
    """The clocks.jsonl line of a finished point (its summary.json).

    Besides the spreads: for the selected rule its per-seed spreads (`spread_per_seed_selected`, which
    the crossing intervals resample), memory slope with interval, noise floor and p-values, and the
    measured update clocks (`T_update`, `T_update2`; None for runs without update sums) at the selected
    epoch and at the end, the clock the adaptive family is compared on across Adam and Muon.
    """
    from jaxinit.forgetting.memory import selection_keys
    s = summary["spread"][p.family]
    keys = selection_keys(selection)
    at_sel, at_end = s.get(keys["clocks"]) or {}, s.get("clocks") or {}
    return {"point": p.name, "setting": p.family, "clock": p.clock,
            "clock_value": at_sel.get(p.clock), "clock_value_end": at_end.get(p.clock),
            "spread_pp": s.get("spread_pp"), "spread_ci95": s.get("spread_ci95"),
            "spread_pp_interpolated": s.get("spread_pp_interpolated"), "spread_pp_final": s.get("spread_pp_final"),
            "selection": selection, "spread_selected": s.get(keys["spread"]), "ci_selected": s.get(keys["ci"]),
            "spread_per_seed_selected": s.get(keys["per_seed"]) or [],
            "slope_selected": s.get(keys["slope"]), "slope_ci_selected": s.get(keys["slope_ci"]),
            "null_selected": s.get(keys["null"]), "spread_p_selected": s.get(keys["spread_p"]),
            "slope_p_selected": s.get(keys["slope_p"]),
            **{f"{c}_value": at_sel.get(c) for c in ("T_update", "T_update2")},
            **{f"{c}_value_end": at_end.get(c) for c in ("T_update", "T_update2")},
            "train_acc_at_best_min": s.get("train_acc_at_best_min"), "n_seeds": s.get("n_seeds"),
            "n_dropped": s.get("n_dropped"), "sigma_w_excluded": s.get("sigma_w_excluded"),
            "lr": p.lr, "weight_decay": p.weight_decay,
            "batch_size": p.batch_size, "epochs": p.epochs, "reference": p.reference,
            "kernel_norm_final_median": _median([m.get("kernel_norm_final") for m in summary["members"]]),
            "kernel_norm_init_median": _median([m.get("kernel_norm_init") for m in summary["members"]])}


def _median(xs: Sequence[Any]) -> float | None:
    vals = [float(x) for x in xs if x is not None]
    return float(np.median(vals)) if vals else None


def verdicts(lines: Sequence[dict], key: str = "spread_selected", n_boot: int = 2000, seed: int = 0) -> dict[str, Any]:
    """Per family: where its spread falls below half the reference and below 5 pp, on its own clock.

    `below_half_reference_ci95`, `below_5pp_ci95`: 95 % percentile intervals of those crossings over
    `n_boot` bootstrap resamples of the seeds of every point (each point's spread redrawn as the mean of
    its per-seed spreads resampled with replacement; the reference spread redrawn in the same draw).
    An upper bound None: in more than 2.5 % of the draws the spread does not cross within the swept
    range. None when a point of the family (or the reference) has no per-seed spreads
    (`spread_per_seed_selected`, so only for `key` "spread_selected"). One Generator (`seed`) draws all.
    """
    from jaxinit.shared.nulls import bootstrap_means
    ref = [i for i, ln in enumerate(lines) if ln["reference"] and ln[key] is not None]
    ref_spread = lines[ref[0]][key] if ref else None
    rng = np.random.default_rng(seed)
    draws = [bootstrap_means(ln["spread_per_seed_selected"], n_boot, rng)
             if key == "spread_selected" and ln.get("spread_per_seed_selected") else None for ln in lines]
    half_draws = HALF * draws[ref[0]] if ref and draws[ref[0]] is not None else None
    out: dict[str, Any] = {"reference_spread_pp": ref_spread, "n_bootstrap": n_boot, "families": {}}
    for fam in dict.fromkeys(ln["setting"] for ln in lines):
        idx = [i for i, ln in enumerate(lines) if ln["setting"] == fam]
        mine = [lines[i] for i in idx]
        xs, ys = [ln["clock_value"] for ln in mine], [ln[key] for ln in mine]
        known = [(x, y) for x, y in zip(xs, ys) if x is not None and y is not None]
        keep = [i for i in idx if lines[i]["clock_value"] is not None and lines[i][key] is not None]
        kx, kd = [lines[i]["clock_value"] for i in keep], [draws[i] for i in keep]
        out["families"][fam] = {
            "clock": mine[0]["clock"],
            "clock_range": [min(x for x, _ in known), max(x for x, _ in known)] if known else None,
            "spread_range_pp": [min(y for _, y in known), max(y for _, y in known)] if known else None,
            "below_half_reference_at": crossing(xs, ys, HALF * ref_spread) if ref_spread is not None else None,
            "below_half_reference_ci95": crossing_interval(kx, kd, half_draws),
            "below_5pp_at": crossing(xs, ys, FLOOR_PP),
            "below_5pp_ci95": crossing_interval(kx, kd, np.full(n_boot, FLOOR_PP))}
    out["collapse"] = collapse(lines, key)
    return out


def _interp_log(x: float, pts: list[tuple[float, float]]) -> float:
    lx = [math.log(p[0]) for p in pts]
    return float(np.interp(math.log(x), lx, [p[1] for p in pts]))


def collapse(lines: Sequence[dict], key: str = "spread_selected", n_grid: int = 9) -> list[dict]:
    """For each pair of families, the max |spread difference| (pp) over their common clock range."""
    curves = {}
    for fam in dict.fromkeys(ln["setting"] for ln in lines):
        pts = sorted((ln["clock_value"], ln[key]) for ln in lines if ln["setting"] == fam
                     and ln["clock_value"] and ln[key] is not None)
        if len(pts) >= 2:
            curves[fam] = pts
    out = []
    fams = list(curves)
    for i, a in enumerate(fams):
        for b in fams[i + 1:]:
            lo = max(curves[a][0][0], curves[b][0][0])
            hi = min(curves[a][-1][0], curves[b][-1][0])
            if not lo < hi:
                out.append({"families": [a, b], "overlap": None, "max_gap_pp": None})
                continue
            grid = np.geomspace(lo, hi, n_grid)
            gaps = [abs(_interp_log(x, curves[a]) - _interp_log(x, curves[b])) for x in grid]
            out.append({"families": [a, b], "clock": [FAMILY_CLOCK[a], FAMILY_CLOCK[b]], "overlap": [lo, hi],
                        "max_gap_pp": float(max(gaps)), "mean_gap_pp": float(np.mean(gaps))})
    return out
