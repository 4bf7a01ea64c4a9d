"""Figures of the designs of issue 33, from results only: the rate grid per point, the prejudice measure against
its null, the crossed design's outcome against L / xi_c and depth.

``rate_grid`` (every point's test accuracy at the end of the selection run against learning rate, per selection
seed, at the horizon H and the short horizon h: whether any rate trains), ``prejudice`` (recall gap and
off-distribution f_max over steps per point, its centred twin dashed; recall gap against test accuracy with the
twins' null threshold), ``crossed`` (the share of seeds that train against L / xi_c per depth, with the M_r fit and
its threshold interval).
"""
from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from jaxinit.igb import centred, prejudice, summary_crossed, summary_prejudice
from jaxinit.igb.plot_style import named_points, phase_color, step_ticks
from jaxinit.igb.summary_prejudice import member_index


def design_figures(results: dict[str, dict], window: int = prejudice.DEFAULT_WINDOW) -> dict[str, Figure]:
    out = {}
    if any("select_test_acc" in r for r in results.values()):
        out["rate_grid"] = plot_rate_grid(results)
    if any(summary_prejudice.null_members(r).size for r in results.values()):
        out["prejudice"] = plot_prejudice(results, window)
    if any(summary_crossed.is_crossed(r) for r in results.values()):
        out["crossed"] = plot_crossed(results)
    return out


def plot_rate_grid(results: dict[str, dict]) -> Figure:
    """Per case and point: test accuracy at the selection run's end (H, solid; seeds as dots) and at h (dashed)
    against learning rate; the target dotted, the chosen rate circled; a diverged seed drawn at 0."""
    cases = [(n, r) for n, r in results.items() if "select_test_acc" in r]
    n_pts = max(len(named_points(r)) for _, r in cases)
    fig = Figure(figsize=(2.9 * n_pts, 2.7 * len(cases)))
    axes = fig.subplots(len(cases), n_pts, squeeze=False, sharey=True)
    for row, (name, r) in enumerate(cases):
        lrs, (H, h) = r["select_lr"], (int(v) for v in r["select_horizons"])
        for col, (p, role) in enumerate(named_points(r)):
            ax, c = axes[row, col], phase_color(role, col)
            for tag, style, steps in (("", "-", H), ("_short", "--", h)):
                if f"select_test_acc{tag}" not in r:
                    continue
                acc = np.where(r[f"select_alive{tag}"][p], r[f"select_test_acc{tag}"][p], 0.0)
                ax.plot(lrs, np.nanmean(acc, axis=-1), style, color=c, lw=1.4, label=f"step {steps}")
                for s in range(acc.shape[-1]):
                    ax.plot(lrs, acc[:, s], ".", color=c, ms=4, alpha=0.6)
            pick = lrs == r["point_lr"][p]
            ax.plot(lrs[pick], np.nanmean(np.where(r["select_alive"][p], r["select_test_acc"][p], 0), -1)[pick],
                    "o", mfc="none", ms=10, color="k")
            ax.axhline(float(r["target_acc"]), color="gray", ls=":", lw=0.8)
            ax.set(xscale="log", ylim=(0, 1.02), title=f"{role} (sigma_w2 {float(r['point_sigma_w2'][p]):.2f})")
            ax.title.set_fontsize(9)
            ax.legend(fontsize=8, loc="lower left")
            ax.set_xlabel("learning rate")
        axes[row, 0].set_ylabel(f"{r['act']} d{int(r['depth'])}: test acc")
        for ax in axes[row, len(named_points(r)):]:
            ax.set_visible(False)
    fig.suptitle("every rate of the grid on the selection seeds (dots; line: mean; circle: the chosen rate; dotted: "
                 "the target): test accuracy at the selection horizon H (solid) and at h (dashed)", fontsize=9)
    fig.tight_layout()
    return fig


def plot_prejudice(results: dict[str, dict], window: int) -> Figure:
    """Per case with twins: recall gap and off-distribution f_max over steps (point solid, its twin dashed; mean
    over seeds), and recall gap against test accuracy at every evaluation (points' evaluations as dots, the twins'
    null threshold as a line)."""
    cases = [(n, r) for n, r in results.items() if summary_prejudice.null_members(r).size]
    fig = Figure(figsize=(15, 3.6 * len(cases)))
    axes = fig.subplots(len(cases), 3, squeeze=False)
    for row, (name, r) in enumerate(cases):
        g, gauss = summary_prejudice.gap(r), r.get("gauss_fmax")
        null = summary_prejudice.null_members(r)
        twins = summary_prejudice.twins(r)
        for k, (p, role) in enumerate(named_points(r)):
            if centred.is_twin(role):
                continue
            c, idx = phase_color(role, k), member_index(r, p)
            tw = member_index(r, twins[p]) if p in twins else np.array([], int)
            for ax, v in ((axes[row, 0], g), (axes[row, 1], gauss)):
                if v is None:
                    continue
                ax.plot(np.maximum(r["step"], 0.5), np.nanmean(v[:, idx], 1), color=c, lw=1.5, label=role)
                if tw.size:
                    ax.plot(np.maximum(r["step"], 0.5), np.nanmean(v[:, tw], 1), "--", color=c, lw=1.2)
            b = summary_prejudice.balanced(r)
            axes[row, 2].plot(b[:, idx].ravel(), g[:, idx].ravel(), ".", color=c, ms=2, alpha=0.5)
        b = summary_prejudice.balanced(r)
        grid = np.linspace(0.45, 1.0, 111)
        thr = prejudice.null_threshold(grid, b[:, null], g[:, null])
        axes[row, 2].plot(grid, thr, "k-", lw=1.5, label="null: twins' 95 % quantile at matched accuracy")
        axes[row, 2].plot(grid, prejudice.DEFAULT_INFORMATIVE * prejudice.max_gap(grid, summary_prejudice.n_classes(r)),
                          "k:", lw=1.2, label=f"{prejudice.DEFAULT_INFORMATIVE:g} x the largest gap possible")
        for col, label in enumerate(("recall gap (test)", "off-distribution f_max (Gaussian inputs)")):
            ax = axes[row, col]
            step_ticks(ax, int(r["step"][-1]))
            ax.set(xlabel="step", ylabel=label, title=f"{r['act']}, depth {int(r['depth'])}: {label}")
            ax.title.set_fontsize(9)
        axes[row, 0].legend(fontsize=8)
        axes[row, 2].set(xlabel="balanced test accuracy", ylabel="recall gap", title="every evaluation against the null")
        axes[row, 2].title.set_fontsize(9)
        axes[row, 2].legend(fontsize=8, loc="upper right")
    fig.suptitle(f"prejudice measure: each point (solid) and its centred twin (dashed), mean over seeds; absorbed = "
                 f"within the null at every evaluation of a {window}-step window", fontsize=9)
    fig.tight_layout()
    return fig


def plot_crossed(results: dict[str, dict]) -> Figure:
    """Share of seeds that train against L / xi_c, one colour per depth (ordered side filled, chaotic hollow,
    neutral points squares, EOC diamonds), with the M_r fit and its threshold interval; at H and at h."""
    from jaxinit.igb import logistic
    fig = Figure(figsize=(12, 4.2))
    axes = fig.subplots(1, 2, sharey=True)
    for ax, h in zip(axes, ("H", "h")):
        tab = summary_crossed.table(results, h)
        depths = sorted(set(tab["depth"].tolist()))
        colors = {d: f"C{i}" for i, d in enumerate(depths)}
        for row in summary_crossed.per_point(tab):
            side = row["point"].split(" ")[-1]
            marker = "D" if side == "EOC" else "s" if row["neutral"] else "o"
            fill = colors[row["depth"]] if side != "chaotic" else "none"
            ax.plot(row["r"] + 0.08 * (depths.index(row["depth"]) - 1.5), row["trains"] / row["n"], marker,
                    color=colors[row["depth"]], mfc=fill, ms=7, ls="none")
        X = np.column_stack([np.ones(tab["r"].size), tab["r"]])
        y = tab["trains"].astype(float)
        if 0 < y.sum() < y.size:
            beta = logistic.fit(X, y).beta
            grid = np.linspace(0, tab["r"].max() + 0.5, 200)
            ax.plot(grid, 1 / (1 + np.exp(-(beta[0] + beta[1] * grid))), "k-", lw=1.2, label="M_r fit (Firth)")
            th = logistic.threshold(X, y, 1, np.array([1.0, 0.0]))
            lo, hi = th["ci95"]
            if lo is not None and hi is not None:
                ax.axvspan(lo, hi, color="gray", alpha=0.2, lw=0, label=f"r50 = {th['value']:.1f} [{lo:.1f}, {hi:.1f}]")
        for d in depths:
            ax.plot([], [], "o", color=colors[d], label=f"depth {d}")
        ax.plot([], [], "o", color="k", mfc="none", label="chaotic side (hollow)")
        ax.plot([], [], "s", color="k", label="neutrality phase")
        ax.set(xlabel="L / xi_c", title=f"trains (final test acc >= target) at the rate chosen at {h}",
               ylim=(-0.05, 1.05))
        ax.title.set_fontsize(9)
        ax.legend(fontsize=8, loc="upper right")
    axes[0].set_ylabel("share of seeds that train")
    fig.suptitle("crossed design: L / xi_c crossed with depth (points nudged sideways by depth)", fontsize=9)
    fig.tight_layout()
    return fig
