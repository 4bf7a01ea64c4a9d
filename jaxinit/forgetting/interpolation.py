"""Does depth make large-`sigma_w` members fail to interpolate? Finished forgetting runs that differ in depth.

The paper's claim (Das et al. 2026): deep networks initialised at large `sigma_w` fail to interpolate.
Measured per member on the last epoch of the run (every member trains the same number of epochs):

    e = 100 (1 - train accuracy at the final epoch)             (train error, pp)

and per seed s the cost of the large scale against a reference scale in one run,

    g_s = e(sigma_large, s) - e(sigma_ref, s),

(same seed: same data order, the same kernels' directions up to the scale). The claim predicts that g grows
with depth; the depth x sigma_w interaction of a deep run D against a shallow run S is

    Delta = mean_s g_s(D) - mean_s g_s(S)      (pp; > 0: the deep net pays more for the large scale)

with a Welch t interval and an exact two-sample permutation p (H0: the g_s of the two runs are exchangeable;
every split of the pooled seeds into groups of the runs' sizes; with 5 + 5 seeds the smallest p is 2/252).
Seeds are not paired across runs: different architectures share a seed's data order but not its kernels.

Next to it, per run, setting and `sigma_w`: how many members ever reach 99.5 % train accuracy (`tau_interp`
of the summary, Clopper-Pearson interval) and their median first epoch there.

    python -m jaxinit.forgetting.interpolation RUN_SHALLOW RUN_DEEPER [RUN_DEEPEST ...] [--figure OUT.png]

Pure numpy on each run's summary.json and metrics.jsonl.
"""
from __future__ import annotations

import itertools
import json
import math
import sys
from pathlib import Path
from typing import Any, Mapping, Sequence

import numpy as np

from jaxinit.intervals import binomial_interval
from jaxinit.forgetting.tables import _fmt, _with_ci, _p
from jaxinit.shared.history import as_float, read_metrics

SIGMA_REF = 1.0       # the He scale: the reference every larger sigma_w is compared with
MAX_SPLITS = 20_000   # exact permutation up to this many splits, else this many random ones


def final_train_error(rows: Sequence[Mapping[str, Any]]) -> dict[int, float]:
    """{member: 100 (1 - train_acc)} at each member's last evaluated epoch; a non-finite accuracy (a
    diverged member) counts as 100 pp: it did not fit the training set."""
    last: dict[int, tuple[int, float]] = {}
    for r in rows:
        if "train_acc" not in r:
            continue
        m, ep = int(r["member"]), int(r["epoch"])
        if m not in last or ep >= last[m][0]:
            acc = as_float(r["train_acc"])
            last[m] = (ep, 100.0 * (1.0 - acc) if math.isfinite(acc) else 100.0)
    return {m: e for m, (_, e) in last.items()}


def gaps(members: Sequence[Mapping[str, Any]], error: Mapping[int, float], setting: str,
         sigma_large: float, sigma_ref: float = SIGMA_REF) -> dict[int, float]:
    """{seed: e(sigma_large, seed) - e(sigma_ref, seed)} for the seeds that have both members."""
    by = {(float(m["sigma_w"]), int(m["seed"])): error.get(int(m["member"]))
          for m in members if m["optimizer"] == setting}
    return {s: by[(sigma_large, s)] - by[(sigma_ref, s)]
            for (sig, s) in by if sig == sigma_large and by.get((sigma_ref, s)) is not None
            and by[(sigma_large, s)] is not None}


def welch_interval(a: Sequence[float], b: Sequence[float], level: float = 0.95) -> list[float] | None:
    """Interval for mean(b) - mean(a) with Welch-Satterthwaite degrees of freedom; None below 2 per group
    (or with no spread at all)."""
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    if a.size < 2 or b.size < 2:
        return None
    va, vb = a.var(ddof=1) / a.size, b.var(ddof=1) / b.size
    se = math.sqrt(va + vb)
    d = float(b.mean() - a.mean())
    if se == 0:
        return [d, d]
    df = (va + vb) ** 2 / (va ** 2 / (a.size - 1) + vb ** 2 / (b.size - 1))
    from scipy import stats
    half = float(stats.t.ppf(0.5 + level / 2, df)) * se
    return [d - half, d + half]


def permutation_p(a: Sequence[float], b: Sequence[float], seed: int = 0) -> float | None:
    """Two-sided p of |mean(b) - mean(a)| under relabelling the pooled values into groups of the same sizes
    (exact when there are at most MAX_SPLITS splits)."""
    if len(a) < 1 or len(b) < 1:
        return None
    pooled = np.concatenate([np.asarray(a, np.float64), np.asarray(b, np.float64)])
    na, n = len(a), len(a) + len(b)
    obs = abs(pooled[na:].mean() - pooled[:na].mean())
    if math.comb(n, na) <= MAX_SPLITS:
        idx = [np.array(c) for c in itertools.combinations(range(n), na)]
    else:
        rng = np.random.default_rng(seed)
        idx = [rng.permutation(n)[:na] for _ in range(MAX_SPLITS)]
    total, hits = pooled.sum(), 0
    for ia in idx:
        sa = pooled[ia].sum()
        diff = abs((total - sa) / (n - na) - sa / na)
        hits += diff >= obs * (1 - 1e-12) - 1e-12
    return float(hits / len(idx))


def interaction(shallow: Mapping[int, float], deep: Mapping[int, float]) -> dict[str, Any]:
    """Delta = mean g(deep) - mean g(shallow) with its Welch interval and permutation p."""
    a, b = list(shallow.values()), list(deep.values())
    return {"n": [len(a), len(b)], "gap_shallow": float(np.mean(a)) if a else None,
            "gap_deep": float(np.mean(b)) if b else None,
            "delta": float(np.mean(b) - np.mean(a)) if a and b else None,
            "ci95": welch_interval(a, b), "p": permutation_p(a, b)}


def interpolation_counts(members: Sequence[Mapping[str, Any]], setting: str) -> dict[float, dict[str, Any]]:
    """Per sigma_w: members that ever reached 99.5 % train accuracy (k of n, exact interval) and the median
    first epoch there among them."""
    out: dict[float, dict[str, Any]] = {}
    for sig in sorted({float(m["sigma_w"]) for m in members if m["optimizer"] == setting}):
        taus = [m.get("tau_interp") for m in members if m["optimizer"] == setting and float(m["sigma_w"]) == sig]
        hit = [t for t in taus if t is not None]
        out[sig] = {"k": len(hit), "n": len(taus), "ci95": binomial_interval(len(hit), len(taus)),
                    "median_tau": float(np.median(hit)) if hit else None}
    return out


def load(run: Path) -> tuple[list, dict[int, float]]:
    """(summary members, final train error per member) of a finished run directory."""
    members = json.loads((run / "summary.json").read_text())["members"]
    return members, final_train_error(list(read_metrics(run / "metrics.jsonl")))


def table(runs: Sequence[tuple[str, list, dict]], sigma_ref: float = SIGMA_REF) -> str:
    """Markdown: interpolation counts per run, setting and sigma_w, then Delta of every later run against the
    first for every sigma_w > sigma_ref."""
    first_name, first_members, first_err = runs[0]
    settings = list(dict.fromkeys(m["optimizer"] for m in first_members))
    grid = sorted({float(m["sigma_w"]) for m in first_members if m["optimizer"] == settings[0]})
    lines = ["| setting | run | " + " | ".join(f"sigma_w {s:g}" for s in grid) + " |",
             "|---|---|" + "---|" * len(grid)]
    for setting in settings:
        for name, members, _ in runs:
            cells = [f"{c['k']}/{c['n']}, " + (_fmt(c["median_tau"], ".0f") if c["k"] else "-")
                     for c in interpolation_counts(members, setting).values()]
            lines.append(f"| {setting} | {name} | " + " | ".join(cells) + " |")
    lines += ["", "cells: members that reach 99.5 % train accuracy (k/n), median first epoch there", "",
              f"| setting | sigma_w vs {sigma_ref:g} | run | gap pp, first run | gap pp, this run "
              "| Delta pp [95 % Welch CI] | permutation p |", "|---|---|---|---|---|---|---|"]
    for setting in settings:
        sigmas = sorted({float(m["sigma_w"]) for m in first_members if m["optimizer"] == setting})
        for sig in (s for s in sigmas if s > sigma_ref):
            g0 = gaps(first_members, first_err, setting, sig, sigma_ref)
            for name, members, err in runs[1:]:
                d = interaction(g0, gaps(members, err, setting, sig, sigma_ref))
                lines.append(f"| {setting} | {sig:g} | {name} | {_fmt(d['gap_shallow'], '.1f')} "
                             f"| {_fmt(d['gap_deep'], '.1f')} | {_with_ci(d['delta'], d['ci95'])} | {_p(d['p'])} |")
    lines += ["", "gap: final train error at sigma_w minus at the reference, mean over seeds (pp); "
              "Delta: this run's gap minus the first run's"]
    return "\n".join(lines)


def figure(runs: Sequence[tuple[str, list, dict]], path: Path) -> None:
    """Final train accuracy (%) against sigma_w, one panel per setting, one line per run (mean over seeds,
    the seeds as dots)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    settings = list(dict.fromkeys(m["optimizer"] for m in runs[0][1]))
    fig, axes = plt.subplots(1, len(settings), figsize=(3.2 * len(settings), 3.0), sharey=True, squeeze=False)
    for ax, setting in zip(axes[0], settings):
        for name, members, err in runs:
            ms = [m for m in members if m["optimizer"] == setting and int(m["member"]) in err]
            sig = np.array([float(m["sigma_w"]) for m in ms])
            acc = np.array([100.0 - err[int(m["member"])] for m in ms])
            grid = np.unique(sig)
            line, = ax.plot(grid, [acc[sig == g].mean() for g in grid], marker="o", label=name)
            ax.scatter(sig, acc, s=6, alpha=0.4, color=line.get_color())
        ax.axhline(99.5, color="grey", lw=0.6, ls="--")
        ax.set(xscale="log", title=setting, xlabel="sigma_w")
    axes[0][0].set_ylabel("train accuracy at the last epoch (%)")
    axes[0][-1].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    fig_path = None
    if "--figure" in args:
        i = args.index("--figure")
        if i + 1 >= len(args):
            print("--figure needs a file name", file=sys.stderr)
            return 2
        fig_path = Path(args[i + 1])
        del args[i:i + 2]
    if len(args) < 2:
        print("usage: python -m jaxinit.forgetting.interpolation RUN_SHALLOW RUN_DEEPER [...] [--figure OUT.png]",
              file=sys.stderr)
        return 2
    runs = []
    for d in args:
        try:
            runs.append((Path(d).name, *load(Path(d))))
        except (OSError, ValueError, KeyError) as err:
            print(f"{d}: cannot read a finished run's summary.json and metrics.jsonl ({type(err).__name__})",
                  file=sys.stderr)
            return 2
    print(table(runs))
    if fig_path is not None:
        figure(runs, fig_path)
        print(f"wrote {fig_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
