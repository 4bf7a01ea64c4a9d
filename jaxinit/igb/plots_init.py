"""Figures of the study at init, from results only (no model code runs).

`init_figures(cases)` -> ``{name: matplotlib Figure}`` from `probe_init(...).arrays` (or the saved
``results/*.npz``): per input set the per-layer c against mean field, f_max against the IGB predictions
(readout c, readout rho, the GP over each network's own kernel), gradient quantiles by class, gamma
estimators, f_max histograms; and the finite-width sweep. Figures are `matplotlib.figure.Figure`
objects (no pyplot, no backend switch), so they show inline in a notebook. `plot_init_results(DIR)`
writes them to ``DIR/figures`` (what ``--replot DIR`` runs).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter, ScalarFormatter

from jaxinit.igb import results as results_schema

from jaxinit.run.runs import load_results
from jaxinit.igb.probe import GROUPS
from jaxinit.igb.study_init import WIDTH_CASE
from jaxinit.shared import sink


def plot_init_results(out: Path) -> list[Path]:
    """Every figure from ``out/results/*.npz``, written to ``out/figures``."""
    cases = load_results(out)
    results_schema.check_init(cases)
    with results_schema.reading(f"--replot {Path(out)}"):
        figures = init_figures(cases)
    return sink.save_figures(figures, Path(out) / "figures")


def init_figures(cases: dict[str, dict]) -> dict[str, Figure]:
    """Figures by name (``c_layers_gaussian``, ``fmax_digits``, ..., ``width``)."""
    by_input: dict[str, dict[str, dict]] = {}
    for name, res in cases.items():
        if name != WIDTH_CASE:
            input_name, case = name.split("__")
            by_input.setdefault(input_name, {})[case] = res
    figures = {}
    for input_name, per_case in by_input.items():
        for name, fn in (("c_layers", _plot_c_layers), ("fmax", _plot_fmax), ("grads", _plot_grads),
                         ("gamma_estimators", _plot_gamma), ("fmax_hist", _plot_fmax_hist)):
            fig = fn(per_case, input_name)
            if fig is not None:
                figures[f"{name}_{input_name}"] = fig
    if WIDTH_CASE in cases:
        figures["width"] = plot_width(cases[WIDTH_CASE])
    return figures


def _first_b2(res) -> np.ndarray:
    return np.flatnonzero(res["sigma_b2"] == res["sigma_b2"][0])


def _theory_panels(cases, keep=lambda case: True):
    """One panel per case with mean-field theory (and passing `keep`): (fig, [(ax, case, res, grid indices at
    the first sigma_b2, one colour per index)]), or None."""
    with_theory = {c: r for c, r in cases.items() if "c_theory" in r and keep(c)}
    if not with_theory:
        return None
    fig = Figure(figsize=(4 * len(with_theory), 3.4))
    axes = fig.subplots(1, len(with_theory), squeeze=False)
    panels = []
    for ax, (case, r) in zip(axes[0], with_theory.items()):
        idx = _first_b2(r)
        panels.append((ax, case, r, idx, colormaps["viridis"](np.linspace(0, 1, len(idx)))))
    return fig, panels


def _plot_c_layers(cases, input_name):
    panels = _theory_panels(cases)
    if panels is None:
        return None
    fig, panels = panels
    for ax, case, r, idx, colors in panels:
        n_hidden = r["c"].shape[-1]
        for col, g in zip(colors, idx):
            ax.plot(np.arange(1, r["c_theory"].shape[1] + 1), r["c_theory"][g], color=col, lw=1.2,
                    label=f"{r['sigma_w2'][g]:g}")
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


def _fmax_panel(ax, r, idx, tag):
    sw = r["sigma_w2"][idx]
    vals = r[f"fmax_{tag}"][:, idx]
    sem = vals.std(0, ddof=1) / np.sqrt(len(vals)) if len(vals) > 1 else None
    ax.errorbar(sw, vals.mean(0), sem, fmt="o", color="k", ms=3, label="measured")
    ax.plot(sw, r[f"fmax{tag}_theory_readout"][idx], "--", color="C1", label="IGB | readout c")
    if f"fmax_{tag}_gp" in r:
        ax.plot(sw, r[f"fmax{tag}_theory_rho"][idx], "-.", color="C3", label="IGB | readout rho")
        ax.plot(sw, r[f"fmax_{tag}_gp"][:, idx].mean(0), "x", color="C4", ms=5, label="GP | network's kernel")
    if f"fmax{tag}_theory_mf" in r:
        ax.plot(sw, r[f"fmax{tag}_theory_mf"][idx], "-", color="C0", label="IGB | mean-field c")
    if tag == "2" and "fmax2_theory_mf_n" in r:
        ax.plot(sw, r["fmax2_theory_mf_n"][idx], ":", color="C2", label="same, n inputs")


def _log_sigma_axis(ax, ticks=(1, 2, 3, 5)):
    ax.set_xscale("log")
    ax.xaxis.set_major_formatter(ScalarFormatter())
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xticks(list(ticks))


def _plot_fmax(cases, input_name):
    fig = Figure(figsize=(3.2 * len(cases), 6.2))
    axes = fig.subplots(2, len(cases), squeeze=False, sharey="row")
    for j, (case, r) in enumerate(cases.items()):
        for i, (tag, n_cls) in enumerate((("2", 2), ("all", 10))):
            ax = axes[i, j]
            _fmax_panel(ax, r, _first_b2(r), tag)
            ax.set(xlabel="sigma_w2", title=f"{case}, {n_cls} classes", ylim=(1 / n_cls - 0.02, 1.02))
            _log_sigma_axis(ax)
            if j == 0:
                ax.set_ylabel("E f_max")
            if i == 0:
                ax.legend(fontsize=5, loc="lower left")
    first = next(iter(cases.values()))
    fig.subplots_adjust(hspace=0.35)
    fig.suptitle(f"f_max at init ({input_name}, sigma_b2={first['sigma_b2'][0]:g}, mean +- sem over "
                 f"{first['fmax_2'].shape[0]} draws)", fontsize=9)
    return fig


def _plot_fmax_hist(cases, input_name):
    with_samples = {c: r for c, r in cases.items() if "fmax2_samples_mf" in r and c.startswith("mlp")}
    if not with_samples:
        return None
    first = next(iter(with_samples.values()))
    idx = _first_b2(first)
    fig = Figure(figsize=(2.4 * len(idx), 2.2 * len(with_samples)))
    axes = fig.subplots(len(with_samples), len(idx), squeeze=False, sharex=True)
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


def _plot_grads(cases, input_name):
    with_grads = {c: r for c, r in cases.items() if "grad_quantiles" in r}
    if not with_grads:
        return None
    fig = Figure(figsize=(11, 2.8 * len(with_grads)))
    axes = fig.subplots(len(with_grads), 3, squeeze=False)
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


def _plot_gamma(cases, input_name):
    panels = _theory_panels(cases, keep=lambda case: case.startswith("mlp"))
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
               title=f"{case}: x naive, o corrected, - theory ({input_name})")
    return fig


def plot_width(res: dict) -> Figure:
    """Against width, at the last hidden layer: the signed relative error of the naive and the bias-corrected
    gamma (mean +- sem over draws; dashed: the naive estimator's expected inflation (1 + gamma)/((n - 1) gamma)),
    and |mean c - c_mf| with the spread of c over draws."""
    fig = Figure(figsize=(11, 3.8))
    ax_g, ax_c = fig.subplots(1, 2)
    widths, n = res["widths"], int(res["n_inputs"])
    for g, name in enumerate(res["phase"]):
        gamma_th, c_th, col = res["gamma_theory"][g, -1], res["c_theory"][g, -1], f"C{g}"
        for key, fmt, shift in (("gamma", "x--", 0.97), ("gamma_corr", "o-", 1.03)):
            rel = res[key][:, :, g, -1] / gamma_th - 1.0                    # (width, draw)
            sem = rel.std(axis=1, ddof=1) / np.sqrt(rel.shape[1]) if rel.shape[1] > 1 else None
            ax_g.errorbar(widths * shift, rel.mean(axis=1), sem, fmt=fmt, color=col, ms=4, lw=1,
                          label=f"{name} (sw2={res['sigma_w2'][g]:.2f}, gamma={gamma_th:.3g})" if key == "gamma_corr" else None)
        ax_g.axhline((1 + gamma_th) / ((n - 1) * gamma_th), color=col, ls=":", lw=0.8)
        c = res["c"][:, :, g, -1]
        sem = c.std(axis=1, ddof=1) / np.sqrt(c.shape[1]) if c.shape[1] > 1 else None
        ax_c.errorbar(widths, np.abs(c.mean(axis=1) - c_th), sem, fmt="o-", color=col, ms=4, label=name)
        if c.shape[1] > 1:
            ax_c.plot(widths, c.std(axis=1, ddof=1), "x:", color=col, ms=4)
    ax_g.axhline(0.0, color="k", lw=0.6)
    ax_c.plot(widths, 1.0 / np.sqrt(widths), "k:", lw=0.8, label="1/sqrt(width)")
    for ax in (ax_g, ax_c):
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xticks(list(widths))
        ax.set_xlabel("width")
    ax_g.set_ylabel("gamma_est / gamma_mf - 1", fontsize=8)
    ax_g.set_title("x naive gamma, o bias-corrected gamma_corr (mean +- sem);\ndotted: expected naive inflation "
                   "(1 + gamma)/((n - 1) gamma)", fontsize=8)
    ax_c.set_yscale("log")
    ax_c.set_ylabel("|mean c - c_mf| (o, +- sem); sd of c over draws (x)", fontsize=8)
    ax_c.set_title("c = P/Q", fontsize=8)
    ax_g.legend(fontsize=6)
    ax_c.legend(fontsize=6)
    fig.suptitle(f"finite width: tanh MLP, {res['c'].shape[1]} draws per width, {n} gaussian inputs, last hidden layer "
                 f"(depth {res['c'].shape[-1]}), sigma_b2 = {res['sigma_b2'][0]:g}", fontsize=9)
    fig.tight_layout()
    return fig
