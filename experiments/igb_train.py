"""Bias meets trainability in training: which phase trains best under plain SGD, and how fast is its bias absorbed?

Bassi et al. 2026 (arXiv 2505.12096); THEORY.md section 5. Deep MLPs (tanh, ReLU) in the mean-field
convention, trained from one point per phase (placed by the theory's solvers) on binarised digits, with
a learning rate chosen once per (optimizer, activation, depth) by a sweep at the EOC and held fixed for
every phase. Library: `jaxinit.igb.train_phases` (method: its docstring); presets and the sweep's grid in
`jaxinit.igb.config_train`. Trains on the engine (`jaxinit.train`): DIR/metrics.jsonl is appended per
evaluation (one row per member: case, role, sigma_w2, sigma_b2, seed, lr, test_fmax, test_class_acc,
test_class_freq, test_class_loss, ...), DIR/checkpoints/ every ``train.checkpoint_every`` steps (a killed run
resumes to the same bytes), DIR/tensorboard/; at the end DIR/results/<act>__d<depth>__<optimizer>.npz,
DIR/summary.json, DIR/run.json and DIR/figures/*.png.

    python -m experiments.igb_train --out runs/igb_train_cpu            # cpu preset
    python -m experiments.igb_train --preset smoke --out /tmp/igb_train # tests
    python -m experiments.igb_train --preset paper --out $OUT/igb_train_paper   # accelerator
    python -m experiments.igb_train --replot runs/igb_train_cpu          # figures from saved results

Measured with the trainer before the engine (cpu preset, `jaxinit.igb.config_train.CPU`: width 128, depths
30/60/100, 3 seeds per phase, 400 steps, SGD and Adam): 24 min 04 s wall, 1,378 s CPU on the shared 2-core CPU (load 4-7). Under plain SGD at depth
100 the EOC is the only phase that trains (test accuracy, mean [95 % CI] over 3 seeds: tanh 0.949 [0.90,
1.00], ReLU 0.867 [0.81, 0.92]; ordered-deep 0.54 / 0.49 with f_max still 1.0 at step 400; tanh prejudice
0.709, neutrality 0.566); README, "Bias meets trainability", has the full tables and the comparison with Adam.
"""
from __future__ import annotations

from pathlib import Path

from jaxinit import cli
from jaxinit.igb import sink
from jaxinit.igb.config_train import PRESETS, IGBTrainConfig, validate
from jaxinit.igb.plots_train import plot_train_results as plot_all
from jaxinit.igb.study_train import check_setup as prepare, train_phases


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


EXPERIMENT = cli.Experiment(prog="experiments.igb_train", doc=__doc__, presets=PRESETS, default="cpu", main=main,
                            default_out="runs/igb_train_cpu", validate=validate, prepare=prepare, replot=plot_all)


def run(argv: list[str] | None = None) -> int:
    return cli.run(EXPERIMENT, argv)


if __name__ == "__main__":
    raise SystemExit(run())
