"""Markdown tables of docs/igb.md from a finished igb_train run (summary.json's dicts and results/*.npz): the
verdict per point at both selection horizons, the rate grid per point, the prejudice measure, the crossed design.

    python -c "from jaxinit.igb import tables; print(tables.run_tables('runs/X'))"
"""
from __future__ import annotations

from jaxinit.igb.summary_train import steps_text


def _ci(ci, spec: str = ".2f") -> str:
    if ci is None:
        return "[-]"
    return "[" + ", ".join("open" if v is None else format(v, spec) for v in ci) + "]"


def _p(p) -> str:
    return "" if p is None else f"{p:.2g}"


def verdict_table(run: dict) -> str:
    """Per point: its theory phase, L / xi_c, rates at H and h, trains k / n [CP] with Fisher p vs the EOC and
    final test accuracy [t] at both horizons, f_max at init, steps to target."""
    lines = ["| point (sigma_w2) | theory phase | L / xi_c | lr at H | trains at H [95 % CP], p vs EOC | final test acc "
             "at H [95 % t] | lr at h | trains at h, p vs EOC | final test acc at h | test f_max at init | target "
             "reached (median step) |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in run["phases"]:
        s = row.get("at_short") or {}
        if s.get("trained"):
            same = " (same runs)" if s.get("same_rate") else ""
            at_h = (f"{s['lr']:.0e}{same} | {s['trains']}/{s['n_seeds']} {_ci(s['trains_ci95'])}, "
                    f"{_p(s.get('fisher_p_vs_eoc'))} | {s['final_test_acc_mean']:.3f} {_ci(s['final_test_acc_ci95'], '.3f')}")
        else:
            at_h = f"{s.get('lr', float('nan')):.0e} (not trained) | - | -"
        lines.append(
            f"| {row['phase']} ({row['sigma_w2']:.2f}) | {row['theory_phase']} | {row['depth_over_xi_c']:.1f} | "
            f"{row['lr']:.0e} | {row['trains']}/{row['n_seeds']} {_ci(row['trains_ci95'])}, {_p(row['fisher_p_vs_eoc'])} | "
            f"{row['final_test_acc_mean']:.3f} {_ci(row['final_test_acc_ci95'], '.3f')} | {at_h} | "
            f"{row['fmax0_mean']:.2f} | {steps_text(row['steps_to_target'])} |")
    return "\n".join(lines)


def rate_table(r: dict) -> str:
    """Per point and rate: the selection seeds' test accuracy at the selection horizon H (mean, seeds) and at h;
    'div' where a seed diverged."""
    lrs, (H, h) = r["select_lr"], (int(v) for v in r["select_horizons"])
    lines = ["| point | " + " | ".join(f"{lr:.0e}" for lr in lrs) + " |", "|---|" + "---|" * len(lrs)]
    for p, role in enumerate(r["point_role"].tolist()):
        if role == "grid":
            continue
        cells = []
        for i in range(len(lrs)):
            def at(tag):
                alive = r[f"select_alive{tag}"][p, i]
                acc = r[f"select_test_acc{tag}"][p, i]
                seeds = "/".join("div" if not a else f"{v:.2f}" for a, v in zip(alive, acc))
                return seeds
            mark = "**" if float(lrs[i]) == float(r["point_lr"][p]) else ""
            cells.append(f"{mark}{at('')}{mark}" + (f" ({at('_short')})" if "select_test_acc_short" in r else ""))
        lines.append(f"| {role} | " + " | ".join(cells) + " |")
    return (f"test accuracy of each selection seed at step {H} (at step {h} in brackets); bold: the chosen rate\n\n"
            + "\n".join(lines))


def prejudice_table(run: dict) -> str:
    """Per point: recall gap at init, step 50 and over the last 100 steps; off-distribution f_max at init (theory)
    and at the end; absorbed on the recall gap k / n [CP] with p vs the EOC; point - twin differences."""
    lines = ["| point | recall gap at init / step 50 / last 100 steps | off-distribution f_max at init (IGB theory) / "
             "final | absorbed (recall gap, window) [95 % CP], p vs EOC | point - centred twin: recall gap steps 1-50 / "
             "last 100 [95 % t] | final off-distribution f_max | final test acc |", "|---|---|---|---|---|---|---|"]
    for row in run["phases"]:
        q = row.get("prejudice", {})
        m = lambda d: "-" if not d or d.get("mean") is None else f"{d['mean']:.3f}"
        mc = lambda d: "-" if not d or d.get("mean") is None else f"{d['mean']:+.3f} {_ci(d['ci95'], '+.3f')}"
        gap50 = next((v for k, v in q.items() if k.startswith("recall_gap_step")), None)
        theory = q.get("gauss_fmax_init_theory")
        a = q.get("absorbed")
        absorbed = "-" if not a else (f"{steps_text(a['steps'])} {_ci(a['ci95'])}, {_p(a.get('fisher_p_vs_eoc'))}; null "
                                      f"informative at {m(a.get('null_informative_share'))} of evaluations")
        tw = q.get("minus_twin", {})
        early = next((v for k, v in tw.items() if k.startswith("recall_gap_steps1to")), None)
        lines.append(f"| {row['phase']} | {m(q.get('recall_gap_init'))} / {m(gap50)} / {m(q.get('recall_gap_last100'))} | "
                     f"{m(q.get('gauss_fmax_init'))} ({'-' if theory is None else f'{theory:.3f}'}) / "
                     f"{m(q.get('gauss_fmax_final'))} | {absorbed} | {mc(early)} / {mc(tw.get('recall_gap_last100'))} | "
                     f"{mc(tw.get('gauss_fmax_final'))} | {mc(tw.get('final_test_acc'))} |")
    return "\n".join(lines)


def crossed_table(crossed: dict) -> str:
    """The crossed design per point (trains k / n, final accuracy) at H and h, and its models."""
    out = []
    for name, a in crossed.items():
        H, h = a["at_H"], a["at_h"]
        lines = ["| point | L / xi_c | depth | neutral | trains at H | final acc at H | trains at h |",
                 "|---|---|---|---|---|---|---|"]
        for p, q in zip(H["points"], h["points"]):
            lines.append(f"| {p['point']} | {p['r']:.1f} | {p['depth']} | {'yes' if p['neutral'] else ''} | "
                         f"{p['trains']}/{p['n']} | {p['final_test_acc_mean']:.3f} | {q['trains']}/{q['n']} |")
        out.append("\n".join(lines))
        for tag, x in (("H", H), ("h", h)):
            m = x["models"]
            rd = m["M_rd"]
            row = (f"{name} at {tag}: n = {m['n']}, {m['trains']} train; M_r: r coefficient {m['M_r']['coef'][1]:+.2f} "
                   f"{_ci(m['M_r']['r_ci95'], '+.2f')}, r50 = {m['M_r']['r50']['value']:.2f} "
                   f"{_ci(m['M_r']['r50']['ci95'])}; M_rd: depth coefficient per doubling {rd['coef'][2]:+.2f} "
                   f"{_ci(rd['depth_coef_ci95'], '+.2f')}, LRT p = {rd['lrt_depth']['p']:.3g} (permutation p = "
                   f"{rd['permutation_depth']['p']:.3g}, {rd['permutation_depth']['n_perm']} shuffles); r50 by depth "
                   + ", ".join(f"{d}: {v['value']:.2f} {_ci(v['ci95'])}" for d, v in rd["r50_by_depth"].items()))
            if "M_rds" in m:
                row += (f"; side (chaotic) {m['M_rds']['coef'][3]:+.2f} {_ci(m['M_rds']['side_coef_ci95'], '+.2f')}, "
                        f"p = {m['M_rds']['lrt_side']['p']:.3g} (permutation p = {m['M_rds']['permutation_side']['p']:.3g}), "
                        f"r50 by side at depth "
                        f"{2 ** m['log2_depth_centre']:.0f} " + ", ".join(
                            f"{k}: {v['value']:.2f} {_ci(v['ci95'])}" for k, v in m["M_rds"]["r50_by_side"].items()))
            if "M_rdn" in m:
                row += (f"; neutrality {m['M_rdn']['coef'][3]:+.2f} {_ci(m['M_rdn']['neutral_coef_ci95'], '+.2f')}, "
                        f"p = {m['M_rdn']['lrt_neutral']['p']:.3g}")
            row += "; power (depth coefficient planted at " + ", ".join(
                f"{k}: {v:.2f}" for k, v in m["power_depth"].items()) + ")"
            out.append(row)
    return "\n\n".join(out)


def run_tables(out) -> str:
    """Every table of a run directory (summary recomputed by `summary_train.summarize_saved`)."""
    from jaxinit.igb.summary_train import summarize_saved
    from jaxinit.run.runs import load_results
    summary, results = summarize_saved(out), load_results(out)
    parts = []
    for name, run in summary["runs"].items():
        parts += [f"### {name}", verdict_table(run)]
        if "select_test_acc" in results[name]:
            parts.append(rate_table(results[name]))
        parts.append(prejudice_table(run))
    if "crossed" in summary:
        parts.append(crossed_table(summary["crossed"]))
    return "\n\n".join(parts)
