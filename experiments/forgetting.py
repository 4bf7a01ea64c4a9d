"""Initialization memory: how much of the init scale sigma_w survives training, and on which clock.

Das et al. 2026, "Do Deep Networks Forget Initialization?" (arXiv 2605.29152); docs/theory.md section 6.
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

from jaxinit.run import cli, files, runinfo
from jaxinit.run.manifest import Manifest
from jaxinit.errors import ConfigError
from jaxinit.forgetting import PRESETS, ForgettingConfig, fit, tables, validate
from jaxinit.forgetting.loop import check_setup


def main(cfg: ForgettingConfig, out: Path, resume: bool) -> None:
    res = fit(cfg, out, resume=resume)
    if res.summary is None:   # several hosts: process 0 writes the results
        return
    runinfo.write_run_info(out, res.timing)
    Manifest(out).write_text(out / "table.md", tables.markdown_table(res.summary))
    print(tables.narrow_table(res.summary))
    print(f"(every column: {files.safe_path(out / 'table.md')})")
    draw_figures(out)


def draw_figures(out: Path) -> list[Path]:
    """The figures from the files just written, recorded as the run's own. A file damaged meanwhile
    (metrics.jsonl cut mid-line by another process) is one line: summary.json already holds the results."""
    from jaxinit.forgetting import plotting    # matplotlib only where figures are drawn (not for --help)
    files.check_inside(out, out / "figures")     # a figures/ linked out of the run is never written through
    try:
        return runinfo.record_written(out, plotting.make_all(out))
    except (ValueError, OSError) as err:
        raise ConfigError(f"figures not drawn: {str(err).splitlines()[0][:160] if str(err) else type(err).__name__}; "
                          f"summary.json is written; redraw with python -m jaxinit.forgetting.plotting "
                          f"{files.safe_path(out)}") from None


EXPERIMENT = cli.Experiment(name="forgetting", doc=__doc__, presets=PRESETS, default="cpu", main=main, validate=validate, prepare=check_setup, multihost=True)


def run(argv: list[str] | None = None) -> int:
    return cli.run(EXPERIMENT, argv)


if __name__ == "__main__":
    raise SystemExit(run())
