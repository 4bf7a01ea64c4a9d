"""The README / `make demo` table of a forgetting summary: one row per setting, then notes.

Pure formatting of `summary.json` (`memory.summarize`); no statistics are computed here.
"""
from __future__ import annotations

from typing import Any, Mapping

from jaxinit.shared.history import CLOCKS


def _fmt(x: Any, spec: str) -> str:
    return "-" if x is None else format(x, spec)


def _with_ci(mean: Any, ci: Any, spec: str = ".1f") -> str:
    text = _fmt(mean, spec)
    return text if mean is None or not ci else f"{text} [{ci[0]:{spec}}, {ci[1]:{spec}}]"


def _p(p: Any) -> str:
    return "-" if p is None else ("<0.001" if p < 0.001 else f"{p:.3f}")


HEADER = ("| setting | n seeds | spread pp, best val [95 % CI] | null pp | p | slope pp/e-fold [95 % CI] | slope p "
          "| norm coupling best, final | best val interpolated pp | final pp | min train acc at best (%) "
          "| all interpolated | repair gap pp | dropped | T_SGD, T_L2, T_adapt at best |")


def _row(label: str, s: Mapping[str, Any]) -> str:
    name = label + (f" ({s['n_diverged']} diverged)" if s.get("n_diverged") else "")
    acc = s.get("train_acc_at_best_min")
    nc = s.get("norm_coupling") or {}
    clk = s.get("clocks_at_best") or {}
    cells = [name, str(s.get("n_seeds", 0)), _with_ci(s.get("spread_pp"), s.get("spread_ci95")),
             _fmt(s.get("spread_null_pp"), ".1f"), _p(s.get("spread_p")),
             _with_ci(s.get("memory_slope"), s.get("memory_slope_ci95")), _p(s.get("slope_p")),
             f"{_fmt(nc.get('best'), '.2f')}, {_fmt(nc.get('final'), '.2f')}",
             _fmt(s.get("spread_pp_interpolated"), ".1f"), _fmt(s.get("spread_pp_final"), ".1f"),
             _fmt(None if acc is None else 100 * acc, ".1f"), "yes" if s.get("all_interpolated") else "no",
             _fmt(s.get("repair_gap_median_pp"), ".1f"), str(s.get("n_dropped", 0)),
             ", ".join(_fmt(clk.get(c), ".3g") for c in CLOCKS)]
    return "| " + " | ".join(cells) + " |"


def _notes(label: str, s: Mapping[str, Any]) -> list[str]:
    notes = []
    if s.get("sigma_w_excluded"):
        used = ", ".join(f"{v:g}" for v in s.get("sigma_w_used", [])) or "none"
        notes.append(f"- {label}: spreads over sigma_w {used} (usable in every seed); "
                     f"excluded: {', '.join(f'{v:g}' for v in s['sigma_w_excluded'])}")
    for d in s.get("dropped", []):
        notes.append(f"- {label}: member {d['member']} (sigma_w {d['sigma_w']:g}, seed {d['seed']}) "
                     f"dropped: {d['reason']}")
    return notes


def markdown_table(summary: Mapping[str, Any]) -> str:
    """README table of a summary, one row per setting, a legend, then notes on excluded sigma_w and
    dropped members.

    Columns: setting (diverged count when non-zero) | n seeds | spread pp, best val (mean [95 % t
    interval over seeds]) | its noise floor `spread_null_pp` | `spread_p` | memory slope, pp per e-fold
    of sigma_w [95 % t interval] | `slope_p` | norm coupling at the best epoch and at the end | spread
    pp, best val among interpolating epochs | spread pp, final epoch | train acc at best, min over
    members (%) | all interpolated | median repair gap (pp) | dropped members | median clocks T_SGD,
    T_L2, T_adapt at the best-val epoch.
    """
    lines = [HEADER, "|" + "---|" * (HEADER.count("|") - 1)]
    notes = []
    draws = None
    for label, s in summary["spread"].items():
        lines.append(_row(label, s))
        notes += _notes(label, s)
        draws = draws or (s.get("null_draws"), s.get("null_exact"))
    legend = ("null: the spread expected with no sigma_w dependence (seed-to-seed noise at fixed sigma_w); "
              "p: randomization test, sigma_w relabelled within each seed")
    if draws and draws[0]:
        legend += f" ({'all' if draws[1] else 'random'} {draws[0]} relabellings)"
    return "\n".join(lines + ["", legend] + ([""] + notes if notes else [])) + "\n"
