"""The README / `make demo` table of a forgetting summary: one row per setting, then notes.

Pure formatting of `summary.json` (`memory.summarize`); no statistics are computed here.
"""
from __future__ import annotations

import textwrap
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
          "| all interpolated | repair gap pp | dropped | T_SGD, T_L2, T_adapt at best | regime |")


def _row(label: str, s: Mapping[str, Any], regime_text: str = "-") -> str:
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
             ", ".join(_fmt(clk.get(c), ".3g") for c in CLOCKS), regime_text]
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


# The regime each setting's claim speaks of (docs/forgetting.md, "The main job"): low-LR SGD keeps its init scale
# *despite interpolating* (every member reaches 99.5 % train accuracy); L2 erases the memory of interpolating members
# (every member interpolates and the selected predictors fit the training set, >= 99 %); the adaptive optimizers
# forget in predictors that are trained (train accuracy at the selected epoch >= 90 % for every member).
SGD_LIKE, ADAPTIVE = ("sgd", "momentum", "nesterov"), ("adam", "adamw", "muon")
TRAINED_AT_SELECTION = {"sgd_l2": 0.99, **dict.fromkeys(ADAPTIVE, 0.9)}
REGIME_LEGEND = ("regime: whether the arm's members are where its claim speaks: sgd-like, every member reaches "
                 "99.5 % train accuracy; sgd_l2, that and >= 99 % train accuracy at the selected epoch; adam, adamw, "
                 "muon, >= 90 % train accuracy at the selected epoch")


def never_interpolated(summary: Mapping[str, Any], label: str) -> dict[float, tuple[int, int]]:
    """{sigma_w: (members that never reach 99.5 % train accuracy, members)} of a setting, where any did not."""
    counts: dict[float, list[int]] = {}
    for m in summary.get("members", []):
        if m.get("optimizer") == label:
            c = counts.setdefault(float(m["sigma_w"]), [0, 0])
            c[0] += m.get("tau_interp") is None
            c[1] += 1
    return {w: (k, n) for w, (k, n) in sorted(counts.items()) if k}


def regime(summary: Mapping[str, Any], label: str) -> tuple[bool, str]:
    """(reached, short reason) of a setting against its claim's regime (`REGIME_LEGEND`)."""
    s = summary["spread"][label]
    base = label.split("@")[0]
    missing = sum(k for k, _ in never_interpolated(summary, label).values())
    n = s.get("n_members") or 0
    acc = s.get("train_acc_at_best_min")
    if base in SGD_LIKE or base == "sgd_l2":
        if missing:
            return False, f"no: {missing}/{n} never interpolate"
        if base == "sgd":
            return True, "yes: all interpolate"
    need = TRAINED_AT_SELECTION.get(base)
    if need is None:
        return True, "yes: all interpolate" if not missing else f"no: {missing}/{n} never interpolate"
    if acc is None or acc < need:
        return False, f"no: {_fmt(None if acc is None else 100 * acc, '.0f')} % train at selection"
    return True, f"yes: >= {100 * need:.0f} % train at selection"


def narrow_table(summary: Mapping[str, Any]) -> str:
    """The terminal table (<= 100 characters a line): setting, seeds, spread with its interval, null and p,
    slope with its interval, and whether the arm reached its claim's regime (`regime`); notes as the wide one."""
    lines = ["| setting | n | spread pp [95 % CI] | null | p | slope pp/e-fold [95 % CI] | regime |",
             "|---|---|---|---|---|---|---|"]
    notes = []
    for label, s in summary["spread"].items():
        lines.append(f"| {label} | {s.get('n_seeds', 0)} | {_with_ci(s.get('spread_pp'), s.get('spread_ci95'))} "
                     f"| {_fmt(s.get('spread_null_pp'), '.1f')} | {_p(s.get('spread_p'))} "
                     f"| {_with_ci(s.get('memory_slope'), s.get('memory_slope_ci95'))} | {regime(summary, label)[1]} |")
        notes += _notes(label, s) + _interp_notes(summary, label)
    legend = textwrap.wrap(REGIME_LEGEND, 100)
    return "\n".join(lines + [""] + legend + ([""] + notes if notes else [])) + "\n"


def _interp_notes(summary: Mapping[str, Any], label: str) -> list[str]:
    miss = never_interpolated(summary, label)
    if not miss:
        return []
    parts = ", ".join(f"{w:g} ({k} of {n})" for w, (k, n) in miss.items())
    return [f"- {label}: never reached 99.5 % train accuracy at sigma_w {parts}"]


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
        lines.append(_row(label, s, regime(summary, label)[1]))
        notes += _notes(label, s) + _interp_notes(summary, label)
        draws = draws or (s.get("null_draws"), s.get("null_exact"))
    legend = ("null: the spread expected with no sigma_w dependence (seed-to-seed noise at fixed sigma_w); "
              "p: randomization test, sigma_w relabelled within each seed")
    if draws and draws[0]:
        legend += f" ({'all' if draws[1] else 'random'} {draws[0]} relabellings)"
    return "\n".join(lines + ["", legend, "", REGIME_LEGEND] + ([""] + notes if notes else [])) + "\n"
