"""Figures of the initialization-memory study, drawn from a run's summary and metrics rows.

`jaxinit.forgetting.plotting` loads and checks a run and is the command line; this module draws:

- `plot_acc_vs_sigma`: test accuracy at the best-validation epoch against sigma_w, one line per setting.
- `plot_norm_trajectories`: kernel norms (`kernel_norm_curves`) against epochs, one panel per setting.
- `plot_spread_vs_clocks`: the spread of a selection rule against each forgetting clock and against epochs
  (`spread_points`), over runs and settings.

Never imports jax; figures are built on `matplotlib.figure.Figure` and rendered by the Agg canvas at
`savefig` (no pyplot state, no backend switch at import).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from matplotlib import cm, colors, ticker
from matplotlib.figure import Figure

from jaxinit.shared.history import as_float
from jaxinit.forgetting.memory import (acc_curve, drop_reason, selection_keys, setting_labels)
from jaxinit.shared.history import CLOCKS, by_epoch, kernel_norm, rows_by_member

_MARKERS = "osD^v<>pP*Xh"
_DPI = 110
CLOCK_BASES = ("at_best", "end")


def _save(fig: Figure, path: str | Path) -> Path:
    from jaxinit.run.files import save_figure
    return save_figure(fig, path, dpi=_DPI, bbox_inches="tight")   # atomic: never half a PNG


def _all_positive(xs: Sequence[float]) -> bool:
    return len(xs) > 0 and all(x > 0 for x in xs)


def plot_acc_vs_sigma(summary: Mapping[str, Any], path: str | Path) -> Path:
    """Test accuracy (%) at the best-validation epoch vs sigma_w, one line per setting.

    Line: mean over seeds; band: min-max over seeds (with 2-3 seeds a std band says little).
    Dotted, faint: the same at the final epoch, to show what best-val selection keeps.
    Dropped members (`memory.drop_reason`) are left out, as in the spread. Log x when all sigma_w > 0.
    """
    members = summary["members"]
    fig = Figure(figsize=(6.4, 4.4))
    ax = fig.add_subplot()
    all_sig: list[float] = []
    for i, label in enumerate(setting_labels(members)):
        c = acc_curve(members, label)
        if not c["sigma_w"]:
            continue
        colour = f"C{i % 10}"
        sp = (summary.get("spread") or {}).get(label, {}).get("spread_pp")
        name = label if sp is None else f"{label} ({sp:.1f} pp)"
        x = np.asarray(c["sigma_w"])
        ax.plot(x, 100 * np.asarray(c["mean"]), marker=_MARKERS[i % len(_MARKERS)], color=colour, label=name)
        ax.fill_between(x, 100 * np.asarray(c["min"]), 100 * np.asarray(c["max"]), color=colour, alpha=0.2, lw=0)
        f = acc_curve(members, label, "test_acc_final")
        if f["sigma_w"]:
            ax.plot(f["sigma_w"], 100 * np.asarray(f["mean"]), ls=":", color=colour, alpha=0.6)
        all_sig += c["sigma_w"]
    if _all_positive(all_sig):
        ax.set_xscale("log")
        # label the swept grid itself rather than powers of ten
        grid = sorted(set(all_sig))
        ax.set_xticks(grid, [f"{s:g}" for s in grid])
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    ax.set_xlabel(r"init scale $\sigma_w$")
    ax.set_ylabel("test accuracy at best val (%)")
    ax.set_title("initialization memory (band: seed min-max; dotted: final epoch)", fontsize=9)
    if all_sig:
        ax.legend(fontsize=8)
    return _save(fig, path)


def kernel_norm_curves(rows: Sequence[Mapping[str, Any]]) -> dict[str, dict[float, tuple[list[int], list[float]]]]:
    """{setting: {sigma_w: (epochs, kernel norm averaged over seeds)}} from the rows' `param_norm_layers`.

    The kernel norm is `jaxinit.shared.history.kernel_norm` (conv and dense kernels; BatchNorm and biases excluded).
    The mean at an epoch is over the seeds with a finite value there; NaN where none has one.
    """
    acc: dict[str, dict[float, dict[int, list[float]]]] = {}
    for member_rows in rows_by_member(rows).values():
        for r in by_epoch(member_rows):
            per_epoch = acc.setdefault(r["optimizer"], {}).setdefault(float(r["sigma_w"]), {})
            v = kernel_norm(r)
            per_epoch.setdefault(int(r["epoch"]), []).extend([] if v is None else [v])
    return {label: {s: (sorted(pe), [float(np.mean(pe[e])) if pe[e] else math.nan for e in sorted(pe)])
                    for s, pe in sorted(by_sigma.items())}
            for label, by_sigma in acc.items()}


def plot_norm_trajectories(rows: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Kernel norm vs epoch, one panel per setting, one line per sigma_w (mean over seeds).

    Kernel norms (`kernel_norm_curves`), not the total parameter norm: with BatchNorm the gains,
    initialized at 1 whatever sigma_w, dominate the total at small sigma_w. The colour scale (log
    when all sigma_w > 0) is shared by all panels, so the same colour is the same init scale
    everywhere. Missing or non-finite norms leave gaps. Log y when positive.
    """
    curves = kernel_norm_curves(rows)
    labels = list(curves) or ["(no rows)"]
    sig = [s for by_sigma in curves.values() for s in by_sigma] or [1.0]
    lo, hi = min(sig), max(sig)
    if hi == lo:
        lo, hi = lo * 0.9 if lo > 0 else lo - 1, hi * 1.1 if hi > 0 else hi + 1
    norm = colors.LogNorm(lo, hi) if lo > 0 else colors.Normalize(lo, hi)
    mappable = cm.ScalarMappable(norm=norm, cmap="viridis")

    n = len(labels)
    fig = Figure(figsize=(3.6 * n + 1.0, 3.6))
    axes = fig.subplots(1, n, sharey=True, squeeze=False)[0]
    ys: list[float] = []
    for ax, label in zip(axes, labels):
        for s, (epochs, y) in curves.get(label, {}).items():
            ax.plot(epochs, y, color=mappable.to_rgba(s), lw=1.2)
            ys += [v for v in y if math.isfinite(v)]
        if not any(math.isfinite(v) for _, y in curves.get(label, {}).values() for v in y):
            ax.text(0.5, 0.5, "no kernel norms in\nparam_norm_layers", transform=ax.transAxes,
                    ha="center", fontsize=8, color="0.4")
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("epoch")
        ax.xaxis.set_major_locator(ticker.MaxNLocator(integer=True))   # epochs are whole numbers
    if _all_positive(ys):
        axes[0].set_yscale("log")
    axes[0].set_ylabel("kernel norm (conv + dense, mean over seeds)")
    fig.colorbar(mappable, ax=list(axes), label=r"$\sigma_w$")
    return _save(fig, path)


def _scale(ax, xs: Sequence[float]) -> None:
    """Log x when every value is positive; symlog when some are 0 (e.g. T_L2 without L2)."""
    pos = [x for x in xs if x > 0]
    if pos and len(pos) == len(xs):
        ax.set_xscale("log")
        # Within about a decade matplotlib labels the minor ticks too, and they overprint each other; label
        # 1, 2 and 5 of each decade instead, so a short range still has numbers on it.
        ax.xaxis.set_major_locator(ticker.LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        ax.xaxis.set_major_formatter(ticker.FuncFormatter(lambda v, _: f"{v:g}"))
        ax.xaxis.set_minor_formatter(ticker.NullFormatter())
    elif pos:
        ax.set_xscale("symlog", linthresh=min(pos))
    elif xs:
        ax.text(0.5, 0.92, "0 in every run", transform=ax.transAxes, ha="center", fontsize=8, color="0.4")


def run_epochs(summary: Mapping[str, Any]) -> int | None:
    """Epochs trained in a run, from its members' `final_epoch` (None if the summary lacks it)."""
    eps = [m.get("final_epoch") for m in summary.get("members", [])]
    eps = [int(e) for e in eps if e is not None]
    return max(eps) if eps else None


def _check_basis(clock_basis: str) -> None:
    if clock_basis not in CLOCK_BASES:
        raise ValueError(f"unknown clock basis {clock_basis!r}; known: {', '.join(CLOCK_BASES)}")


def _median_member(summary: Mapping[str, Any], label: str, key: str, clock: str | None = None) -> float | None:
    """Median over a setting's usable members of `key` (of `key[clock]` when a clock is named)."""
    vals = []
    for m in summary.get("members", []):
        if m.get("optimizer") == label and drop_reason(m) is None:
            v = m.get(key)
            vals.append(as_float((v or {}).get(clock) if clock else v))
    vals = [v for v in vals if math.isfinite(v)]
    return float(np.median(vals)) if vals else None


def spread_points(summary: Mapping[str, Any], selection: str = "best_val", clock_basis: str = "at_best",
                  epochs: int | None = None) -> list[dict[str, Any]]:
    """One point per setting with a spread: `label`, `spread`, `ci` ([lo, hi] or None) and `x`.

    `x[clock]` for each of `CLOCKS`: the setting's median clock at the selected epoch of `selection`
    (`clock_basis="at_best"`) or at the end of the run (`"end"`), from the summary's spread entry
    (else the usable members'); `x["epochs"]`: the median selected epoch (`at_best`) or the epochs
    trained (`end`; `epochs`, else the members' `final_epoch`).
    """
    keys = selection_keys(selection)
    _check_basis(clock_basis)
    clock_key = keys["clocks"] if clock_basis == "at_best" else "clocks"
    out = []
    for label, s in summary.get("spread", {}).items():
        y = s.get(keys["spread"])
        if y is None:
            continue
        x = {c: (s.get(clock_key) or {}).get(c) for c in CLOCKS}
        x = {c: v if v is not None else _median_member(summary, label, clock_key, c) for c, v in x.items()}
        x["epochs"] = (_median_member(summary, label, keys["epoch"]) if clock_basis == "at_best"
                       else epochs if epochs is not None else run_epochs(summary))
        out.append({"label": label, "spread": float(y), "ci": s.get(keys["ci"]), "x": x})
    return out


def plot_spread_vs_clocks(runs: Sequence[tuple[str, Mapping[str, Any], int | None]], path: str | Path,
                          selection: str = "best_val", clock_basis: str = "at_best") -> Path:
    """Spread (pp) against each forgetting clock and against epochs, over runs and settings.

    `runs`: `(run_label, summary, epochs)` triples, e.g. one per batch size or epoch budget; `epochs`
    is the number of epochs trained (None: taken from the members' `final_epoch`). Each setting of
    each run is one point (`spread_points`): y = the spread of `selection` with its 95 % t interval
    over seeds as error bar, x = the setting's median `T_SGD`, `T_L2`, `T_adapt` (panels 1-3) at the
    selected epoch (`clock_basis="at_best"`, the predictor's own age) or at the end of the run
    (`"end"`), and in panel 4 the median selected epoch or the epochs trained. Marker = setting
    label, colour = run. If the clock governs forgetting, the points of all runs fall on one curve
    in the clock panels but not in the epoch panel; the reverse refutes it.
    """
    keys = selection_keys(selection)
    _check_basis(clock_basis)
    points = [(r, run_label, spread_points(summary, selection, clock_basis, epochs))
              for r, (run_label, summary, epochs) in enumerate(runs)]
    all_labels: list[str] = []
    for _, _, pts in points:
        all_labels += [p["label"] for p in pts if p["label"] not in all_labels]
    marker = {lab: _MARKERS[i % len(_MARKERS)] for i, lab in enumerate(all_labels)}
    fig = Figure(figsize=(15, 3.9))
    axes = fig.subplots(1, 4, sharey=True)
    drawn_ci = False
    for ax, what in zip(axes, (*CLOCKS, "epochs")):
        xs: list[float] = []
        for r, _, pts in points:
            for p in pts:
                x = p["x"][what]
                if x is None or not math.isfinite(x):
                    continue
                xs.append(float(x))
        if what != "epochs" and xs and not any(x > 0 for x in xs):
            # a clock that is 0 in every run (T_L2 without L2) has no axis to draw on: say so instead
            ax.text(0.5, 0.5, f"{what} = 0 in every run\n(no {'L2 or weight decay' if what == 'T_L2' else 'steps'})",
                    transform=ax.transAxes, ha="center", va="center", fontsize=8, color="0.4")
            ax.set_xticks([])
            ax.set_xlabel(f"${what.replace('_', '_{')}}}$")
            continue
        for r, _, pts in points:
            for p in pts:
                x = p["x"][what]
                if x is None or not math.isfinite(x):
                    continue
                ci = p["ci"]
                drawn_ci = drawn_ci or bool(ci)
                yerr = None if not ci else [[p["spread"] - ci[0]], [ci[1] - p["spread"]]]
                ax.errorbar([x], [p["spread"]], yerr=yerr, marker=marker[p["label"]], color=f"C{r % 10}",
                            ls="none", capsize=2, ms=6)
        _scale(ax, xs)
        if what == "epochs":
            ax.set_xlabel("selected epoch (median)" if clock_basis == "at_best" else "epochs trained")
        elif xs and any(x > 0 for x in xs):
            ax.set_xlabel(f"${what.replace('_', '_{')}}}$" + (" at the selected epoch" if clock_basis == "at_best" else ""))
        ax.grid(alpha=0.3)
    axes[0].set_ylabel(f"{keys['spread']} over $\\sigma_w$ (pp)")
    bars = ("error bars: 95 % t interval over seeds" if drawn_ci
            else "no error bars: fewer than 2 seeds, no interval")
    fig.suptitle(f"selection {selection}; {bars}", fontsize=9)
    # two legends: colours = runs (only when there are several), markers = settings
    if len(runs) > 1:
        handles = [axes[0].plot([], [], ls="none", marker="o", color=f"C{r % 10}", label=str(lab))[0]
                   for r, (lab, _, _) in enumerate(runs)]
        axes[0].legend(handles=handles, title="run directory", fontsize=7, title_fontsize=7, loc="best")
    handles = [axes[3].plot([], [], ls="none", marker=marker[lab], color="0.3", label=lab)[0]
               for lab in all_labels]
    if handles:
        axes[3].legend(handles=handles, title="setting", fontsize=7, title_fontsize=7, loc="best")
    return _save(fig, path)
