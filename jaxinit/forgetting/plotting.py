"""Figures of the initialization-memory study, from saved results only.

Reads `summary.json` and `metrics.jsonl` of a `python -m experiments.forgetting` run; never imports
the training code or jax, so figures can be redrawn anywhere without retraining:

    python -m jaxinit.forgetting.plotting RUN_DIR [RUN_DIR ...] [--out DIR]

writes `RUN_DIR/figures/{acc_vs_sigma,norm_trajectories,spread_vs_clocks}.png` for each run; with
several runs also one combined spread-vs-clock figure (`--out DIR/spread_vs_clocks.png`, or
`figures/spread_vs_clocks_combined.png` in the first run). A bad directory is one line on stderr
and exit status 2.

Figures are built on `matplotlib.figure.Figure` and rendered by the Agg canvas at `savefig`; pyplot
is not used, so importing this module changes no global backend state and leaks no figures.
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np
from matplotlib import cm, colors, ticker
from matplotlib.figure import Figure

from jaxinit.forgetting.memory import CLOCKS, acc_curve, read_metrics, setting_labels

_MARKERS = "osD^v<>pP*Xh"
_DPI = 110


def _save(fig: Figure, path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=_DPI, bbox_inches="tight")
    return path


def _all_positive(xs: Sequence[float]) -> bool:
    return len(xs) > 0 and all(x > 0 for x in xs)


def plot_acc_vs_sigma(summary: Mapping[str, Any], path: str | Path) -> Path:
    """Test accuracy (%) at the best-validation epoch vs sigma_w, one line per setting.

    Line: mean over seeds; band: min-max over seeds (with 2-3 seeds a std band says little).
    Dotted, faint: the same at the final epoch, to show what best-val selection keeps.
    Diverged members are left out, as in the spread. Log x when all sigma_w > 0.
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


def plot_norm_trajectories(rows: Sequence[Mapping[str, Any]], path: str | Path) -> Path:
    """Parameter norm vs epoch, one panel per setting, one line per member coloured by sigma_w.

    The colour scale (log when all sigma_w > 0) is shared by all panels, so the same colour is the
    same init scale everywhere. Non-finite norms (diverged members) leave gaps. Log y when positive.
    """
    by_member: dict[int, list[Mapping[str, Any]]] = {}
    for r in rows:
        by_member.setdefault(int(r["member"]), []).append(r)
    firsts = [sorted(v, key=lambda r: r["epoch"])[0] for _, v in sorted(by_member.items())]
    labels = setting_labels(firsts) or ["(no rows)"]
    sig = [float(r["sigma_w"]) for r in firsts] or [1.0]
    lo, hi = min(sig), max(sig)
    if hi == lo:
        lo, hi = lo * 0.9 if lo > 0 else lo - 1, hi * 1.1 if hi > 0 else hi + 1
    norm = colors.LogNorm(lo, hi) if lo > 0 else colors.Normalize(lo, hi)
    mappable = cm.ScalarMappable(norm=norm, cmap="viridis")

    n = len(labels)
    fig = Figure(figsize=(3.6 * n + 1.0, 3.6))
    axes = fig.subplots(1, n, sharey=True, squeeze=False)[0]
    positive = True
    for ax, label in zip(axes, labels):
        for m, member_rows in sorted(by_member.items()):
            if member_rows[0]["optimizer"] != label:
                continue
            pts = sorted((int(r["epoch"]), r.get("param_norm")) for r in member_rows)
            x = np.array([e for e, _ in pts], dtype=float)
            y = np.array([np.nan if v is None else float(v) for _, v in pts], dtype=float)
            positive &= bool(np.all(y[np.isfinite(y)] > 0))
            ax.plot(x, y, color=mappable.to_rgba(float(member_rows[0]["sigma_w"])), lw=1.2)
        ax.set_title(label, fontsize=9)
        ax.set_xlabel("epoch")
    if positive and by_member:
        axes[0].set_yscale("log")
    axes[0].set_ylabel("parameter norm")
    fig.colorbar(mappable, ax=list(axes), label=r"$\sigma_w$")
    return _save(fig, path)


def _scale(ax, xs: Sequence[float]) -> None:
    """Log x when every value is positive; symlog when some are 0 (e.g. T_L2 without L2)."""
    pos = [x for x in xs if x > 0]
    if pos and len(pos) == len(xs):
        ax.set_xscale("log")
        # Within about a decade matplotlib labels the minor ticks too, and they overprint each other.
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


def plot_spread_vs_clocks(runs: Sequence[tuple[str, Mapping[str, Any], int | None]],
                          path: str | Path) -> Path:
    """Spread (pp) against each forgetting clock and against the epoch count, over runs and settings.

    `runs`: `(run_label, summary, epochs)` triples, e.g. one per batch size or epoch budget; `epochs`
    is the number of epochs trained (None: taken from the members' `final_epoch`). Each setting of
    each run is one point: y = `spread_pp` (error bar: seed std), x = the median over that setting's
    non-diverged members of `T_SGD`, `T_L2`, `T_adapt` (panels 1-3), or the run's epochs (panel 4).
    Marker = setting label, colour = run. If the clock governs forgetting, the points of all runs
    fall on one curve in the clock panels but not in the epoch panel; the reverse refutes it.
    """
    all_labels: list[str] = []
    for _, s, _ in runs:
        all_labels += [lab for lab in s.get("spread", {}) if lab not in all_labels]
    marker = {lab: _MARKERS[i % len(_MARKERS)] for i, lab in enumerate(all_labels)}
    fig = Figure(figsize=(15, 3.9))
    axes = fig.subplots(1, 4, sharey=True)
    for col, (ax, what) in enumerate(zip(axes, (*CLOCKS, "epochs"))):
        xs: list[float] = []
        for r, (run_label, summary, epochs) in enumerate(runs):
            if epochs is None:
                epochs = run_epochs(summary)
            for lab, s in summary.get("spread", {}).items():
                y = s.get("spread_pp")
                x = epochs if what == "epochs" else _median_clock(summary, lab, what)
                if y is None or x is None or not math.isfinite(x):
                    continue
                err = s.get("spread_pp_std")
                ax.errorbar([x], [y], yerr=None if err is None else [err], marker=marker[lab],
                            color=f"C{r % 10}", ls="none", capsize=2, ms=6)
                xs.append(float(x))
        _scale(ax, xs)
        ax.set_xlabel(what if what == "epochs" else f"${what.replace('_', '_{')}}}$")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("spread over $\\sigma_w$ (pp)")
    # two legends: colours = runs, markers = settings
    handles = [axes[0].plot([], [], ls="none", marker="o", color=f"C{r % 10}", label=str(lab))[0]
               for r, (lab, _, _) in enumerate(runs)]
    axes[0].legend(handles=handles, title="run", fontsize=7, title_fontsize=7, loc="best")
    handles = [axes[3].plot([], [], ls="none", marker=marker[lab], color="0.3", label=lab)[0]
               for lab in all_labels]
    if handles:
        axes[3].legend(handles=handles, title="setting", fontsize=7, title_fontsize=7, loc="best")
    return _save(fig, path)


def _median_clock(summary: Mapping[str, Any], label: str, clock: str) -> float | None:
    """Median of one clock over a setting's non-diverged members, from the member entries."""
    vals = [(m.get("clocks") or {}).get(clock) for m in summary.get("members", [])
            if m.get("optimizer") == label and not m.get("diverged")]
    vals = [float(v) for v in vals if v is not None and math.isfinite(float(v))]
    return float(np.median(vals)) if vals else None


def _load_run(run_dir: str | Path) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    d = Path(run_dir)
    if not d.is_dir():
        raise FileNotFoundError(f"{d}: no such run directory")
    for name in ("summary.json", "metrics.jsonl"):
        if not (d / name).is_file():
            raise FileNotFoundError(f"{d}: no {name} (not a finished forgetting run?)")
    try:
        summary = json.loads((d / "summary.json").read_text())
    except json.JSONDecodeError as e:
        raise ValueError(f"{d / 'summary.json'}: not JSON ({e.msg})") from None
    if "members" not in summary:
        raise ValueError(f"{d / 'summary.json'}: no 'members' (not a forgetting summary)")
    summary.setdefault("spread", {})
    return summary, read_metrics(d / "metrics.jsonl")


def _epochs_from_rows(rows: Sequence[Mapping[str, Any]]) -> int | None:
    return max((int(r["epoch"]) for r in rows), default=None)


def make_all(run_dir: str | Path) -> list[Path]:
    """Write `run_dir/figures/*.png` from `summary.json` and `metrics.jsonl`; return the paths.

    Raises FileNotFoundError / ValueError for a missing directory or unreadable files.
    """
    summary, rows = _load_run(run_dir)
    return _draw_run(run_dir, summary, rows)


def _draw_run(run_dir: str | Path, summary: Mapping[str, Any], rows: Sequence[Mapping[str, Any]]) -> list[Path]:
    out = Path(run_dir) / "figures"
    return [plot_acc_vs_sigma(summary, out / "acc_vs_sigma.png"),
            plot_norm_trajectories(rows, out / "norm_trajectories.png"),
            plot_spread_vs_clocks([(Path(run_dir).name, summary, _epochs_from_rows(rows))],
                                  out / "spread_vs_clocks.png")]


def main(argv: Sequence[str] | None = None) -> int:
    """CLI: `python -m jaxinit.forgetting.plotting RUN_DIR [RUN_DIR ...] [--out DIR]`; returns the exit status."""
    args = list(sys.argv[1:] if argv is None else argv)
    usage = "usage: python -m jaxinit.forgetting.plotting RUN_DIR [RUN_DIR ...] [--out DIR]"
    if any(a in ("-h", "--help") for a in args):
        print(__doc__)
        return 0
    if not args:
        print(f"error: no run directory ({usage})", file=sys.stderr)
        return 2
    out = None
    dirs: list[str] = []
    it = iter(args)
    for a in it:
        if a == "--out":
            out = next(it, None)
            if out is None:
                print("error: --out needs a directory", file=sys.stderr)
                return 2
        elif a.startswith("--out="):
            out = a.split("=", 1)[1]
        elif a.startswith("-"):
            print(f"error: unknown argument {a!r}", file=sys.stderr)
            return 2
        else:
            dirs.append(a)
    try:
        if not dirs:
            raise ValueError(f"no run directory ({usage})")
        loaded = [(d, *_load_run(d)) for d in dirs]  # check every directory before drawing anything
        written = [p for d, summary, rows in loaded for p in _draw_run(d, summary, rows)]
        runs = [(Path(d).resolve().name, summary, _epochs_from_rows(rows)) for d, summary, rows in loaded]
        if len(runs) > 1:
            target = (Path(out) / "spread_vs_clocks.png" if out
                      else Path(dirs[0]) / "figures" / "spread_vs_clocks_combined.png")
            written.append(plot_spread_vs_clocks(runs, target))
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for p in written:
        print(p)
    return 0


if __name__ == "__main__":
    sys.exit(main())
