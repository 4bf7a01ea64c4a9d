"""Does rescaling a trained network to the edge of chaos help it fine-tune? (issue 19, "the rescaling claim")

Bassi et al. 2026 (arXiv 2505.12096) remark that rescaling the weights of a trained network moves it to the
edge of chaos and helps fine-tuning. A deep tanh MLP is pretrained from the EOC init on digits 0-4 (5 classes),
then every hidden layer's kernel is rescaled by its own factor so that the MEASURED backward factor
|delta_1|^2 / |delta_L|^2 hits a target (0.1, 1, 10); those arms, the trained net as it is and a fresh EOC init
are fine-tuned on digits 5-9 with a fresh readout, each at its own rate chosen on selection seeds from one
grid. Library: `jaxinit.igb.rescale` (method: its docstring), `jaxinit.igb.summary_rescale` (statistics),
presets in `jaxinit.igb.config_rescale`. Trains on the engine (`jaxinit.train`): DIR/metrics.jsonl (one row per
evaluation and member of the reported run: arm, lr, seed, val/test acc, loss, f_max), DIR/checkpoints/,
DIR/summary.json, DIR/run.json, DIR/results/rescale.npz (per-arm curves, per-seed factors and measured backward
factors).

    python -m experiments.igb_rescale --out runs/igb_rescale_cpu              # cpu preset (MNIST)
    python -m experiments.igb_rescale --preset smoke --out /tmp/igb_rescale   # tests, seconds

Selection (`jaxinit.shared.selection`): each arm's rate is the grid's lowest mean validation loss over
``finetune.select_seeds`` seeds at ``finetune.select_horizon`` of the run, the choice at ``finetune.select_short``
reported beside it in summary.json (``selection``, each arm's ``lr_short`` and ``lr_curve``). The measured results in
docs/igb.md were made under the earlier rule (validation accuracy at the last step).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from jaxinit.run import cli
from jaxinit.igb import rescale
from jaxinit.igb import summary_rescale as summ
from jaxinit.igb.config_rescale import PRESETS, IGBRescaleConfig, validate
from jaxinit.shared import sink


def main(cfg: IGBRescaleConfig, out: Path, resume: bool) -> None:
    """Pretrain, rescale, select rates, fine-tune (metrics.jsonl, checkpoints, summary.json, run.json), then
    results/rescale.npz and the tables on stdout."""
    result = rescale.run(cfg, out, resume=resume)
    if result.summary is None:
        return
    arrays = {"arm_labels": np.array(list(result.arrays))}
    for i, c in enumerate(result.arrays.values()):
        arrays.update({f"arm{i}__{k}": np.asarray(v) for k, v in c.items()})
    sink.saver(out)("rescale", arrays)
    print(summ.table(result.summary))
    print(summ.comparison_table(result.summary), flush=True)


EXPERIMENT = cli.Experiment(name="igb_rescale", doc=__doc__, presets=PRESETS, default="cpu", main=main, validate=validate, prepare=rescale.check_setup)


def run(argv: list[str] | None = None) -> int:
    return cli.run(EXPERIMENT, argv)


if __name__ == "__main__":
    raise SystemExit(run())
