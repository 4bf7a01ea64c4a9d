"""Tables and figures of a design's verdicts (`design.analyse`): the run's table.md (wide, markdown), a narrow
terminal summary (<= 100 characters a line) and figures/design_<group>.png (each point's spread against
every candidate clock, trained cells filled, with the 95 % intervals over splits as error bars).
Pure formatting of the design dict; no statistics are computed here except the drawn pooled fit."""
from __future__ import annotations

from pathlib import Path
from typing import Any, Mapping

from jaxinit.forgetting.tables import _fmt

CLOCK_NAMES = {"T_SGD": "T_SGD", "T_adapt": "sum eta", "T_L2": "T_L2", "T_SGD_eff_slowest": "T_SGD eff (slowest)",
               "T_adapt_eff_slowest": "sum eta eff (slowest)", "T_update": "T_update", "T_update2": "T_update2",
               "steps": "steps", "epochs": "epochs", "T_adapt_over_b": "sum eta / b (exploratory)"}


def _var_ci(v: Any, ci: Any) -> str:
    """A residual variance with its interval; the bias-corrected percentile bounds of a variance are clipped at
    0 (the shift that corrects the resampled seed means' extra noise can carry a bound below it)."""
    if v is None:
        return "-"
    return f"{v:.2f}" + (f" [{max(ci[0], 0.0):.2f}, {ci[1]:.2f}]" if ci else "")


def _ci(s: Mapping[str, Any] | None, spec: str = ".1f") -> str:
    if not s or s.get("mean") is None:
        return "-"
    ci = s.get("ci95")
    return f"{s['mean']:{spec}}" + (f" [{ci[0]:{spec}}, {ci[1]:{spec}}]" if ci else "")


def _p(p: Any) -> str:
    return "-" if p is None else ("<0.001" if p < 0.001 else f"{p:.3f}")


def cell_text(st: Mapping[str, Any] | None) -> str:
    """'spread [CI] (null N, p P)' of a `design_stats.cell`."""
    if not st:
        return "-"
    return f"{_ci(st['spread'])} (null {_fmt(st.get('null'), '.1f')}, p {_p(st.get('spread_p'))})"


def _clock(c: Mapping[str, Any], k: str) -> str:
    return _fmt(c.get(k), ".3g")


def points_table(d: Mapping[str, Any]) -> list[str]:
    rule = d["rule"]
    out = ["| point | epoch | T_SGD | sum eta | T_L2 | T_SGD eff (slowest) | trained | min train acc (final / best) "
           f"| {rule} spread pp [95 % CI] (null, p) | {rule} slope pp/e-fold [95 % CI] | best_val spread "
           "| best_val interpolated | matched 99.5 % |", "|" + "---|" * 11]
    for name, pt in d["points"].items():
        for c in pt["cells"]:
            st = c.get(rule)
            tf, tb = c.get("train_acc_final_min"), c.get("train_acc_at_best_min")
            out.append(f"| {name} | {c['epoch']} | {_clock(c['clocks'], 'T_SGD')} | {_clock(c['clocks'], 'T_adapt')} "
                       f"| {_clock(c['clocks'], 'T_L2')} | {_clock(c['clocks'], 'T_SGD_eff_slowest')} "
                       f"| {'yes' if c['trained'] else 'no'} | {_fmt(None if tf is None else 100 * tf, '.1f')} / "
                       f"{_fmt(None if tb is None else 100 * tb, '.1f')} | {cell_text(st)} "
                       f"| {_ci(st['slope']) if st else '-'} | {cell_text(c.get('best_val'))} "
                       f"| {cell_text(c.get('best_val_interpolated'))} | {cell_text(c.get('matched'))} |")
    return out


def collapse_table(title: str, res: Mapping[str, Any]) -> list[str]:
    out = [f"**{title}** ({res['n_runs']} points, {res['n_points']} cells, rule {res['rule']}, clocks at "
           f"{'the horizon' if res['clock_field'] == 'clocks' else 'the selected epoch'}; best: "
           f"{CLOCK_NAMES.get(res['better'], res['better'])}{'' if res['decisive'] else ', not decisive'})", "",
           "| clock | residual variance pp^2 [95 % CI] | unexplained share | minus the best [95 % CI] |",
           "|---|---|---|---|"]
    for k, v in res["clocks"].items():
        var = _var_ci(v["residual_var_pp2"], v.get("ci95"))
        dci = (res.get("difference_ci95") or {}).get(k)
        diff = (res.get("difference_pp2") or {}).get(k)
        dtxt = "(best)" if k == res["better"] else ("-" if diff is None else f"{diff:.2f}" +
                                                    (f" [{dci[0]:.2f}, {dci[1]:.2f}]" if dci else ""))
        out.append(f"| {CLOCK_NAMES.get(k, k)} | {var} | {_fmt(v.get('unexplained'), '.2f')} | {dtxt} |")
    pw = res.get("pairwise") or {}
    if pw:
        out += ["", "| clock A - clock B | residual variance difference pp^2 [95 % CI] |", "|---|---|"]
        for pair, v in pw.items():
            a, b = pair.split(" - ")
            ci = v.get("ci95")
            out.append(f"| {CLOCK_NAMES.get(a, a)} - {CLOCK_NAMES.get(b, b)} | {v['difference_pp2']:.2f}"
                       + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "") + " |")
    return out + [""]


def prediction_table(g: str, fit_on: str, res: Mapping[str, Any]) -> list[str]:
    out = [f"**Out-of-sample test, {g}**: each clock's curve fitted on the {res['n_fit']} trained cells of {fit_on}, "
           f"predicting the {res['n_test']} trained cells here (rule {res['rule']}); best: "
           f"{CLOCK_NAMES.get(res['better'], res['better'])}", "",
           "| clock | mean squared prediction error pp^2 [95 % CI] |", "|---|---|"]
    out += [f"| {CLOCK_NAMES.get(k, k)} | {_var_ci(v['mse_pp2'], v.get('ci95'))} |" for k, v in res["mse"].items()]
    out += ["", "| clock A - clock B | MSE difference pp^2 [95 % CI] |", "|---|---|"]
    for pair, v in res["pairwise"].items():
        a, b = pair.split(" - ")
        ci = v.get("ci95")
        out.append(f"| {CLOCK_NAMES.get(a, a)} - {CLOCK_NAMES.get(b, b)} | {v['difference_pp2']:.2f}"
                   + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "") + " |")
    return out + [""]


def pairs_table(d: Mapping[str, Any]) -> list[str]:
    out = ["| contrast | A | B | rule | spread B - A pp [95 % CI], p | slope B - A [95 % CI], p | n |",
           "|---|---|---|---|---|---|---|"]
    for label, pr in d["pairs"].items():
        for rule, v in pr.items():
            if rule in ("a", "b"):
                continue
            sd, sl = v["spread_diff"], v["slope_diff"]
            out.append(f"| {label} | {pr['a'][0]}@{pr['a'][1]} | {pr['b'][0]}@{pr['b'][1]} | {rule} "
                       f"| {_ci(sd)}, p {_p(sd['p'])} | {_ci(sl)}, p {_p(sl['p'])} | {sd['n']} |")
    return out + [""]


def series_table(d: Mapping[str, Any]) -> list[str]:
    out = ["| series | batch sizes | rule | spread per doubling of b, pp [95 % CI] | p | n |", "|---|---|---|---|---|---|"]
    for label, sr in d["series"].items():
        for rule in ("final", "best_val", "best_val_interpolated", "matched"):
            if rule in sr:
                out.append(f"| {label} | {', '.join(map(str, sr['batch_sizes']))} | {rule} | {_ci(sr[rule], '.2f')} "
                           f"| {_p(sr[rule]['p'])} | {sr[rule]['n']} |")
    return out + [""]


def tuned_table(d: Mapping[str, Any]) -> list[str]:
    out = ["| family | tuned lr (best mean val acc) | val acc per point | best_val spread at it [95 % CI] (null, p) "
           "| slope [95 % CI] | min train acc at best |", "|---|---|---|---|---|---|"]
    for fam, t in d["tuned"].items():
        cell = d["points"][t["point"]]["cells"][-1]
        st = cell.get("best_val")
        vals = ", ".join(f"{n.split('_lr')[-1]}: {_fmt(None if v is None else 100 * v, '.1f')}"
                         for n, v in t["val_acc"].items())
        tb = cell.get("train_acc_at_best_min")
        out.append(f"| {fam} | {t['lr']:g} | {vals} | {cell_text(st)} | {_ci(st['slope']) if st else '-'} "
                   f"| {_fmt(None if tb is None else 100 * tb, '.1f')} |")
    return out + [""]


def markdown(d: Mapping[str, Any]) -> str:
    """The design run's table.md: points by horizon, the clock tests, the settled paper's rule, pairs, series and
    tuned rates."""
    lines = [f"# Design: {d['splits']} data splits x {d['seeds']} seeds = {d['splits'] * d['seeds']} replicates",
             "", f"Intervals: 95 % t over split means (split a random effect; design_stats). Clock-test rule: "
             f"{d['rule']}, trained cells: every member's train accuracy at that predictor >= {d['trained']}.", ""]
    for g, res in d["clock_test"].items():
        lines += collapse_table(f"Clock test, {g}", res)
    for g, res in d.get("clock_test_exploratory", {}).items():
        lines += collapse_table(f"Clock test with candidates suggested by this run (exploratory), {g}", res)
    for g, res in d["settled"].items():
        lines += collapse_table(f"Paper's rule at settled selections, {g}", res)
    pred = d.get("prediction") or {}
    for g, res in pred.items():
        if g != "fit_on":
            lines += prediction_table(g, pred["fit_on"], res)
    if d["pairs"]:
        lines += ["## Pairs", ""] + pairs_table(d)
    if d["series"]:
        lines += ["## Batch-size series", ""] + series_table(d)
    if d["tuned"]:
        lines += ["## Tuned rates", ""] + tuned_table(d)
    lines += ["## Points by horizon", ""] + points_table(d)
    return "\n".join(lines) + "\n"


def terminal(d: Mapping[str, Any]) -> str:
    """The narrow summary printed at the end of a design run (every line <= 100 characters)."""
    out = [f"design: {d['splits']} splits x {d['seeds']} seeds; rule {d['rule']}; trained >= {d['trained']}"]
    for title, block in (("clock test", d["clock_test"]), ("settled best_val", d["settled"])):
        for g, res in block.items():
            out.append(f"{title} [{g}], {res['n_points']} cells: best {CLOCK_NAMES.get(res['better'])}"
                       f"{'' if res['decisive'] else ' (not decisive)'}")
            for k, v in res["clocks"].items():
                diff = (res.get("difference_ci95") or {}).get(k)
                out.append(f"  {CLOCK_NAMES.get(k, k):<22} V {_fmt(v['residual_var_pp2'], '.2f'):>7} pp^2"
                           + (f"  +{res['difference_pp2'][k]:.2f} [{diff[0]:.2f}, {diff[1]:.2f}]" if diff else ""))
            first = next(iter(res["clocks"]))
            for pair, v in (res.get("pairwise") or {}).items():
                if pair.startswith(f"{first} - ") and v.get("ci95"):
                    b = pair.split(" - ")[1]
                    out.append(f"  {CLOCK_NAMES.get(first)} - {CLOCK_NAMES.get(b, b)}: {v['difference_pp2']:+.2f} "
                               f"[{v['ci95'][0]:.2f}, {v['ci95'][1]:.2f}] pp^2")
    for label, pr in d["pairs"].items():
        v = pr.get(d["rule"]) or pr.get("best_val")
        if v:
            out.append(f"pair {label[:28]:<28} {_ci(v['spread_diff'])} pp, p {_p(v['spread_diff']['p'])}")
    for label, sr in d["series"].items():
        v = sr.get("best_val") or sr.get(d["rule"])
        if v:
            out.append(f"series {label[:26]:<26} {_ci(v, '.2f')} pp per doubling of b (best_val)")
    for fam, t in d["tuned"].items():
        st = d["points"][t["point"]]["cells"][-1].get("best_val")
        out.append(f"tuned {fam:<6} lr {t['lr']:<8g} best_val spread {cell_text(st)}"[:100])
    return "\n".join(line[:100] for line in out)


def figures(out: Path, d: Mapping[str, Any]) -> list[Path]:
    """figures/design_<group>.png per clock test: spread of the design's rule against every candidate clock."""
    from matplotlib.figure import Figure
    from matplotlib.ticker import NullFormatter
    import numpy as np
    from jaxinit.forgetting.figures import _save
    from jaxinit.forgetting.horizon import collapse_fit
    paths = []
    for g, res in d["clock_test"].items():
        res = (d.get("clock_test_exploratory") or {}).get(g, res)      # the stated clocks and any exploratory one
        clocks = list(res["clocks"])
        ncol = min(4, len(clocks))
        nrow = -(-len(clocks) // ncol)
        fig = Figure(figsize=(3.6 * ncol, 3.3 * nrow))
        grid = fig.subplots(nrow, ncol, sharey=True, squeeze=False)
        axes = list(grid.ravel())
        for ax in axes[len(clocks):]:
            ax.set_visible(False)
        for ax, k in zip(axes, clocks):
            xs_fit, ys_fit = [], []
            for i, name in enumerate(res["points"]):
                for c in d["points"][name]["cells"]:
                    st, x = c.get(d["rule"]), c["clocks"].get(k)
                    if not st or st["spread"]["mean"] is None or not x or x <= 0:
                        continue
                    y, ci = st["spread"]["mean"], st["spread"]["ci95"]
                    yerr = None if not ci else [[y - ci[0]], [ci[1] - y]]
                    ax.errorbar([x], [y], yerr=yerr, marker="o", ms=4, capsize=1.5, lw=0.8, color=f"C{i % 10}",
                                mfc=f"C{i % 10}" if c["trained"] else "none", label=name if c is d["points"][name][
                                    "cells"][-1] else None)
                    if c["trained"]:
                        xs_fit.append(x)
                        ys_fit.append(y)
            fit = collapse_fit(np.asarray(xs_fit, float), np.asarray(ys_fit, float), 2) if xs_fit else None
            if fit is not None:
                line = np.geomspace(min(xs_fit), max(xs_fit), 100)
                ax.plot(line, np.polyval(fit[0], np.log(line)), color="k", lw=1.2, ls="--")
            v = res["clocks"][k]["residual_var_pp2"]
            ax.set_title(f"{CLOCK_NAMES.get(k, k)}: V = {'-' if v is None else format(v, '.2f')} pp$^2$", fontsize=8)
            ax.set_xscale("log")
            ax.xaxis.set_minor_formatter(NullFormatter())
            ax.set_xlabel(CLOCK_NAMES.get(k, k) + " at the horizon", fontsize=8)
            ax.grid(alpha=0.3)
        for row in grid:
            row[0].set_ylabel(f"spread over $\\sigma_w$ ({d['rule']}), pp")
        axes[0].legend(fontsize=6, loc="best")
        fig.suptitle(f"{g}: filled = trained cells (quadratic fit in log clock, dashed), hollow = not trained; "
                     f"bars: 95 % interval over {d['splits']} splits", fontsize=9)
        fig.tight_layout()
        paths.append(_save(fig, Path(out) / "figures" / f"design_{g}.png"))
    return paths
