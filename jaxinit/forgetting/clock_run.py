"""Running the clock sweep: every point of `clocks.points` trained by `fit` into DIR/points/<name>, its
line (`clock_lines.line`) with the norm-growth mechanism, its horizon summaries (`clock_test`), then the
sweep's clocks.jsonl, horizons.jsonl, summary.json and figures.

An interrupted sweep continues where it stopped: a finished point is read back, an unfinished one
resumes from its last checkpoint (`fit(..., resume=True)`).
"""
from __future__ import annotations

import math
from pathlib import Path

from jaxinit.errors import ConfigError
from jaxinit.forgetting import clock_test
from jaxinit.jsonsafe import to_json
from jaxinit.forgetting.clock_lines import _median, line, verdicts
from jaxinit.forgetting.clocks import ClocksConfig, Point, point_config, point_dir, points


def kernel_weights(res) -> int:
    """Number of kernel weights of one member (conv and dense kernels, head included)."""
    import jax
    from jaxinit.init import is_kernel
    params = next(iter(res.states.values())).params
    return int(sum(x[0].size for p, x in jax.tree_util.tree_flatten_with_path(params)[0] if is_kernel(p)))


def with_mechanism(ln: dict, summary: dict, n_kernel: int) -> dict:
    """Norm growth of the kernels against a random walk of per-coordinate steps of size eta.

    Adam's update is eta times a direction of O(1) per coordinate; if successive steps were
    independent, ||W_T||^2 = ||W_0||^2 + P sum_k eta_k^2 (P kernel weights), i.e. growth sqrt(P sum
    eta^2) = sqrt(P b T_SGD). If they were aligned, the growth would be sqrt(P) sum eta = sqrt(P) T_adapt.
    """
    growth = []
    for m in summary["members"]:
        a, b = m.get("kernel_norm_init"), m.get("kernel_norm_final")
        if a is not None and b is not None:
            growth.append(math.sqrt(max(b * b - a * a, 0.0)))
    t_sgd = (summary["spread"][ln["setting"]].get("clocks") or {}).get("T_SGD")
    t_adapt = (summary["spread"][ln["setting"]].get("clocks") or {}).get("T_adapt")
    return {**ln, "n_kernel_weights": n_kernel, "kernel_growth_median": _median(growth),
            "growth_random_walk": math.sqrt(n_kernel * ln["batch_size"] * t_sgd) if t_sgd is not None else None,
            "growth_aligned": math.sqrt(n_kernel) * t_adapt if t_adapt is not None else None}


def run_point(cfg: ClocksConfig, p: Point, out=None, progress: bool = True, split: int = 0) -> tuple[dict, list[dict]]:
    """Train one point on data split `split` (in memory, or into ``out/points/<point_dir>``, continuing it if
    it is there); return its line and its horizon entries (`clock_test.point_entries`, also written to the
    point's horizons.json). The point is recorded in ``out``'s manifest as a sub-run (kind ``run``) before
    it is created."""
    from jaxinit.run import rundir, runinfo
    from jaxinit.run.manifest import Manifest
    from jaxinit.config import to_dict
    from jaxinit.forgetting.loop import fit
    pcfg = point_config(cfg, p, split)
    if out is None:
        res = fit(pcfg, progress=progress)
        return (with_mechanism(line(p, res.summary, cfg.analysis.selection), res.summary, kernel_weights(res)),
                horizon_entries(pcfg, res, cfg.design.horizons))
    d = Path(out) / "points" / point_dir(p, split)
    if d.exists() and (d / "config.json").exists() and rundir.read_saved_config(d) != to_json(to_dict(pcfg)):
        raise ConfigError(f"{d} holds a point of another config; rerun with --overwrite")
    Manifest(out).record(d, "run")
    resume = (d / "metrics.jsonl").exists() or (d / "checkpoints").exists()
    Manifest(d).write_json(d / "config.json", to_dict(pcfg), digest=False)
    res = fit(pcfg, d, resume=resume, progress=progress)
    runinfo.write_run_info(d, res.timing)
    entries = horizon_entries(pcfg, res, cfg.design.horizons)
    Manifest(d).write_json(d / "horizons.json", entries)
    return with_mechanism(line(p, res.summary, cfg.analysis.selection), res.summary, kernel_weights(res)), entries


def horizon_entries(pcfg, res, extra=()) -> list[dict]:
    """The point's spreads at every horizon of `clock_test.horizons` (and the `extra` epochs), with the clocks
    reached by then (its own step sizes, batch size, L2 and momentum, as `loop.summarize` takes them) and
    the effective clocks of its BatchNorm-invariant kernels."""
    from jaxinit.forgetting.loop import clock_args
    etas, l2, mu = clock_args(res.sweep, res.rows)
    return to_json(clock_test.point_entries(res.rows, etas, pcfg.train.batch_size, l2, mu, pcfg.train.epochs,
                                            pcfg.train.eval_every, pcfg.model.batchnorm, extra))


def run(cfg: ClocksConfig, out=None, progress: bool = True):
    """Every point (in order), in memory or, given ``out``, into it with clocks.jsonl, horizons.jsonl,
    summary.json (lines, verdicts and the clock test `collapse_test`) and the figures. Returns the
    experiments' `jaxinit.train.engine.Result`: ``summary`` {"lines", "verdicts" (with "collapse_test")},
    ``rows`` the lines, ``arrays`` the horizon entries per point, ``timing`` the seconds."""
    import time
    from jaxinit import interrupt
    from jaxinit.run import files, runinfo
    from jaxinit.run.manifest import Manifest
    from jaxinit.forgetting import clock_plots
    from jaxinit.result import Result
    t0 = time.perf_counter()
    pts, splits = points(cfg), range(cfg.design.splits)
    lines, entries, by_split = [], {}, {}
    for i, p in enumerate(pts):
        split_lines = []
        for k in splits:
            interrupt.check()
            print(f"[{i + 1}/{len(pts)}] {point_dir(p, k)}", flush=True)
            ln, by_split.setdefault(p.name, {})[k] = run_point(cfg, p, out, progress, k)
            split_lines.append(ln)
        lines.append(merge_lines(split_lines))
        entries[p.name] = by_split[p.name][0]
    families = {p.name: p.family for p in pts}
    groups = clock_test.curves(entries, families, cfg.analysis.selection)
    v = {**verdicts(lines), "collapse_test": clock_test.collapse_tests(groups)}
    summary = {"lines": lines, "verdicts": v}
    if cfg.design.splits > 1 or cfg.design.pairs or cfg.design.batch_series or cfg.design.tune:
        from jaxinit.forgetting import design
        summary["design"] = design.analyse(cfg, pts, by_split)
    result = Result(summary, lines, {"total_s": time.perf_counter() - t0}, arrays=entries)
    if out is None:
        return result
    out = Path(out)
    run_files = Manifest(out)
    run_files.write_jsonl(out / "clocks.jsonl", lines)
    run_files.write_jsonl(out / "horizons.jsonl", clock_test.table_rows(entries, cfg.analysis.selection))
    files.check_inside(out, out / "figures")     # a figures/ linked out of the run is never written through
    figs = clock_plots.make_all(out, lines, v)
    for group, c in groups.items():
        figs.append(clock_plots.plot_collapse(c["runs"], c["names"], v["collapse_test"][group],
                                              out / "figures" / f"collapse_{group}.png"))
    if "design" in summary:
        from jaxinit.forgetting import design_report
        run_files.write_text(out / "table.md", design_report.markdown(summary["design"]))
        figs += design_report.figures(out, summary["design"])
    runinfo.record_written(out, figs)
    run_files.write_json(out / "summary.json", result.summary)
    return result


def merge_lines(split_lines: list[dict]) -> dict:
    """A point's line over its splits: split 0's, with the per-seed spreads of every split (seeds of split k
    numbered k * 1000 + seed), their mean and ``ci_selected`` the t interval over the split means (the split a
    random effect, as in `design_stats`); the design's own intervals are `design`'s."""
    from jaxinit.intervals import t_interval
    if len(split_lines) == 1:
        return split_lines[0]
    per_split = [ln.get("spread_per_seed_selected") or [] for ln in split_lines]
    per_seed = [v for vs in per_split for v in vs]
    split_means = [sum(vs) / len(vs) for vs in per_split if vs]
    return {**split_lines[0], "spread_per_seed_selected": per_seed, "n_seeds": len(per_seed),
            "spread_selected": sum(per_seed) / len(per_seed) if per_seed else None, "splits": len(split_lines),
            "ci_selected": t_interval(split_means) if len(split_means) == len(split_lines) else None}


def load_design(out) -> tuple[ClocksConfig, list[Point], dict]:
    """(config, points, {point: {split: horizon entries}}) of a finished design run directory."""
    import json
    from jaxinit.config import from_dict
    out = Path(out)
    cfg = from_dict(ClocksConfig, json.loads((out / "config.json").read_text()))
    by_split = {p.name: {k: json.loads((out / "points" / point_dir(p, k) / "horizons.json").read_text())
                         for k in range(cfg.design.splits)} for p in points(cfg)}
    return cfg, points(cfg), by_split


def reanalyse(out, fit_on=None, rule=None) -> list[Path]:
    """A finished design's verdicts again from its points' horizons.json (no training): summary.json["design"],
    table.md and figures/design_<group>.png rewritten with the current analysis; with `fit_on` (another finished
    design) also "prediction": `design_predict.prediction` of every candidate clock of each group, fitted on
    `fit_on`'s trained cells, scored on these. With `rule` (a predictor other than the design's own) the verdicts
    under it are printed as markdown and kept in summary.json["design_by_rule"][rule]; nothing else changes.
    Returns the files written."""
    import json
    from dataclasses import replace
    from jaxinit.run import runinfo
    from jaxinit.run.manifest import Manifest
    from jaxinit.forgetting import design, design_predict, design_report
    out = Path(out)
    cfg, pts, by_split = load_design(out)
    summary = json.loads((out / "summary.json").read_text())
    if rule is not None and rule != cfg.design.rule:
        other = design.analyse(replace(cfg, design=replace(cfg.design, rule=rule)), pts, by_split)
        summary.setdefault("design_by_rule", {})[rule] = other
        print(design_report.markdown(other))
        Manifest(out).write_json(out / "summary.json", summary)
        return [out / "summary.json"]
    summary["design"] = design.analyse(cfg, pts, by_split)
    if fit_on is not None:
        fcfg, fpts, fby = load_design(fit_on)
        fit_cells, test_cells = design.cells_of(fpts, fby), design.cells_of(pts, by_split)
        d = cfg.design
        summary["design"]["prediction"] = {"fit_on": Path(fit_on).name, **{
            g: design_predict.prediction(fit_cells, test_cells, design.CANDIDATES[g] + design.EXPLORATORY.get(g, ()),
                                         d.rule, d.trained)
            for g in {design.GROUP_OF.get(p.family, p.family) for p in pts} if g in design.CANDIDATES}}
    run_files = Manifest(out)
    run_files.write_text(out / "table.md", design_report.markdown(summary["design"]))
    figs = design_report.figures(out, summary["design"])
    runinfo.record_written(out, figs)
    run_files.write_json(out / "summary.json", summary)
    return [out / "summary.json", out / "table.md", *figs]
