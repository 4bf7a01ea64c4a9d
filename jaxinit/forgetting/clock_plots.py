"""Figures of the clock sweep: spread against each family's own clock, and the norms behind it.

- `spread_vs_own_clock.png`: one panel per family, the spread (selection rule of the run) with its
  95 % t interval over seeds against the family's own clock at the selected epoch (log axis); low-LR
  SGD's spread as a solid reference line, half of it dashed, 5 pp dotted.
- `norm_growth.png`: the median kernel-norm growth sqrt(|W_T|^2 - |W_0|^2) of each point against the
  two predictions of `clocks.with_mechanism` (random walk sqrt(P sum eta^2), aligned steps sqrt(P) sum
  eta), with the initial kernel norms of the smallest and largest sigma_w as horizontal lines.
- `norms_<family>.png`: kernel-norm trajectories per sigma_w at the family's remembering point (largest
  spread) and forgetting point (smallest spread).
- `plot_collapse` (for the clock test): every run's spread over time against each candidate clock
  (one panel per clock, log axis), the pooled polynomial fit of `horizon.clock_collapse` and its
  residual variance V_c in the panel title; the clock whose panel shows one curve collapses the runs.
Figures use `matplotlib.figure.Figure` directly (no pyplot state, no backend switch at import).
"""
from __future__ import annotations

from pathlib import Path
from typing import Sequence

from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter

from jaxinit.shared.history import read_metrics
from jaxinit.forgetting.figures import _save, plot_norm_trajectories

_COLORS = {"sgd": "C0", "momentum": "C1", "sgd_l2": "C2", "adam": "C3", "adamw": "C4", "muon": "C5"}


def plot_spread_vs_own_clock(lines: Sequence[dict], verdicts: dict, path) -> Path:
    fams = list(dict.fromkeys(ln["setting"] for ln in lines))
    fig = Figure(figsize=(3.3 * max(len(fams), 1), 3.4))
    axes = fig.subplots(1, max(len(fams), 1), sharey=True, squeeze=False)[0]
    ref = verdicts.get("reference_spread_pp")
    for ax, fam in zip(axes, fams):
        pts = sorted((ln for ln in lines if ln["setting"] == fam and ln["clock_value"] and ln["spread_selected"] is not None),
                     key=lambda ln: ln["clock_value"])
        for ln in pts:
            ci = ln["ci_selected"]
            # a point pooled over splits has its mean beside an interval over split means: never a negative bar
            y = ln["spread_selected"]
            yerr = None if not ci else [[max(y - ci[0], 0.0)], [max(ci[1] - y, 0.0)]]
            marker = "s" if ln["epochs"] != pts[0]["epochs"] or ln["batch_size"] != pts[0]["batch_size"] else "o"
            ax.errorbar([ln["clock_value"]], [ln["spread_selected"]], yerr=yerr, marker=marker, ms=5, capsize=2,
                        color=_COLORS.get(fam, "k"), ls="none")
        ax.plot([p["clock_value"] for p in pts], [p["spread_selected"] for p in pts], color=_COLORS.get(fam, "k"),
                lw=0.8, alpha=0.5)
        if ref is not None:
            ax.axhline(ref, color="0.3", lw=1, label="low-LR SGD")
            ax.axhline(ref / 2, color="0.3", lw=1, ls="--", label="half of it")
        ax.axhline(5.0, color="0.5", lw=1, ls=":", label="5 pp")
        ax.set_xscale("log")
        ax.xaxis.set_minor_formatter(NullFormatter())   # minor labels overprint on short log ranges
        clock = pts[0]["clock"] if pts else ""
        ax.set_xlabel(f"${clock.replace('_', '_{')}}}$ at the selected epoch" if clock else "")
        ax.set_title(fam, fontsize=9)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("spread over $\\sigma_w$ (pp), 95 % t interval")
    axes[0].legend(fontsize=7, loc="best")
    fig.suptitle(f"selection {lines[0]['selection'] if lines else ''}; squares: other batch size / epochs",
                 fontsize=9)
    return _save(fig, path)


def plot_norm_growth(lines: Sequence[dict], path) -> Path:
    fig = Figure(figsize=(5.5, 4.2))
    ax = fig.subplots()
    for ln in lines:
        x, y = ln.get("growth_random_walk"), ln.get("kernel_growth_median")
        if x and y:
            ax.scatter([x], [y], color=_COLORS.get(ln["setting"], "k"), s=18)
    handles = [ax.scatter([], [], color=c, s=18, label=f) for f, c in _COLORS.items()
               if any(ln["setting"] == f for ln in lines)]
    xs = [ln["growth_random_walk"] for ln in lines if ln.get("growth_random_walk")]
    if xs:
        lo, hi = min(xs), max(xs)
        ax.plot([lo, hi], [lo, hi], color="0.4", lw=1, label="measured = random walk")
    inits = [ln.get("kernel_norm_init_median") for ln in lines if ln.get("kernel_norm_init_median")]
    if inits:
        ax.axhline(min(inits), color="0.6", ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel(r"random-walk prediction $\sqrt{P \sum_k \eta_k^2}$")
    ax.set_ylabel(r"median kernel-norm growth $\sqrt{|W_T|^2 - |W_0|^2}$")
    ax.legend(handles=handles + ax.get_lines()[:1], fontsize=7)
    ax.grid(alpha=0.3)
    return _save(fig, path)


def plot_collapse(runs: Sequence[dict], labels: Sequence[str], collapse: dict, path) -> Path:
    """`runs`: `horizon.collapse_curve` dicts; `labels`: one legend entry per run; `collapse`: the
    `horizon.clock_collapse` result of the same runs (its clocks are the panels)."""
    import numpy as np
    from jaxinit.forgetting.horizon import collapse_fit, pooled_points
    clocks = list(collapse["clocks"])
    fig = Figure(figsize=(4.2 * len(clocks), 3.6))
    axes = fig.subplots(1, len(clocks), sharey=True, squeeze=False)[0]
    for ax, clock in zip(axes, clocks):
        for i, (run, label) in enumerate(zip(runs, labels)):
            x, y = pooled_points([run], clock)
            ax.plot(x, y, marker="o", ms=3, lw=1, color=f"C{i % 10}", label=label)
        fit = collapse_fit(*pooled_points(runs, clock), collapse["degree"])
        x_all = pooled_points(runs, clock)[0]
        x_all = x_all[np.isfinite(x_all) & (x_all > 0)]
        if fit is not None and x_all.size:
            grid = np.geomspace(x_all.min(), x_all.max(), 100)
            ax.plot(grid, np.polyval(fit[0], np.log(grid)), color="k", lw=1.5, ls="--", label="pooled fit")
        v = collapse["clocks"][clock]
        ci = v.get("ci95")
        ax.set_title(f"{clock}: V = {v['residual_var_pp2']:.3g} pp$^2$" +
                     (f" [{ci[0]:.3g}, {ci[1]:.3g}]" if ci else "") if v["residual_var_pp2"] is not None else clock,
                     fontsize=9)
        ax.set_xscale("log")
        ax.set_xlabel(f"${clock.replace('_', '_{')}}}(t)$")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("spread over $\\sigma_w$ (pp), seed mean")
    axes[0].legend(fontsize=7, loc="best")
    fig.suptitle(f"which clock collapses the runs: {collapse.get('better')}"
                 f"{'' if collapse.get('decisive') else ' (not decisive)'}", fontsize=9)
    return _save(fig, path)


def make_all(out, lines: Sequence[dict], verdicts: dict) -> list[Path]:
    out = Path(out)
    paths = [plot_spread_vs_own_clock(lines, verdicts, out / "figures" / "spread_vs_own_clock.png"),
             plot_norm_growth(lines, out / "figures" / "norm_growth.png")]
    for fam in dict.fromkeys(ln["setting"] for ln in lines):
        pts = [ln for ln in lines if ln["setting"] == fam and ln["spread_selected"] is not None]
        if len(pts) < 2:
            continue
        keep, lose = max(pts, key=lambda ln: ln["spread_selected"]), min(pts, key=lambda ln: ln["spread_selected"])
        rows = []
        for tag, ln in (("remembers", keep), ("forgets", lose)):
            for r in read_metrics(out / "points" / ln["point"] / "metrics.jsonl"):
                rows.append({**r, "optimizer": f"{fam} {tag}: {ln['point']}"})
        paths.append(plot_norm_trajectories(rows, out / "figures" / f"norms_{fam}.png"))
    return paths
