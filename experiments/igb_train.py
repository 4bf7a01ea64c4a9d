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
    python -m experiments.igb_train --preset xi --out runs/igb_train_xi # L / xi_c sweep
    python -m experiments.igb_train --preset smoke --out /tmp/igb_train # tests
    python -m experiments.igb_train --preset paper --out $OUT/igb_train_paper   # accelerator
    python -m experiments.igb_train --replot runs/igb_train_cpu          # figures from saved results

The README's measured verdicts were made under the earlier selection (validation accuracy after 40-60 steps,
one seed), not the one above.
"""
from __future__ import annotations

from pathlib import Path

from jaxinit.run import cli
from jaxinit.igb.config_train import PRESETS, IGBTrainConfig, validate
from jaxinit.igb.plots_train import plot_train_results as plot_all
from jaxinit.igb.study_train import check_setup as prepare, train_phases
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
            print(f"  {row['phase']:>13} sw2={row['sigma_w2']:.3f} lr={row['lr']:.0e}: fmax0 {row['fmax0_mean']:.2f}, "
                  f"absorbed at {row['steps_absorbed']}, target at {row['steps_to_target']}, trains "
                  f"{row['trains']}/{row['n_seeds']}, final test acc {row['final_test_acc_mean']:.3f}", flush=True)
    for path in plot_all(out):
        print(f"figure {path}")


EXPERIMENT = cli.Experiment(name="igb_train", doc=__doc__, presets=PRESETS, default="cpu", main=main, validate=validate, prepare=prepare, replot=plot_all)


def run(argv: list[str] | None = None) -> int:
    return cli.run(EXPERIMENT, argv)


if __name__ == "__main__":
    raise SystemExit(run())
