"""Bias meets trainability in training: which phase trains, at its own best learning rate, and how fast is its bias absorbed?

Bassi et al. 2026 (arXiv 2505.12096); docs/theory.md section 5. Deep MLPs (tanh, ReLU, pooled ReLU) in the
mean-field convention, trained from points placed by the theory's solvers (one per phase, or a sigma_w2 sweep
around the EOC) on binarised digits (or MNIST), under the fair protocol: every point selects its own learning rate
from the same grid (`jaxinit.shared.selection`: the lowest mean validation loss over ``opt.select_seeds`` seeds,
disjoint from the reported ones, at ``opt.select_horizon`` of the reported run, half at the least), and the
reported seeds train each point at its own rate. Library: `jaxinit.igb.train_phases` (method: its docstring);
presets in `jaxinit.igb.config_train`. Trains on the engine (`jaxinit.train`): DIR/metrics.jsonl is appended per
evaluation (one row per member: case, role, point, sigma_w2, sigma_b2, seed, lr, test_fmax, test_class_acc,
test_class_freq, test_class_loss, ...), DIR/checkpoints/ every ``train.checkpoint_every`` steps (a killed run
resumes to the same bytes), DIR/tensorboard/; at the end DIR/results/<act>__d<depth>__<optimizer>.npz,
DIR/summary.json (per case: its selection and horizons; per point: its rate beside the short horizon's and its
selection curve, sustained absorption, steps to target, trains k/n with an exact interval, Fisher p against the
EOC, L / xi_c), DIR/run.json and DIR/figures/*.png (lr_selection, depth_over_xi, verdict, curves, ...).

    python -m experiments.igb_train --out runs/igb_train_cpu            # cpu preset
    python -m experiments.igb_train --preset crossed --out runs/crossed # L / xi_c crossed with depth
    python -m experiments.igb_train --preset smoke --out /tmp/igb_train # tests
    python -m experiments.igb_train --preset paper --out $OUT/igb_train_paper   # accelerator
    python -m experiments.igb_train --replot runs/igb_train_cpu          # figures from saved results

Measured verdicts, each with its design, n, intervals and wall time: docs/igb.md (section Verdicts).
"""
from __future__ import annotations

from pathlib import Path

from jaxinit.run import cli
from jaxinit.igb.config_train import PRESETS, IGBTrainConfig, validate
from jaxinit.igb.plots_train import plot_train_results as plot_all
from jaxinit.igb.study_train import check_setup as prepare, train_phases
from jaxinit.igb.summary_train import steps_text
from jaxinit.shared import sink


def main(cfg: IGBTrainConfig, out: Path, resume: bool) -> None:
    """Train every case on the engine (metrics.jsonl per evaluation, checkpoints, summary.json, run.json), then
    results/<case>.npz and the figures."""
    result = train_phases(cfg, out, resume=resume)
    if result.summary is None:
        return
    save = sink.saver(out)
    for name, arrays in result.arrays.items():
        save(name, arrays)
    for name, run in result.summary["runs"].items():
        print(f"{name}: target {run['target_acc']:.3f} (x{run['target_of_linear']:g} the linear baseline's "
              f"{run['linear_test_acc']:.3f})", flush=True)
        for row in run["phases"]:
            print("  " + point_line(row), flush=True)
    for line in crossed_lines(result.summary.get("crossed", {})):
        print(line, flush=True)
    for path in plot_all(out):
        print(f"figure {path}")


def point_line(row: dict) -> str:
    """One point of summary.json as a line: its name and theory phase, rates, outcome and absorption."""
    short = row.get("at_short") or {}
    at_h = (f", at h's rate {short['lr']:.0e}: trains {short['trains']}/{short['n_seeds']}"
            if short.get("trained") and not short.get("same_rate") else "")
    prej = row.get("prejudice", {}).get("absorbed")
    absorbed = f"; recall-gap absorbed {steps_text(prej['steps'])}" if prej else ""
    return (f"{row['phase']} [{row['theory_phase']}] sigma_w2={row['sigma_w2']:.3f} L/xi_c={row['depth_over_xi_c']:.1f} "
            f"lr={row['lr']:.0e}: f_max at init {row['fmax0_mean']:.2f}, trains {row['trains']}/{row['n_seeds']}, "
            f"final test acc {row['final_test_acc_mean']:.3f}, target reached {steps_text(row['steps_to_target'])}, "
            f"sustained absorption {steps_text(row['steps_absorbed'])}{absorbed}{at_h}")


def crossed_lines(crossed: dict) -> list[str]:
    """The crossed design's models as lines (summary.json's ``crossed``)."""
    lines = []
    for name, a in crossed.items():
        for h in ("H", "h"):
            m = a[f"at_{h}"]["models"]
            r50, lrt, ci = m["M_r"]["r50"], m["M_rd"]["lrt_depth"], m["M_rd"]["depth_coef_ci95"]
            fmt = lambda v: "open" if v is None else f"{v:.2f}"
            lines.append(f"{name} at {h}: {m['trains']}/{m['n']} train; depth coefficient per doubling "
                         f"{m['M_rd']['coef'][2]:+.2f} [{fmt(ci[0])}, {fmt(ci[1])}], LRT p = {lrt['p']:.3g}; "
                         f"r50 = {r50['value']:.2f} [{fmt(r50['ci95'][0])}, {fmt(r50['ci95'][1])}]")
    return lines


EXPERIMENT = cli.Experiment(name="igb_train", doc=__doc__, presets=PRESETS, default="cpu", main=main, validate=validate, prepare=prepare, replot=plot_all)


def run(argv: list[str] | None = None) -> int:
    return cli.run(EXPERIMENT, argv)


if __name__ == "__main__":
    raise SystemExit(run())
