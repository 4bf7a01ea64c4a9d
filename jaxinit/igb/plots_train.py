"""Figures of the study in training, from results only (no model code runs).

`train_figures(results, absorb_margin, absorb_acc_margin)` -> ``{name: matplotlib Figure}`` from the result's
arrays (or the saved ``results/*.npz``): ``fmax_<optimizer>`` (test f_max over steps per point, one panel per
activation and depth), ``verdict`` (steps to target, sustained absorption and final test accuracy against
depth, per phase and optimizer), ``lr_selection`` (validation accuracy against learning rate per point: the
fair protocol's choice), ``depth_over_xi`` (final accuracy and steps to target against L / xi_c), and per
case ``curves_<case>`` and, where a grid was trained, ``overlay_<case>`` (steps to target over the theory
phase diagram). Targets are each case's (a fraction of the linear baseline's accuracy).
`plot_train_results(DIR)` writes them to ``DIR/figures`` (what ``--replot DIR`` runs).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter, ScalarFormatter

from jaxinit.igb import results as results_schema
from jaxinit.run.runs import load_results
from jaxinit.igb.summary_prejudice import member_index
from jaxinit.igb.summary_train import member_measures
from jaxinit.shared import selection, sink
from jaxinit.igb.plot_style import named_points, phase_color, step_ticks

OPT_STYLES = {"sgd": "-", "momentum": ":", "adam": "--"}


def plot_train_results(out: Path) -> list[Path]:
    """Every figure from ``out/results/*.npz`` and the run's config.json, written to ``out/figures``."""
    runs = load_results(out)
    results_schema.check_train(runs)
    with results_schema.reading(f"--replot {Path(out)}"):
        train_cfg = json.loads((Path(out) / "config.json").read_text())["train"]
        figures = train_figures(runs, train_cfg["absorb_margin"], train_cfg["absorb_acc_margin"])
    return sink.save_figures(figures, Path(out) / "figures")


def train_figures(results: dict[str, dict], absorb_margin: float = 0.05,
                  absorb_acc_margin: float = 0.05) -> dict[str, Figure]:
    margins = (absorb_margin, absorb_acc_margin)
    figures = {}
    for opt in dict.fromkeys(str(r["optimizer"]) for r in results.values()):
        figures[f"fmax_{opt}"] = plot_fmax_grid({n: r for n, r in results.items() if str(r["optimizer"]) == opt},
                                                absorb_margin)
    figures["verdict"] = plot_verdict(results, *margins)
    if any("select_lr" in r for r in results.values()):
        figures["lr_selection"] = plot_lr_selection(results)
    figures["depth_over_xi"] = plot_depth_over_xi(results, *margins)
    for name, r in results.items():
        figures[f"curves_{name}"] = plot_curves(r)
        if (r["role"] == "grid").any():
            figures[f"overlay_{name}"] = plot_overlay(r)
    from jaxinit.igb.plots_design import design_figures
    figures.update(design_figures(results))
    return figures


def _label(r, p: int) -> str:
    return f"{r['point_role'][p]} ({float(r['point_sigma_w2'][p]):.2f}, lr {float(r['point_lr'][p]):.0e})"


def _steps_axis(r) -> np.ndarray:
    return np.maximum(r["step"], 0.5)


def never_axis(ax, n_steps: int, label: str) -> float:
    """A log axis of step counts from 1 to past the run, 'never' drawn at 1.5 x the run on a labelled line; returns
    that height."""
    never = 1.5 * n_steps
    ax.set_yscale("log")
    ax.set_ylim(0.8, 2.2 * n_steps)
    ax.axhline(never, color="gray", lw=0.6)
    ax.text(0.02, never * 1.08, f"never (in {n_steps} steps)", transform=ax.get_yaxis_transform(), fontsize=8)
    ax.set_ylabel(label)
    return never


def plot_fmax_grid(results: dict[str, dict], absorb_margin: float) -> Figure:
    """Test f_max over steps, per phase (mean over seeds thick, seeds thin); rows activations, columns depths."""
    acts = list(dict.fromkeys(str(r["act"]) for r in results.values()))
    depths = sorted({int(r["depth"]) for r in results.values()})
    fig = Figure(figsize=(3.6 * len(depths), 2.8 * len(acts)))
    axes = fig.subplots(len(acts), len(depths), squeeze=False, sharex=True, sharey=True)
    for r in results.values():
        ax = axes[acts.index(str(r["act"])), depths.index(int(r["depth"]))]
        for k, (p, role) in enumerate(named_points(r)):
            idx = member_index(r, p)
            col = phase_color(role, k)
            ax.plot(_steps_axis(r), r["test_fmax"][:, idx].mean(1), color=col, lw=1.6, label=_label(r, p))
            ax.plot(_steps_axis(r), r["test_fmax"][:, idx], color=col, lw=0.4, alpha=0.5)
        share = float(r["majority_share"])
        ax.axhspan(share - absorb_margin, share + absorb_margin, color="gray", alpha=0.15, lw=0)
        ax.set(ylim=(0.0 if share < 0.4 else 0.45, 1.02), title=f"{r['act']}, depth {int(r['depth'])}")
        step_ticks(ax, int(r["step"][-1]))
        ax.legend(fontsize=8, loc="lower left")
    for ax in axes[-1]:
        ax.set_xlabel("step")
    for ax in axes[:, 0]:
        ax.set_ylabel("test f_max")
    first = next(iter(results.values()))
    fig.suptitle(f"{first['optimizer']}: test f_max over training (band: majority share +- {absorb_margin:g}, "
                 f"where absorption must stay); width {int(first['width'])}, sigma_b2 = {first['sigma_b2'][0]:g}",
                 fontsize=9)
    fig.tight_layout()
    return fig


def _per_phase(results, act, opt, value):
    """{phase: [(depth, per-seed values)]} for one activation and optimizer; value(r, idx) -> per seed."""
    out = {}
    for r in sorted((r for r in results.values() if str(r["act"]) == act and str(r["optimizer"]) == opt),
                    key=lambda r: int(r["depth"])):
        for p, role in named_points(r):
            v = np.asarray(value(r, member_index(r, p)), float)
            out.setdefault(role, []).append((int(r["depth"]), v))
    return out


def plot_verdict(results: dict[str, dict], absorb_margin: float, absorb_acc_margin: float) -> Figure:
    """Per activation: steps to target, sustained absorption (median, seeds as dots; 'never' at the top) and final
    test accuracy (mean, seeds as dots) against depth, per phase (colour) and optimizer (line style), each point
    at its own rate."""
    acts = list(dict.fromkeys(str(r["act"]) for r in results.values()))
    opts = list(dict.fromkeys(str(r["optimizer"]) for r in results.values()))
    n_steps = max(int(r["step"][-1]) for r in results.values())
    measured = {id(r): member_measures(r, absorb_margin, absorb_acc_margin) for r in results.values()}
    measures = (("steps to target", lambda r, i: measured[id(r)][0][i]),
                ("sustained absorption", lambda r, i: measured[id(r)][1][i]),
                ("final test acc", lambda r, i: r["test_acc"][-1, i]))
    fig = Figure(figsize=(12, 3.2 * len(acts)))
    axes = fig.subplots(len(acts), 3, squeeze=False)
    for a, act in enumerate(acts):
        for m, (label, value) in enumerate(measures):
            ax = axes[a, m]
            for opt in opts:
                for phase, pts in _per_phase(results, act, opt, value).items():
                    depths = [d for d, _ in pts]
                    vals = [np.where(np.isfinite(v), np.maximum(v, 1.0), 1.5 * n_steps) if m < 2 else v
                            for _, v in pts]
                    centre = [np.median(v) if m < 2 else v.mean() for v in vals]
                    col = phase_color(phase, list(_per_phase(results, act, opt, value)).index(phase))
                    ax.plot(depths, centre, OPT_STYLES.get(opt, "-"), color=col, marker="o", ms=3,
                            label=f"{phase}, {opt}")
                    for d, v in zip(depths, vals):
                        ax.plot([d] * len(v), v, ".", color=col, ms=3, alpha=0.5)
            if m < 2:
                never_axis(ax, n_steps, f"{label} (step 0 drawn at 1)")
            ax.set(xlabel="depth", title=f"{act}: {label}")
            if m == 2:
                ax.set_ylabel(label)
        axes[a, 2].legend(fontsize=8, ncol=1, loc="best")
    first = next(iter(results.values()))
    fig.suptitle(f"verdict (each point at its own rate): target {float(first['target_acc']):.3f} test accuracy, "
                 f"sustained absorption within {absorb_margin:g} of the majority share; "
                 f"line styles: {', '.join(f'{o} {OPT_STYLES.get(o, chr(45))}' for o in opts)}", fontsize=9)
    fig.tight_layout()
    return fig


def plot_lr_selection(results: dict[str, dict]) -> Figure:
    """The fair protocol's selection (`jaxinit.shared.selection`): per case, the validation loss at the horizon H
    (solid) and at the short horizon h (dashed), mean over selection seeds, against learning rate, one colour per
    point; a disqualified rate hollow, the chosen rate (at H) circled, the rate h would choose crossed."""
    cases = [(n, r) for n, r in results.items() if "select_lr" in r]
    cols = min(3, len(cases))
    rows = -(-len(cases) // cols)
    fig = Figure(figsize=(4.4 * cols, 3.2 * rows))
    axes = fig.subplots(rows, cols, squeeze=False).ravel()
    for ax, (name, r) in zip(axes, cases):
        lrs = r["select_lr"]
        for k, (p, role) in enumerate(named_points(r)):
            col = phase_color(role, k)
            for tag, style in (("", "-"), ("_short", "--")):
                if f"select_val_loss{tag}" not in r:
                    continue
                loss = np.nanmean(r[f"select_val_loss{tag}"][p], axis=-1)
                ok = selection.qualified(r[f"select_val_loss{tag}"][p][None], r[f"select_alive{tag}"][p][None])[0]
                ax.plot(lrs, loss, style, color=col, lw=1, label=_label(r, p) if not tag else None)
                ax.plot(lrs[ok], loss[ok], "o", color=col, ms=3)
                ax.plot(lrs[~ok], loss[~ok], "o", mfc="none", color=col, ms=3)
                pick = np.flatnonzero(lrs == r[f"point_lr{tag}"][p])
                ax.plot(lrs[pick], loss[pick], "o" if not tag else "x", ms=9 if not tag else 7, mfc="none", color=col)
        steps, short = (int(v) for v in r["select_horizons"])
        ax.set(xscale="log", xlabel="learning rate", ylabel="validation loss",
               title=f"{r['act']}, depth {int(r['depth'])}, {r['optimizer']}: H = {steps}, h = {short or '-'}")
        ax.title.set_fontsize(8)
        ax.legend(fontsize=8)
    for ax in axes[len(cases):]:
        ax.set_visible(False)
    fig.suptitle("selection: each point's own rate (circled: lowest mean validation loss at H, solid; crossed: at h, "
                 "dashed); hollow: a seed diverged", fontsize=9)
    fig.tight_layout()
    return fig


def plot_depth_over_xi(results: dict[str, dict], absorb_margin: float, absorb_acc_margin: float) -> Figure:
    """Final test accuracy (mean, seeds as dots) and steps to target (median; never at the top) of every point
    against L / xi_c (Schoenholz et al. 2017; 0 where xi_c is infinite), per activation, depth as the marker."""
    acts = list(dict.fromkeys(str(r["act"]) for r in results.values()))
    fig = Figure(figsize=(9, 3.2 * len(acts)))
    axes = fig.subplots(len(acts), 2, squeeze=False)
    n_steps = max(int(r["step"][-1]) for r in results.values())
    markers = dict(zip(sorted({int(r["depth"]) for r in results.values()}), "osD^v<>"))
    for r in results.values():
        a = acts.index(str(r["act"]))
        reach = member_measures(r, absorb_margin, absorb_acc_margin)[0]
        for k, (p, role) in enumerate(named_points(r)):
            idx = member_index(r, p)
            x = float(r["point_depth_over_xi_c"][p])
            final = r["test_acc"][-1, idx]
            steps = np.where(np.isfinite(reach[idx]), np.maximum(reach[idx], 1.0), 1.5 * n_steps)
            style = dict(color=phase_color(role, k), marker=markers[int(r["depth"])])
            axes[a, 0].plot([x], [final.mean()], ms=6, ls="none", **style)
            axes[a, 0].plot([x] * len(idx), final, ms=2, ls="none", alpha=0.4, **style)
            axes[a, 1].plot([x], [np.median(steps)], ms=6, ls="none", **style)
    for a, act in enumerate(acts):
        axes[a, 0].set(xlabel="L / xi_c", ylabel="final test accuracy", title=f"{act}: final accuracy")
        never_axis(axes[a, 1], n_steps, "steps to target (median)")
        axes[a, 1].set(xlabel="L / xi_c", title=f"{act}: steps to target")
    handles = [axes[0, 0].plot([], [], "k" + m, ls="none", label=f"depth {d}")[0] for d, m in markers.items()]
    axes[0, 0].legend(handles=handles, fontsize=8)
    fig.suptitle("the organising variable: depth over the correlation depth scale xi_c (colour: point)", fontsize=9)
    fig.tight_layout()
    return fig


def plot_curves(r: dict) -> Figure:
    """Test f_max, train and test accuracy and the worst class's test accuracy per point, over steps."""
    fig = Figure(figsize=(16, 3.5))
    axes = fig.subplots(1, 4)
    worst = np.nanmin(r["test_class_acc"], axis=-1)
    for k, (p, role) in enumerate(named_points(r)):
        idx = member_index(r, p)
        col = phase_color(role, k)
        for ax, values in zip(axes, (r["test_fmax"], r["train_acc"], r["test_acc"], worst)):
            ax.plot(_steps_axis(r), values[:, idx].mean(1), color=col, label=_label(r, p))
            ax.plot(_steps_axis(r), values[:, idx], color=col, lw=0.4, alpha=0.5)
    for ax, label in zip(axes, ("test f_max", "train accuracy", "test accuracy", "worst class's test accuracy")):
        ax.set(xlabel="step", ylabel=label, ylim=(-0.02 if "worst" in label else 0.0, 1.02))
        step_ticks(ax, int(r["step"][-1]))
    axes[2].axhline(float(r["target_acc"]), color="gray", ls=":", lw=0.8)
    axes[0].legend(fontsize=8)
    fig.suptitle(f"{r['act']}, depth {int(r['depth'])}, width {int(r['width'])}, {r['optimizer']} (each point at its own "
                 f"rate), sigma_b2={r['sigma_b2'][0]:g}: mean over seeds (thick), seeds (thin)", fontsize=9)
    return fig


def plot_overlay(r: dict) -> Figure:
    """Steps to the target over the theory phase diagram: grid members (o) and phase points (diamonds)."""
    fig = Figure(figsize=(6.5, 4.6))
    ax = fig.subplots()
    codes, names = r["pd_codes"], r["pd_names"]
    lut = {int(c): i for i, c in enumerate(codes)}
    img = np.vectorize(lambda c: lut.get(int(c), -1))(r["pd_phase"]).astype(float)
    cmap = ListedColormap(colormaps["Pastel1"](np.arange(len(codes)) % 9))
    sw, sb = r["pd_sigma_w2"], r["pd_sigma_b2"]
    mesh = ax.pcolormesh(sw, sb, img.T, cmap=cmap, vmin=-0.5, vmax=len(codes) - 0.5, shading="nearest")
    cbar = fig.colorbar(mesh, ax=ax, ticks=range(len(codes)))
    cbar.ax.set_yticklabels(names, fontsize=8)
    family = "the whole line sigma_w2 = 2" if str(r["act"]) == "relu" else "chi_1 = 1"
    ax.plot(r["pd_eoc"], sb, "k-", lw=1, label=f"EOC ({family})")
    ax.plot(r["pd_neutral"], sb, "k--", lw=1, label="neutrality line (c* = 1/2)")
    target_acc = float(r["target_acc"])
    reach = member_measures(r, 0.0, 0.0)[0]
    for w, b, is_grid in dict.fromkeys(zip(r["sigma_w2"].tolist(), r["sigma_b2"].tolist(), (r["role"] == "grid").tolist())):
        s = reach[(r["sigma_w2"] == w) & (r["sigma_b2"] == b)]
        never = not np.isfinite(s).any()
        text = "never" if never else f"{np.nanmedian(s):.0f}" + ("*" if not np.isfinite(s).all() else "")
        ax.scatter([w], [b], s=70, marker="o" if is_grid else "D", c="w" if never else "k", edgecolors="k", zorder=3)
        ax.annotate(text, (w, b), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=8)
    ax.set(xscale="log", yscale="log", xlabel="sigma_w2", ylabel="sigma_b2",
           title=f"{r['act']}, depth {int(r['depth'])}, {r['optimizer']} (own rates): steps to {target_acc:.3f} "
                 f"test acc\n(median over seeds; white/never: not in {int(r['step'][-1])} steps; *: some seeds never; "
                 "o grid, diamonds: phase points)")
    ax.title.set_fontsize(8)
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(ScalarFormatter())
        axis.set_minor_formatter(NullFormatter())
    ax.set_xticks([t for t in (0.5, 1, 1.5, 2, 3, 4, 5, 7, 10) if sw[0] <= t <= sw[-1]])
    ax.set(xlim=(sw[0], sw[-1]), ylim=(sb[0], sb[-1]))
    ax.legend(fontsize=8, loc="lower right")
    return fig
