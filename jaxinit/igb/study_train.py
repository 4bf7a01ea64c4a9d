"""`train_phases(cfg, workdir=None) -> Result`: deep MLPs trained from every phase of the theory, on the engine,
under the fair protocol (each point at its own learning rate).

For every activation, depth and optimizer (a *case*, `jaxinit.igb.phases.study_cases`): (1) the case's points
(`jaxinit.igb.phases.case_points`: one per phase, the optional ``<f>xEOC`` sweep, and for the first optimizer at
``grid.depths`` a (sigma_w2, sigma_b2) grid), labelled by the theory; (2) selection (`jaxinit.igb.selection`): every point x every rate of
``cfg.opt.<optimizer>_lr`` x ``opt.lr_sweep_seeds`` selection seeds (1000, ...) for ``opt.lr_sweep_steps``
steps, each point's rate the best mean validation accuracy at the last step (a diverged seed disqualifies a
rate; ties to the smaller rate); (3) reported runs: each point's seeds 0, 1, ... at its own rate. Both stages
are one engine sweep (`jaxinit.train.engine`), a case one group of traced members (one compile per case
whatever its rates), every case on the same batches. The selection runs in memory (short and deterministic: a
resumed run repeats it exactly); the reported stage, given a ``workdir``, writes metrics.jsonl per evaluation
and step-level checkpoints, so a run killed anywhere resumes to the same bytes. The target accuracy is
``train.target`` x the linear baseline's test accuracy on the same split (`jaxinit.igb.baseline`). The
result's ``arrays`` hold one dict of arrays per case (``"<act>__d<depth>__<optimizer>"``), the schema of
`jaxinit.igb.results` that the summary and the figures read.
"""
from __future__ import annotations

from pathlib import Path

from jaxinit.errors import ConfigError
from jaxinit.igb import nets, phases, reported, selection
from jaxinit.igb.config_train import IGBTrainConfig
from jaxinit.train import engine
from jaxinit.result import Result
from jaxinit.run.sink import writer_for


def load_data(cfg: IGBTrainConfig) -> tuple[dict, int, tuple]:
    """(flattened splits with a fixed training-evaluation subset, n_classes, input shape) of any config with
    ``data`` and ``train.eval_train_n``. A validation split is required: the learning rates and the linear
    baseline's regularisation are chosen on it."""
    from jaxinit.data import load_dataset
    ds = load_dataset(cfg.data)
    if not ds.x_val.shape[0]:
        raise ConfigError(f"this study needs a validation split (rates are chosen on it); --data.name="
                          f"{cfg.data.name} gave none: raise --data.n_val or the data size")
    flat = lambda x: x.reshape(x.shape[0], -1)
    data = {"x_train": flat(ds.x_train), "y_train": ds.y_train, "x_val": flat(ds.x_val), "y_val": ds.y_val,
            "x_test": flat(ds.x_test), "y_test": ds.y_test}
    n_eval = cfg.train.eval_train_n or ds.x_train.shape[0]
    data.update(x_train_eval=data["x_train"][:n_eval], y_train_eval=data["y_train"][:n_eval])
    return data, ds.n_classes, (data["x_train"].shape[1],)


def check_setup(cfg: IGBTrainConfig) -> None:
    """Every error `load_data` would find (data sizes, files) before anything is trained: what ``--overwrite``
    checks before it deletes a finished run."""
    load_data(cfg)


def train_phases(cfg: IGBTrainConfig, workdir: str | Path | None = None, *, resume: bool = False,
                 progress: bool = True) -> Result:
    """Every case of ``cfg`` (see the module docstring); files only with a ``workdir``."""
    data, n_classes, shape = load_data(cfg)
    cases = phases.study_cases(cfg)
    nets_ = nets.case_nets(cases, n_classes, shape)
    chosen = selection.choose_rates(cfg, data, nets_, cases, progress)
    spec = reported.reported_study(cfg, data, nets_, cases, chosen, checkpoints=workdir is not None)
    return engine.fit(spec, writer_for(workdir, resume=resume), stage="reported", progress=progress)
