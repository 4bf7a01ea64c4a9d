"""Figures of the bias-meets-trainability study, from saved results only (no model code runs).

`plot_init_results(DIR)`: `experiments.igb_init`'s DIR/results/*.npz -> per input set, figures of the
per-layer c against mean field, f_max against the IGB predictions (readout c, readout rho, the GP over
each network's own kernel), gradient quantiles by class, gamma estimators and f_max histograms.
`plot_train_results(DIR)`: `experiments.igb_train`'s DIR/results/*.npz -> curves per phase and the
phase-diagram overlay. Both are what `python -m experiments.igb_{init,train} --replot DIR` runs.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from jaxinit.bias import GROUPS, steps_to_target


# --------------------------------------------------------------------------- init figures
def plot_init_results(out: Path) -> list[Path]:
    """Every figure from the saved results/*.npz (no model code runs)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    by_input: dict[str, dict[str, dict]] = {}
    for f in sorted((out / "results").glob("*.npz")):
        input_name, case = f.stem.split("__")
        by_input.setdefault(input_name, {})[case] = dict(np.load(f))
    fig_dir = out / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    paths = []
    for input_name, cases in by_input.items():
        for name, fn in (("c_layers", _plot_c_layers), ("fmax", _plot_fmax), ("grads", _plot_grads),
                         ("gamma_estimators", _plot_gamma), ("fmax_hist", _plot_fmax_hist)):
            fig = fn(plt, cases, input_name)
            if fig is not None:
                paths.append(fig_dir / f"{name}_{input_name}.png")
                fig.savefig(paths[-1], dpi=110, bbox_inches="tight")
                plt.close(fig)
    return paths


def _first_b2(res) -> np.ndarray:
    return np.flatnonzero(res["sigma_b2"] == res["sigma_b2"][0])


def _theory_panels(plt, cases, keep=lambda case: True):
    """One panel per case with mean-field theory (and passing `keep`): (fig, [(ax, case, res, grid indices at
    the first sigma_b2, one colour per index)]), or None."""
    with_theory = {c: r for c, r in cases.items() if "c_theory" in r and keep(c)}
    if not with_theory:
        return None
    fig, axes = plt.subplots(1, len(with_theory), figsize=(4 * len(with_theory), 3.4), squeeze=False)
    panels = []
    for ax, (case, r) in zip(axes[0], with_theory.items()):
        idx = _first_b2(r)
        panels.append((ax, case, r, idx, plt.cm.viridis(np.linspace(0, 1, len(idx)))))
    return fig, panels


def _plot_c_layers(plt, cases, input_name):
    panels = _theory_panels(plt, cases)
    if panels is None:
        return None
    fig, panels = panels
    for ax, case, r, idx, colors in panels:
        n_hidden = r["c"].shape[-1]
        for col, g in zip(colors, idx):
            ax.plot(np.arange(1, r["c_theory"].shape[1] + 1), r["c_theory"][g], color=col, lw=1.2, label=f"{r['sigma_w2'][g]:g}")
            ax.errorbar(np.arange(1, n_hidden + 1), r["c"][:, g].mean(0), r["c"][:, g].std(0), fmt="o", ms=2.5,
                        color=col, lw=0.6)
            if r["c_theory"].shape[1] > n_hidden:
                ax.errorbar([n_hidden + 1], [r["c_readout"][:, g].mean()], [r["c_readout"][:, g].std()],
                            fmt="s", ms=4, color=col, mfc="none")
        ax.axhline(0.5, color="gray", ls=":", lw=0.8)
        ax.set(title=f"{case} ({input_name})", xlabel="layer l", ylabel="c_l = P/Q", ylim=(-0.05, 1.05))
        ax.legend(title=f"sigma_w2 (sigma_b2={r['sigma_b2'][0]:g})", fontsize=6, title_fontsize=6)
    fig.suptitle("per-layer c: dots measured (mean +- sd over draws), lines mean field (pair-averaged c0); "
                 "squares: readout", fontsize=8)
    return fig


def _plot_fmax(plt, cases, input_name):
    from matplotlib.ticker import NullFormatter, ScalarFormatter
    fig, axes = plt.subplots(2, len(cases), figsize=(3.2 * len(cases), 6.2), squeeze=False, sharey="row")
    for j, (case, r) in enumerate(cases.items()):
        idx = _first_b2(r)
        sw = r["sigma_w2"][idx]
        for i, (tag, n_cls) in enumerate((("2", 2), ("all", 10))):
            ax = axes[i, j]
            vals = r[f"fmax_{tag}"][:, idx]
            sem = vals.std(0, ddof=1) / np.sqrt(len(vals)) if len(vals) > 1 else None
            ax.errorbar(sw, vals.mean(0), sem, fmt="o", color="k", ms=3, label="measured")
            ax.plot(sw, r[f"fmax{tag}_theory_readout"][idx], "--", color="C1", label="IGB | readout c")
            if f"fmax_{tag}_gp" in r:
                gp = r[f"fmax_{tag}_gp"][:, idx]
                ax.plot(sw, r[f"fmax{tag}_theory_rho"][idx], "-.", color="C3", label="IGB | readout rho")
                ax.plot(sw, gp.mean(0), "x", color="C4", ms=5, label="GP | network's kernel")
            if f"fmax{tag}_theory_mf" in r:
                ax.plot(sw, r[f"fmax{tag}_theory_mf"][idx], "-", color="C0", label="IGB | mean-field c")
            if tag == "2" and "fmax2_theory_mf_n" in r:
                ax.plot(sw, r["fmax2_theory_mf_n"][idx], ":", color="C2", label="same, n inputs")
            ax.set(xscale="log", xlabel="sigma_w2", title=f"{case}, {n_cls} classes", ylim=(1 / n_cls - 0.02, 1.02))
            ax.xaxis.set_major_formatter(ScalarFormatter())
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xticks([1, 2, 3, 5])
            if j == 0:
                ax.set_ylabel("E f_max")
            if i == 0:
                ax.legend(fontsize=5, loc="lower left")
    first = next(iter(cases.values()))
    fig.subplots_adjust(hspace=0.35)
    fig.suptitle(f"f_max at init ({input_name}, sigma_b2={first['sigma_b2'][0]:g}, mean +- sem over "
                 f"{first['fmax_2'].shape[0]} draws)", fontsize=9)
    return fig


def _plot_fmax_hist(plt, cases, input_name):
    with_samples = {c: r for c, r in cases.items() if "fmax2_samples_mf" in r and c.startswith("mlp")}
    if not with_samples:
        return None
    first = next(iter(with_samples.values()))
    idx = _first_b2(first)
    fig, axes = plt.subplots(len(with_samples), len(idx), figsize=(2.4 * len(idx), 2.2 * len(with_samples)),
                             squeeze=False, sharex=True)
    bins = np.linspace(0.5, 1.0, 11)
    for i, (case, r) in enumerate(with_samples.items()):
        for ax, g in zip(axes[i], idx):
            ax.hist(r["fmax2_samples_mf"][g], bins=bins, density=True, color="C0", alpha=0.4, label="theory")
            ax.hist(r["fmax_2"][:, g], bins=bins, density=True, histtype="step", color="k", lw=1.5, label="measured")
            ax.set_title(f"{case} sw2={r['sigma_w2'][g]:g}", fontsize=7)
            ax.set_yticks([])
        axes[i, 0].legend(fontsize=6)
    for ax in axes[-1]:
        ax.set_xlabel("f_max (binary)")
    fig.suptitle(f"f_max over network draws vs theory.igb.fmax_samples at the mean-field gamma ({input_name}, "
                 f"{first['fmax_2'].shape[0]} draws)", fontsize=8)
    return fig


def _plot_grads(plt, cases, input_name):
    with_grads = {c: r for c, r in cases.items() if "grad_quantiles" in r}
    if not with_grads:
        return None
    fig, axes = plt.subplots(len(with_grads), 3, figsize=(11, 2.8 * len(with_grads)), squeeze=False)
    for i, (case, r) in enumerate(with_grads.items()):
        idx = _first_b2(r)
        for ax, g in zip(axes[i], (idx[0], idx[len(idx) // 2], idx[-1])):
            med = np.nanmedian(r["grad_quantiles"][:, g], axis=0)   # (L+1, group, quantile)
            layers = np.arange(1, med.shape[0] + 1)
            for k, (group, col) in enumerate(zip(GROUPS, ("k", "C3", "C0"))):
                ax.plot(layers, med[:, k, 2], color=col, label=group)
                ax.fill_between(layers, med[:, k, 1], med[:, k, 3], color=col, alpha=0.15)
                ax.plot(layers, med[:, k, 0], color=col, lw=0.5, ls=":")
                ax.plot(layers, med[:, k, 4], color=col, lw=0.5, ls=":")
            ax.set(yscale="log", xlabel="layer (last = output)", title=f"{case} sigma_w2={r['sigma_w2'][g]:g}")
        axes[i, 0].set_ylabel("|delta_l|^2 / nodes")
        axes[i, 0].legend(fontsize=6)
    fig.subplots_adjust(hspace=0.45)
    fig.suptitle(f"backpropagated signals at init by class ({input_name}, binary head): median over draws of the "
                 "5/25/50/75/95 % quantiles over samples", fontsize=8)
    return fig


def _plot_gamma(plt, cases, input_name):
    panels = _theory_panels(plt, cases, keep=lambda case: case.startswith("mlp"))
    if panels is None:
        return None
    fig, panels = panels
    for ax, case, r, idx, colors in panels:
        n_hidden = r["c"].shape[-1]
        layers = np.arange(1, n_hidden + 1)
        for col, g in zip(colors, idx):
            c_th = r["c_theory"][g, :n_hidden]
            ax.plot(layers, c_th / (1 - c_th), color=col, lw=1)
            ax.plot(layers, np.median(r["gamma"][:, g], 0), "x", ms=3, color=col)
            ax.plot(layers, np.median(r["gamma_corr"][:, g], 0), "o", ms=2.5, color=col, mfc="none")
        ax.set(yscale="log", xlabel="layer", ylabel="gamma (median over draws)",
               title=f"{case}: x naive, o corrected, - theory", )
    return fig


# --------------------------------------------------------------------------- training figures
def plot_train_results(out: Path) -> list[Path]:
    """Curves per phase and the overlay, from results/*.npz and summary.json only."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig_dir = out / "figures"
    fig_dir.mkdir(parents=True, exist_ok=True)
    target = json.loads((out / "config.json").read_text())["train"]["target_acc"]
    paths = []
    for f in sorted((out / "results").glob("*.npz")):
        r = dict(np.load(f))
        for name, fn in (("curves", _plot_curves), ("overlay", _plot_overlay)):
            fig = fn(plt, r, f.stem, target)
            paths.append(fig_dir / f"{name}_{f.stem}.png")
            fig.savefig(paths[-1], dpi=110, bbox_inches="tight")
            plt.close(fig)
    return paths


def _plot_curves(plt, r, act, target):
    fig, axes = plt.subplots(1, 3, figsize=(13, 3.5))
    steps = np.maximum(r["step"], 0.5)
    roles = [x for x in dict.fromkeys(r["role"]) if x != "grid"]
    for k, role in enumerate(roles):
        idx = np.flatnonzero(r["role"] == role)
        label = f"{role} (sw2={r['sigma_w2'][idx[0]]:.2f})"
        for ax, key in zip(axes, ("test_fmax", "train_acc", "test_acc")):
            ax.plot(steps, r[key][:, idx].mean(1), color=f"C{k}", label=label)
            ax.plot(steps, r[key][:, idx], color=f"C{k}", lw=0.4, alpha=0.5)
    for ax, key in zip(axes, ("test f_max", "train accuracy", "test accuracy")):
        ax.set(xscale="log", xlabel="step (0 drawn at 0.5)", ylabel=key, ylim=(0.4, 1.02))
    axes[2].axhline(target, color="gray", ls=":", lw=0.8)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{act}, sigma_b2={r['sigma_b2'][0]:g}: mean over seeds (thick), seeds (thin)", fontsize=9)
    return fig


def _plot_overlay(plt, r, act, target):
    from matplotlib.colors import ListedColormap
    from matplotlib.ticker import NullFormatter, ScalarFormatter
    fig, ax = plt.subplots(figsize=(6.5, 4.6))
    codes, names = r["pd_codes"], r["pd_names"]
    lut = {int(c): i for i, c in enumerate(codes)}
    img = np.vectorize(lambda c: lut.get(int(c), -1))(r["pd_phase"]).astype(float)
    cmap = ListedColormap(plt.cm.Pastel1(np.arange(len(codes)) % 9))
    sw, sb = r["pd_sigma_w2"], r["pd_sigma_b2"]
    mesh = ax.pcolormesh(sw, sb, img.T, cmap=cmap, vmin=-0.5, vmax=len(codes) - 0.5, shading="nearest")
    cbar = fig.colorbar(mesh, ax=ax, ticks=range(len(codes)))
    cbar.ax.set_yticklabels(names, fontsize=7)
    ax.plot(r["pd_eoc"], sb, "k-", lw=1, label="EOC")
    ax.plot(r["pd_neutral"], sb, "k--", lw=1, label="neutrality line (c* = 1/2)")
    reach = steps_to_target(r["step"], r["test_acc"], target)
    points = dict.fromkeys(zip(r["sigma_w2"].tolist(), r["sigma_b2"].tolist(), (r["role"] == "grid").tolist()))
    for w, b, is_grid in points:
        sel = (r["sigma_w2"] == w) & (r["sigma_b2"] == b)
        s = reach[sel]
        never = not np.isfinite(s).any()
        text = "never" if never else f"{np.nanmedian(s):.0f}" + ("*" if not np.isfinite(s).all() else "")
        ax.scatter([w], [b], s=70, marker="o" if is_grid else "D", c="w" if never else "k", edgecolors="k", zorder=3)
        ax.annotate(text, (w, b), textcoords="offset points", xytext=(0, 7), ha="center", fontsize=7)
    ax.set(xscale="log", yscale="log", xlabel="sigma_w2", ylabel="sigma_b2",
           title=f"{act}: steps to {target:.0%} test acc (median over seeds; white/never: not in "
                 f"{int(r['step'][-1])} steps; *: some seeds never)\no grid, diamonds: phase points", )
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(ScalarFormatter())
        axis.set_minor_formatter(NullFormatter())
    ax.set_xticks([t for t in (0.5, 1, 1.5, 2, 3, 4, 5, 7, 10) if sw[0] <= t <= sw[-1]])
    ax.legend(fontsize=7, loc="lower right")
    return fig
