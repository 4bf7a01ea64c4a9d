"""Does the initial guessing bias survive training? The forgetting and IGB studies joined (issue 22).

Plain deep MLPs (tanh, ReLU) initialised at the phase points of the theory (ordered-deep, EOC, prejudice /
chaotic-deep, neutrality) and along a line through them at fixed sigma_b2, each point at its own learning rate
(the fair protocol), trained with low-LR SGD, Adam and SGD + L2 on 10-class mnist1d, on the one engine. Both
instruments on every member: test accuracy, interpolation, kernel norms and clocks at the selected
(best-validation) step; f_max and class frequencies on test and off-distribution Gaussian inputs, the favoured
class and whether it survives (against its permutation null), the per-class accuracy spread, measured c and gamma
at the last hidden layer, before and after training; the theory at init per point. Library: `jaxinit.memory` (presets in
`jaxinit.memory.config`, method in `jaxinit.memory.study`, statistics in `jaxinit.memory.summary`). Writes
DIR/metrics.jsonl (one row per member and evaluation: test_*, val_*, train_*, off_* metrics), DIR/summary.json
(``members``: one record each; ``cases``: per point, the favoured-class identity test with its permutation null,
the line's spread and slope over ln sigma_w2 with their nulls, the decay over training), DIR/run.json,
DIR/results/<case>.npz (per-member arrays), DIR/tensorboard/ and DIR/figures/*.png (`jaxinit.memory.figures`;
``--replot DIR`` redraws them).

    python -m experiments.memory_phases --preset smoke --out /tmp/memory_phases   # tests, seconds
    python -m experiments.memory_phases --out runs/memory_phases_cpu              # cpu preset (default)
    python -m experiments.memory_phases --preset paper --out $OUT/memory_phases   # accelerator

Rates: `jaxinit.shared.selection` (the lowest mean validation loss over ``opt.select_seeds`` seeds at
``opt.select_horizon`` of the run; summary.json's ``selection`` per case and ``lr_short`` / ``lr_curve`` per point
give the choice at the short horizon beside it). The README's measured results were made under the earlier
selection (validation accuracy after 100 steps, one seed).
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
        ident = case["identity_best"]
        print(f"{name}: favoured class kept {ident['match']} (chance {ident['chance']}, p {ident['p']}, "
              f"n {ident['n']}); test-acc slope {case['line_test_acc']['memory_slope']} pp/e-fold "
              f"(p {case['line_test_acc']['slope_p']})", flush=True)
        for p in case["points"]:
            m = {k: _f(p[k]["mean"]) for k in ("off_fmax_init", "off_fmax_best", "test_acc_best")}
            print(f"  {p['role']:>13} sw2={p['sigma_w2']:.3f} lr={p['lr']:.0e}: off f_max {m['off_fmax_init']} -> "
                  f"{m['off_fmax_best']} (theory {_f(p['fmax_theory'])}), kept {p['favoured_stays']}/{p['n_seeds']}, "
                  f"test acc {m['test_acc_best']}", flush=True)
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
