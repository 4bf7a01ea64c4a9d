"""Forgetting on its own clock: each optimizer family swept along the clock the paper assigns it.

Das et al. 2026 (arXiv 2605.29152), docs/theory.md section 6: T_SGD = (1/b) sum eta_k^2 (sgd: lr and batch
size; momentum: with its effective step eta / (1 - mu)), T_L2 = lambda sum eta_k (sgd_l2: lambda),
T_adapt = sum eta_k (adam, adamw, muon: lr, and for adam also the number of epochs). Every point is a
run of the forgetting study (3 seeds x 6 sigma_w by default) in DIR/points/<name>; an interrupted
sweep continues with --resume (or by running the same command again).

    python -m experiments.clocks                           # cpu preset (README: "Forgetting on its own clock")
    python -m experiments.clocks --preset smoke --out /tmp/c
    python -m experiments.clocks --preset clock_test       # T_SGD against sum eta (README: "The clock test")
    python -m experiments.clocks --preset adaptive_test    # Adam and Muon on T_adapt against T_update
    python -m experiments.clocks --preset paper --data.dir=DIR     # accelerator

Writes DIR/clocks.jsonl (one line per point: setting, clock, clock_value at the selected epoch,
clock_value_end, spread_pp, spread_ci95, spread_pp_interpolated, n_seeds, lr, weight_decay,
batch_size, epochs, and the kernel-norm growth against its random-walk prediction), DIR/summary.json
(the lines and the verdicts per family: where the spread falls below half of low-LR SGD's and below
5 pp, and how far apart the families' curves are where their clocks overlap) and DIR/figures/
(spread_vs_own_clock.png, norm_growth.png, norms_<family>.png, collapse_<group>.png). The clock test
(`verdicts.collapse_test`, horizons.jsonl): every point summarised at the horizons of
`jaxinit.forgetting.clock_test`, and per group of families which candidate clock collapses the points'
spread curves (residual variance about one curve in log clock, with a seed-bootstrap interval).
Library: `jaxinit.forgetting.clocks`, `clock_run`, `clock_test`.
"""
from __future__ import annotations

from pathlib import Path

from jaxinit.run import cli
from jaxinit.forgetting import clock_run
from jaxinit.forgetting.clock_presets import PRESETS
from jaxinit.forgetting.clocks import ClocksConfig, point_config, points, validate
from jaxinit.forgetting.loop import check_setup


def main(cfg: ClocksConfig, out: Path, resume: bool) -> None:
    result = clock_run.run(cfg, out)
    lines, verdicts = result.summary["lines"], result.summary["verdicts"]
    for ln in lines:
        sp = "-" if ln["spread_selected"] is None else f"{ln['spread_selected']:.1f}"
        cv = "-" if ln["clock_value"] is None else f"{ln['clock_value']:.3g}"
        print(f"{ln['point']:>26}  {ln['clock']:>7} = {cv:>8}  spread {sp} pp")
    for fam, v in verdicts["families"].items():
        print(f"{fam}: below half of low-LR SGD at {v['below_half_reference_at']}, below 5 pp at {v['below_5pp_at']}")
    if "design" in result.summary:
        from jaxinit.forgetting import design_report
        print(design_report.terminal(result.summary["design"]))
        return
    for group, c in verdicts["collapse_test"].items():
        parts = [f"{k} V = {x['residual_var_pp2']:.3g} pp^2 {x['ci95']}" for k, x in c["clocks"].items()
                 if x["residual_var_pp2"] is not None]
        print(f"clock test ({group}, {len(c['points'])} runs): {'; '.join(parts)}; better: {c['better']}"
              f"{'' if c['decisive'] else ' (not decisive)'}")


def prepare(cfg: ClocksConfig) -> None:
    """What every point's set-up would refuse (data sizes), checked before --overwrite deletes anything."""
    for p in points(cfg):
        check_setup(point_config(cfg, p))


EXPERIMENT = cli.Experiment(name="clocks", doc=__doc__, presets=PRESETS, default="cpu", main=main, validate=validate, prepare=prepare)


def run(argv: list[str] | None = None) -> int:
    return cli.run(EXPERIMENT, argv)


if __name__ == "__main__":
    raise SystemExit(run())
