"""Initialization memory along a long run: the spread as if training had stopped at epoch T.

For each horizon T the rows with epoch <= T are summarised exactly as a run of T epochs would be
(`memory.summarize`: best-validation selection among the epochs seen so far, interpolated selection,
the spread at epoch T itself), so one 1,000-epoch run answers "does more time make SGD forget?"
at every checkpoint along the way. Pure numpy on metrics rows, like `memory`.
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from jaxinit.forgetting import memory


def spreads_over_time(rows: Sequence[Mapping[str, Any]], horizons: Sequence[int]) -> list[dict[str, Any]]:
    """One entry per (horizon, setting): `epoch`, `setting`, the three spreads with their intervals,
    the lowest train accuracy at the selected epoch and the median selected epoch."""
    out = []
    evaluated = sorted({int(r["epoch"]) for r in rows})
    for t in horizons:
        if t > evaluated[-1]:
            continue
        summary = memory.summarize([r for r in rows if int(r["epoch"]) <= t], None, None, 1, 0.0)
        for label, s in summary["spread"].items():
            best = sorted(m["best_epoch"] for m in summary["members"]
                          if m["optimizer"] == label and m["best_epoch"] is not None)
            out.append({"epoch": t, "setting": label, "spread_pp": s["spread_pp"], "spread_ci95": s["spread_ci95"],
                        "spread_pp_interpolated": s["spread_pp_interpolated"],
                        "spread_interpolated_ci95": s["spread_interpolated_ci95"],
                        "spread_pp_final": s["spread_pp_final"], "spread_final_ci95": s["spread_final_ci95"],
                        "train_acc_at_best_min": s["train_acc_at_best_min"], "n_seeds": s["n_seeds"],
                        "best_epoch_median": best[len(best) // 2] if best else None})
    return out
