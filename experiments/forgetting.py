"""Initialization memory: how much of the init scale sigma_w survives training, and on which clock.

Das et al. 2026, "Do Deep Networks Forget Initialization?" (arXiv 2605.29152); THEORY.md section 6.
Every member (optimizer setting x sigma_w x seed) trains the same network; the headline number per
setting is the spread (max - min over sigma_w, percentage points) of test accuracy at the epoch of
lowest validation loss, next to the spread at the lowest validation loss among interpolating epochs,
at the final epoch, and the forgetting clocks T_SGD, T_L2, T_adapt at the selected epoch.

    python -m experiments.forgetting                      # cpu preset (the README's main job)
    python -m experiments.forgetting --preset cpu_full    # every optimizer setting, 5 seeds
    python -m experiments.forgetting --preset smoke --out /tmp/f
    python -m experiments.forgetting --preset paper --data.dir=~/tensorflow_datasets   # accelerator
    python -m jaxinit.forgetting.plotting runs/forgetting_cpu   # redraw the figures without retraining

The presets, the choices where the paper is silent and the library behind this main are in
`jaxinit.forgetting` (`preset(name)`, `fit(config, workdir)`). Measured numbers: README
("Initialization memory").
"""
from __future__ import annotations

from pathlib import Path

from jaxinit import cli, files
from jaxinit.forgetting import PRESETS, ForgettingConfig, fit, validate


def main(cfg: ForgettingConfig, out: Path, resume: bool) -> None:
    from jaxinit.forgetting import memory, plotting
    res = fit(cfg, out, resume=resume)
    if res.summary is None:   # several hosts: process 0 writes the results
        return
    files.write_json(out / "run.json", res.timing)
    plotting.make_all(out)
    print(memory.markdown_table(res.summary))


def run(argv: list[str] | None = None) -> int:
    return cli.run_experiment("experiments.forgetting", __doc__, ForgettingConfig, PRESETS, "cpu", main,
                              "runs/forgetting", validate=validate, argv=argv, multihost=True)


if __name__ == "__main__":
    raise SystemExit(run())
