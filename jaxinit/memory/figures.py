"""Figures of the joined study from a run's summary.json and config.json only (what ``--replot DIR`` runs).

``overlay_<act>__d<depth>``: the theory phase diagram (`theory.phase.diagram_around`) with every point, one
panel per optimizer, coloured by the residual prejudice (off-distribution f_max at the selected step, mean over
seeds) and annotated with f_max at init -> selected and the test accuracy (the memory of the phase);
``residual_vs_predicted``: off-distribution f_max at the selected step (filled) and at init (open) against the
theory's E f_max at init; ``decay_vs_clock``: the line's test-accuracy spread (horizon rule), the pooled identity
r of init against step t and the mean off-distribution f_max over training, against each optimizer's own clock
(sgd: T_SGD, sgd_l2: T_L2, adam: T_adapt; one rate per line, so one clock), with the forgetting study's crossing
(`jaxinit.memory.hypotheses.CROSSING`) marked; ``identity_vs_depth``: per point the identity r at the selected
step with its 95 % interval and the null's 95th percentile, against L / xi_c, one panel per network.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure
from matplotlib.ticker import NullFormatter, ScalarFormatter

from jaxinit.shared import sink

OWN_CLOCK = {"sgd": "T_SGD", "sgd_l2": "T_L2", "adam": "T_adapt"}
MARKERS = {"sgd": "o", "adam": "s", "sgd_l2": "^"}


def plot_all(out: Path) -> list[Path]:
    """Every figure of the run in ``out``, written to ``out/figures``."""
    out = Path(out)
    summary = json.loads((out / "summary.json").read_text())
    res = json.loads((out / "config.json").read_text())["train"]["phase_res"]
    return sink.save_figures(figures(summary, res), out / "figures")


def figures(summary: dict, phase_res: int = 60) -> dict[str, Figure]:
    cases = summary["cases"]
    out = {}
    for net in dict.fromkeys(f"{c['act']}__d{c['depth']}" for c in cases.values()):
        out[f"overlay_{net}"] = plot_overlay({n: c for n, c in cases.items() if n.startswith(net + "__")}, phase_res)
    out["residual_vs_predicted"] = plot_residual(cases)
    out["decay_vs_clock"] = plot_decay(cases)
    out["identity_vs_depth"] = plot_identity(cases)
    return out


def plot_overlay(cases: dict, res: int) -> Figure:
    """One panel per optimizer of one network: the diagram and the points (module docstring)."""
    from theory.phase import diagram_around
    first = next(iter(cases.values()))
    sw2 = np.array([p["sigma_w2"] for p in first["points"]])
    sb2 = float(first["points"][0]["sigma_b2"])
    d = diagram_around(first["act"], first["depth"], sw2, np.array([min(sb2, 0.02), max(sb2, 0.7)]), res)
    lut = {int(c): i for i, c in enumerate(d["pd_codes"])}
    img = np.vectorize(lambda c: lut.get(int(c), -1))(d["pd_phase"]).astype(float)
    cmap = ListedColormap(colormaps["Pastel1"](np.arange(len(lut)) % 9))
    fig = Figure(figsize=(5 * len(cases), 4.2))
    axes = np.atleast_1d(fig.subplots(1, len(cases)))
    for ax, c in zip(axes, cases.values()):
        mesh = ax.pcolormesh(d["pd_sigma_w2"], d["pd_sigma_b2"], img.T, cmap=cmap, vmin=-0.5, vmax=len(lut) - 0.5,
                             shading="nearest")
        ax.plot(d["pd_eoc"], d["pd_sigma_b2"], "k-", lw=1)
        ax.plot(d["pd_neutral"], d["pd_sigma_b2"], "k--", lw=1)
        resid = [p["off_fmax_best"]["mean"] for p in c["points"]]
        ax.scatter(sw2, [sb2] * len(sw2), c=[np.nan if v is None else v for v in resid], cmap="viridis", vmin=0.1,
                   vmax=1.0, s=60, edgecolors="k", zorder=3)
        for k, p in enumerate(c["points"]):
            acc = p["test_acc_best"]["mean"]
            ax.annotate(f"{_f(p['off_fmax_init']['mean'])}->{_f(p['off_fmax_best']['mean'])}\nacc {_f(acc, 3)}",
                        (sw2[k], sb2), textcoords="offset points", xytext=(0, 9 + 18 * (k % 2)), ha="center",
                        fontsize=6)
        ax.set(xscale="log", yscale="log", xlabel="sigma_w2", ylabel="sigma_b2",
               title=f"{c['act']} d{c['depth']} {c['optimizer']}: off f_max init->selected, test acc")
        ax.title.set_fontsize(8)
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())
    cbar = fig.colorbar(mesh, ax=list(axes), ticks=range(len(lut)))
    cbar.ax.set_yticklabels([str(n) for n in d["pd_names"]], fontsize=6)
    return fig


def _f(v, digits: int = 2) -> str:
    return "-" if v is None else f"{v:.{digits}f}"


def plot_residual(cases: dict) -> Figure:
    """Measured off-distribution f_max (init: open, selected step: filled, 95 % t interval) against E f_max."""
    fig = Figure(figsize=(5.5, 4.5))
    ax = fig.subplots()
    for k, c in enumerate(cases.values()):
        x = np.array([p["fmax_theory"] for p in c["points"]], float)
        for at, face in (("off_fmax_init", "none"), ("off_fmax_best", f"C{k}")):
            y = np.array([np.nan if p[at]["mean"] is None else p[at]["mean"] for p in c["points"]])
            ci = [p[at]["ci95"] or [np.nan, np.nan] for p in c["points"]]
            err = np.abs(np.array(ci, float).T - y)
            ax.errorbar(x, y, yerr=err, fmt=MARKERS.get(c["optimizer"], "o"), mfc=face, mec=f"C{k}", ecolor=f"C{k}",
                        ms=6, lw=0.8, label=f"{c['act']} d{c['depth']} {c['optimizer']}" if face != "none" else None)
    ax.plot([0.1, 1], [0.1, 1], "k:", lw=1)
    ax.set(xlabel="theory E f_max at init (10 classes, layer L)", ylabel="measured off-distribution f_max",
           title="residual prejudice (filled: selected step; open: init)")
    ax.legend(fontsize=6)
    return fig


def plot_decay(cases: dict) -> Figure:
    """Three measures over training against each case's own clock (module docstring); step 0 is left out."""
    from jaxinit.memory.hypotheses import CROSSING
    fig = Figure(figsize=(13, 3.8))
    axes = fig.subplots(1, 3)
    for k, (name, c) in enumerate(cases.items()):
        t = c["trajectory"]
        clock_name, cross = CROSSING.get(c["optimizer"], ("T_adapt", None))
        x = np.array(t["clocks"][clock_name], float)
        off = np.nanmean(np.array(t["off_fmax"], float), axis=1)
        spread = np.array([np.nan if v is None else v for v in t["spread_pp"]], float)
        ident = np.array([np.nan if v is None else v for v in t["identity_r"]], float)
        for ax, y in zip(axes, (spread, ident, off)):
            ax.plot(x[1:], y[1:], marker=MARKERS.get(c["optimizer"], "o"), ms=3, color=f"C{k}",
                    label=f"{name} ({clock_name})")
            if cross is not None:
                ax.axvline(cross, color=f"C{k}", ls=":", lw=1)
    for ax, label in zip(axes, ("test-acc spread over the line (pp, horizon rule)",
                                "identity r, init vs step t (pooled)", "off-distribution f_max (mean over points)")):
        ax.set(xscale="log", xlabel="own clock", ylabel=label)
    axes[1].axhline(0.0, color="k", ls="-", lw=0.5)
    fig.suptitle("own clock: sgd T_SGD, sgd_l2 T_L2, adam T_adapt (one rate per line); dotted: the forgetting "
                 "study's crossing of that clock", fontsize=8)
    fig.subplots_adjust(wspace=0.3)
    axes[0].legend(fontsize=6)
    return fig


def plot_identity(cases: dict) -> Figure:
    """Per point the identity r at the selected step (95 % interval; open: the point does not train) and the
    null's 95th percentile (short bar), against L / xi_c; one panel per network."""
    nets = list(dict.fromkeys(f"{c['act']}__d{c['depth']}" for c in cases.values()))
    fig = Figure(figsize=(5.5 * len(nets), 4.2))
    axes = np.atleast_1d(fig.subplots(1, len(nets)))
    for ax, net in zip(axes, nets):
        mine = [c for n, c in cases.items() if n.startswith(net + "__")]
        for k, c in enumerate(mine):
            shift = 0.08 * (k - (len(mine) - 1) / 2)
            for p in c["points"]:
                x, ident = (p.get("depth_over_xi_c") or 0.0) + shift, p["identity_best"]
                if ident["r"] is None:
                    continue
                lo, hi = ident["ci95"] or (ident["r"], ident["r"])
                ax.errorbar([x], [ident["r"]], yerr=[[ident["r"] - lo], [hi - ident["r"]]],
                            fmt=MARKERS.get(c["optimizer"], "o"), color=f"C{k}", mfc=f"C{k}" if p["trained"] else "none",
                            ms=6, lw=0.8)
                if ident["null_q95"] is not None:
                    ax.plot([x - 0.03, x + 0.03], [ident["null_q95"]] * 2, color=f"C{k}", lw=1.5)
                if k == 0:
                    ax.annotate(p["role"], (x, ident["r"]), textcoords="offset points", xytext=(4, 4), fontsize=6)
            ax.plot([], [], MARKERS.get(c["optimizer"], "o"), color=f"C{k}", label=c["optimizer"])
        ax.axhline(0.0, color="k", lw=0.5)
        ax.set(xlabel="L / xi_c", ylabel="identity r (init vs selected step)", ylim=(-1.05, 1.05),
               title=f"{net}: r, 95 % interval, null 95th pct (bar); open: not trained")
        ax.title.set_fontsize(8)
        ax.legend(fontsize=7)
    return fig
