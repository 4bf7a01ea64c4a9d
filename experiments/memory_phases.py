"""Does the initial guessing bias survive training? The forgetting and IGB studies joined (issues 22, 33).

Plain deep MLPs (tanh) initialised at phase points of the theory (ordered-deep, EOC, prejudice, neutrality) and
along a line through them at fixed sigma_b2, labelled with L / xi_c (`theory.meanfield.depth_scales`); every
point of a line trains at ONE rate per optimizer (the fair protocol for the line as a whole: the rate with the
lowest validation loss averaged over the line's points and selection seeds at half the run), so a line runs on
one clock; low-LR SGD, Adam and SGD + L2 on 10-class mnist1d, on the one engine. Both instruments on every
member: test accuracy, kernel norms and clocks at the selected (best-validation) step; f_max and class
frequencies on test and off-distribution Gaussian inputs, c and gamma at the last hidden layer, before and after
training; the theory at init per point; the plateau check. Statistics: the continuous identity statistic (the
correlation of each seed's init and trained off-distribution class frequencies after the across-seed mean is
subtracted, `jaxinit.memory.identity`) with its permutation null, interval and power, per point and pooled; the
line's spread and slope with their nulls; the hypotheses H1-H3 decided by the rules of
`jaxinit.memory.hypotheses` (docs/memory_phases.md).

Library: `jaxinit.memory` (presets `jaxinit.memory.config`, method `jaxinit.memory.study`, the line's rate, plateau
and clocks `jaxinit.memory.line`, statistics `jaxinit.memory.summary`, `identity`, `hypotheses`). Writes
DIR/metrics.jsonl (one row per member and evaluation: test_*, val_*, train_*, off_* metrics), DIR/summary.json
(``members``: one record each, with the clocks of its own steps; ``cases``: per case the line's rate and
clocks, per point and pooled the identity statistic with its null, the line's memory statistics, the trajectory;
``hypotheses``: the verdicts), DIR/run.json, DIR/results/<case>.npz, DIR/tensorboard/ and DIR/figures/*.png
(`jaxinit.memory.figures`; ``--replot DIR`` redraws them).

    python -m experiments.memory_phases --preset smoke --out /tmp/memory_phases   # tests, seconds
    python -m experiments.memory_phases --out runs/memory_phases_cpu              # cpu preset (default)
    python -m experiments.memory_phases --preset paper --out $OUT/memory_phases   # accelerator
"""
from __future__ import annotations

from pathlib import Path

from jaxinit.run import cli
from jaxinit.memory.figures import plot_all
from jaxinit.memory.config import PRESETS, MemoryPhasesConfig, validate
from jaxinit.memory.study import check_setup, fit
from jaxinit.shared import sink


def main(cfg: MemoryPhasesConfig, out: Path, resume: bool) -> None:
    """Train every case (selection in memory, reported runs into ``out``) and print one line per point."""
    result = fit(cfg, out, resume=resume)
    if result.summary is None:
        return
    save = sink.saver(out)
    for name, arrays in result.arrays.items():      # per-member arrays per case (notebooks; --replot needs them)
        save(name, arrays)
    for name, case in result.summary["cases"].items():
        ident, clk = case["identity_best"], case["clocks"]["at_best_median"]
        print(f"{name}: lr {case['line']['lr']:.0e}, clocks at the median selected step T_SGD {clk['T_SGD']:.3g} "
              f"T_L2 {clk['T_L2']:.3g} T_adapt {clk['T_adapt']:.3g}; plateau {case['plateau']['reached']}/"
              f"{case['plateau']['n']}; identity r {_f(ident['r'])} {ident['ci95']} (p {ident['p']}, n {ident['n']})",
              flush=True)
        for p in case["points"]:
            m = {k: _f(p[k]["mean"]) for k in ("off_fmax_init", "off_fmax_best", "test_acc_best")}
            print(f"  {p['role']:>13} sw2={p['sigma_w2']:.3f} L/xi_c={_f(p.get('depth_over_xi_c'))}: off f_max "
                  f"{m['off_fmax_init']} -> {m['off_fmax_best']} (theory {_f(p['fmax_theory'])}), identity r "
                  f"{_f(p['identity_best']['r'])} (p {p['identity_best']['p']}), test acc {m['test_acc_best']}",
                  flush=True)
    for net, h in result.summary["hypotheses"].items():
        print(f"{net}: H1 {h['H1']['verdict']}, H2 {h['H2']['verdict']}, H3 {h['H3']['verdict']}", flush=True)
    print(f"summary {out / 'summary.json'}")
    for path in plot_all(out):
        print(f"figure {path}")


def _f(v) -> str:
    return "-" if v is None else f"{v:.3f}"


EXPERIMENT = cli.Experiment(name="memory_phases", doc=__doc__, presets=PRESETS, default="cpu",
                            main=main, validate=validate, prepare=check_setup,
                            replot=plot_all, replot_reads=("summary.json",))


def run(argv: list[str] | None = None) -> int:
    return cli.run(EXPERIMENT, argv)


if __name__ == "__main__":
    raise SystemExit(run())
