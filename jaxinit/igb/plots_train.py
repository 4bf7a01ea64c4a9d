"""Figures of the study in training, from results only (no model code runs).

`train_figures(results, target_acc, absorbed_fmax)` -> ``{name: matplotlib Figure}`` from
`TrainResult.results` (or the saved ``results/*.npz``): ``fmax_<optimizer>`` (test f_max over steps per
phase, one panel per activation and depth), ``verdict`` (steps to target, absorption time and final
test accuracy against depth, per phase and optimizer), ``lr_sweep``, and per run ``curves_<run>`` and,
where a grid was trained, ``overlay_<run>`` (steps to target over the theory phase diagram).
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
from jaxinit.igb import sink, stats
from jaxinit.igb.phases import PHASES

PHASE_COLORS = {name: f"C{i}" for i, name in enumerate(PHASES)}
OPT_STYLES = {"sgd": "-", "momentum": ":", "adam": "--"}


def plot_train_results(out: Path) -> list[Path]:
    """Every figure from ``out/results/*.npz`` and the run's config.json, written to ``out/figures``."""
    runs = sink.load_results(out)
    results_schema.check_train(runs)
    with results_schema.reading(f"--replot {Path(out)}"):
        train_cfg = json.loads((Path(out) / "config.json").read_text())["train"]
        figures = train_figures(runs, train_cfg["target_acc"], train_cfg["absorbed_fmax"])
    return sink.save_figures(figures, Path(out) / "figures")


def train_figures(results: dict[str, dict], target_acc: float, absorbed_fmax: float) -> dict[str, Figure]:
    figures = {}
    for opt in dict.fromkeys(str(r["optimizer"]) for r in results.values()):
        figures[f"fmax_{opt}"] = plot_fmax_grid({n: r for n, r in results.items() if str(r["optimizer"]) == opt},
                                                absorbed_fmax)
    figures["verdict"] = plot_verdict(results, target_acc, absorbed_fmax)
    if any("sweep_lr" in r for r in results.values()):
        figures["lr_sweep"] = plot_lr_sweep(results)
    for name, r in results.items():
        figures[f"curves_{name}"] = plot_curves(r, target_acc)
        if (r["role"] == "grid").any():
            figures[f"overlay_{name}"] = plot_overlay(r, target_acc)
    return figures


def _phases(r) -> list[str]:
    return [x for x in dict.fromkeys(r["role"].tolist()) if x != "grid"]


def _steps_axis(r) -> np.ndarray:
    return np.maximum(r["step"], 0.5)


def plot_fmax_grid(results: dict[str, dict], absorbed_fmax: float) -> Figure:
    """Test f_max over steps, per phase (mean over seeds thick, seeds thin); rows activations, columns depths."""
    acts = list(dict.fromkeys(str(r["act"]) for r in results.values()))
    depths = sorted({int(r["depth"]) for r in results.values()})
    fig = Figure(figsize=(3.6 * len(depths), 2.8 * len(acts)))
    axes = fig.subplots(len(acts), len(depths), squeeze=False, sharex=True, sharey=True)
    for r in results.values():
        ax = axes[acts.index(str(r["act"])), depths.index(int(r["depth"]))]
        for phase in _phases(r):
            idx = np.flatnonzero(r["role"] == phase)
            col = PHASE_COLORS[phase]
            ax.plot(_steps_axis(r), r["test_fmax"][:, idx].mean(1), color=col, lw=1.6,
                    label=f"{phase} ({r['sigma_w2'][idx[0]]:.2f})")
            ax.plot(_steps_axis(r), r["test_fmax"][:, idx], color=col, lw=0.4, alpha=0.5)
        ax.axhline(absorbed_fmax, color="gray", ls=":", lw=0.8)
        ax.set(xscale="log", ylim=(0.45, 1.02), title=f"{r['act']}, depth {int(r['depth'])}, lr {float(r['lr'][0]):g}")
        ax.legend(fontsize=6, loc="lower left")
    for ax in axes[-1]:
        ax.set_xlabel("step (0 drawn at 0.5)")
    for ax in axes[:, 0]:
        ax.set_ylabel("test f_max")
    first = next(iter(results.values()))
    fig.suptitle(f"{first['optimizer']}: test f_max over training (dotted: absorption threshold {absorbed_fmax:g}); "
                 f"width {int(first['width'])}, sigma_b2 = {first['sigma_b2'][0]:g}", fontsize=9)
    fig.tight_layout()
    return fig


def _per_phase(results, act, opt, value):
    """{phase: (depths, means, (lo, hi) errors)} for one activation and optimizer; value(r, idx) -> per seed."""
    out = {}
    for r in sorted((r for r in results.values() if str(r["act"]) == act and str(r["optimizer"]) == opt),
                    key=lambda r: int(r["depth"])):
        for phase in _phases(r):
            v = np.asarray(value(r, np.flatnonzero(r["role"] == phase)), float)
            out.setdefault(phase, []).append((int(r["depth"]), v))
    return out


def plot_verdict(results: dict[str, dict], target_acc: float, absorbed_fmax: float) -> Figure:
    """Per activation: steps to target, absorption time (median, seeds as dots; 'never' at the top) and final
    test accuracy (mean +- sd) against depth, per phase (colour) and optimizer (line style)."""
    acts = list(dict.fromkeys(str(r["act"]) for r in results.values()))
    opts = list(dict.fromkeys(str(r["optimizer"]) for r in results.values()))
    n_steps = max(int(r["step"][-1]) for r in results.values())
    measures = (("steps to target", lambda r, i: stats.steps_to_target(r["step"], r["test_acc"][:, i], target_acc)),
                ("absorption time", lambda r, i: stats.steps_absorbed(r["step"], r["test_fmax"][:, i], absorbed_fmax)),
                ("final test acc", lambda r, i: r["test_acc"][-1, i]))
    fig = Figure(figsize=(12, 3.2 * len(acts)))
    axes = fig.subplots(len(acts), 3, squeeze=False)
    for a, act in enumerate(acts):
        for m, (label, value) in enumerate(measures):
            ax = axes[a, m]
            for opt in opts:
                for phase, pts in _per_phase(results, act, opt, value).items():
                    depths = [d for d, _ in pts]
                    vals = [np.where(np.isfinite(v), v, 1.5 * n_steps) if m < 2 else v for _, v in pts]
                    centre = [np.median(v) if m < 2 else v.mean() for v in vals]
                    ax.plot(depths, centre, OPT_STYLES.get(opt, "-"), color=PHASE_COLORS[phase], marker="o", ms=3,
                            label=f"{phase}, {opt}")
                    for d, v in zip(depths, vals):
                        ax.plot([d] * len(v), v, ".", color=PHASE_COLORS[phase], ms=3, alpha=0.5)
            if m < 2:
                ax.axhline(1.5 * n_steps, color="gray", lw=0.6)
                ax.set_yscale("symlog", linthresh=1.0)   # absorption at step 0 (an unbiased start) stays drawable
                ax.set_ylim(0, 2 * n_steps)
                ax.text(0.02, 0.97, f"top line: never (in {n_steps} steps)", transform=ax.transAxes, fontsize=6, va="top")
            ax.set(xlabel="depth", ylabel=label, title=f"{act}: {label}")
        axes[a, 2].legend(fontsize=5, ncol=2, loc="lower left")
    fig.suptitle(f"verdict: target {target_acc:.0%} test accuracy, absorbed at test f_max <= {absorbed_fmax:g}; "
                 f"line styles: {', '.join(f'{o} {OPT_STYLES.get(o, chr(45))}' for o in opts)}", fontsize=9)
    fig.tight_layout()
    return fig


def plot_lr_sweep(results: dict[str, dict]) -> Figure:
    """Validation accuracy at the end of the sweep against learning rate, per run; the chosen one circled."""
    opts = list(dict.fromkeys(str(r["optimizer"]) for r in results.values() if "sweep_lr" in r))
    fig = Figure(figsize=(4.5 * len(opts), 3.4))
    axes = fig.subplots(1, len(opts), squeeze=False)[0]
    for ax, opt in zip(axes, opts):
        for k, r in enumerate(r for r in results.values() if str(r["optimizer"]) == opt and "sweep_lr" in r):
            acc = np.ma.masked_where(~r["sweep_alive"], r["sweep_val_acc"]).mean(axis=1).filled(np.nan)   # diverged: gap
            line, = ax.plot(r["sweep_lr"], acc, "o-", ms=3, label=f"{r['act']} d{int(r['depth'])}")
            chosen = np.flatnonzero(r["sweep_lr"] == r["lr"][0])
            ax.plot(r["sweep_lr"][chosen], acc[chosen], "o", ms=9, mfc="none", color=line.get_color())
        ax.set(xscale="log", xlabel="learning rate", ylabel="validation accuracy (mean over sweep seeds)",
               title=f"{opt}: sweep at the EOC (circled: chosen)")
        ax.legend(fontsize=6)
    fig.tight_layout()
    return fig


def plot_curves(r: dict, target_acc: float) -> Figure:
    """Test f_max, train and test accuracy and the worst class's test accuracy per phase, over steps."""
    fig = Figure(figsize=(16, 3.5))
    axes = fig.subplots(1, 4)
    worst = np.nanmin(r["test_class_acc"], axis=-1)
    for phase in _phases(r):
        idx = np.flatnonzero(r["role"] == phase)
        col = PHASE_COLORS[phase]
        for ax, values in zip(axes, (r["test_fmax"], r["train_acc"], r["test_acc"], worst)):
            ax.plot(_steps_axis(r), values[:, idx].mean(1), color=col, label=f"{phase} ({r['sigma_w2'][idx[0]]:.2f})")
            ax.plot(_steps_axis(r), values[:, idx], color=col, lw=0.4, alpha=0.5)
    for ax, label in zip(axes, ("test f_max", "train accuracy", "test accuracy", "worst class's test accuracy")):
        ax.set(xscale="log", xlabel="step (0 drawn at 0.5)", ylabel=label, ylim=(-0.02 if "worst" in label else 0.4, 1.02))
    axes[2].axhline(target_acc, color="gray", ls=":", lw=0.8)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{r['act']}, depth {int(r['depth'])}, width {int(r['width'])}, {r['optimizer']} lr {float(r['lr'][0]):g}, "
                 f"sigma_b2={r['sigma_b2'][0]:g}: mean over seeds (thick), seeds (thin)", fontsize=9)
    return fig


def plot_overlay(r: dict, target_acc: float) -> Figure:
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
    cbar.ax.set_yticklabels(names, fontsize=7)
    ax.plot(r["pd_eoc"], sb, "k-", lw=1, label="EOC (ReLU: the whole line sigma_w2 = 2)")
    ax.plot(r["pd_neutral"], sb, "k--", lw=1, label="neutrality line (c* = 1/2)")
    reach = stats.steps_to_target(r["step"], r["test_acc"], target_acc)
    for w, b, is_grid in dict.fromkeys(zip(r["sigma_w2"].tolist(), r["sigma_b2"].tolist(), (r["role"] == "grid").tolist())):
        s = reach[(r["sigma_w2"] == w) & (r["sigma_b2"] == b)]
        never = not np.isfinite(s).any()
        text = "never" if never else f"{np.nanmedian(s):.0f}" + ("*" if not np.isfinite(s).all() else "")
        ax.scatter([w], [b], s=70, marker="o" if is_grid else "D", c="w" if never else "k", edgecolors="k", zorder=3)
        ax.annotate(text, (w, b), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=7)
    ax.set(xscale="log", yscale="log", xlabel="sigma_w2", ylabel="sigma_b2",
           title=f"{r['act']}, depth {int(r['depth'])}, {r['optimizer']} lr {float(r['lr'][0]):g}: steps to {target_acc:.0%} "
                 f"test acc\n(median over seeds; white/never: not in {int(r['step'][-1])} steps; *: some seeds never; "
                 "o grid, diamonds: phase points)")
    ax.title.set_fontsize(8)
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(ScalarFormatter())
        axis.set_minor_formatter(NullFormatter())
    ax.set_xticks([t for t in (0.5, 1, 1.5, 2, 3, 4, 5, 7, 10) if sw[0] <= t <= sw[-1]])
    ax.set(xlim=(sw[0], sw[-1]), ylim=(sb[0], sb[-1]))
    ax.legend(fontsize=6, loc="lower right")
    return fig
