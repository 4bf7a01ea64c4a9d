"""What a saved ``results/<name>.npz`` of the IGB study must hold before it is reused (``--resume``) or drawn
(``--replot``): the arrays its readers index, with consistent shapes. A file that reads but holds other
keys or shapes (another version's, a hand-made one) is one `ConfigError` naming the file, not a KeyError
or IndexError deep in a summary or a figure.
"""
from __future__ import annotations

import contextlib
from typing import Mapping

import numpy as np

from jaxinit.errors import ConfigError

WIDTH_CASE = "width"          # jaxinit.igb.study_init.WIDTH_CASE (not imported: that module pulls in jax)
ADVICE = "delete that file so that --resume recomputes it, or rerun with --overwrite"

# name: (axes of each array, by letter: G grid points, D draws, L layers, W widths, P phase points,
# M members, E evaluations); only the leading axes named are checked.
INIT = {"sigma_w2": "G", "sigma_b2": "G", "n_inputs": "", "fmax_2": "DG", "c": "DGL", "gamma": "DGL",
        "gamma_corr": "DGL", "c_readout": "DG"}
WIDTH = {"phase": "P", "widths": "W", "sigma_w2": "P", "c": "WDPL", "gamma": "WDPL", "gamma_corr": "WDPL",
         "c_theory": "PL", "gamma_theory": "PL"}
TRAIN = {"act": "", "depth": "", "optimizer": "", "width": "", "role": "M", "point": "M", "sigma_w2": "M",
         "sigma_b2": "M", "seed": "M", "lr": "M", "step": "E", "alive": "EM", "test_acc": "EM", "test_fmax": "EM",
         "test_class_acc": "EM", "point_role": "P", "point_sigma_w2": "P", "point_lr": "P", "target_acc": "",
         "majority_share": ""}


def case_results(case, table: dict, metrics: dict, chosen: dict, baseline: dict,
                 target: float) -> dict[str, np.ndarray]:
    """One case's arrays (the `TRAIN` schema and more; ``case``: a `jaxinit.shared.phases.Case`): the members'
    table, their metric arrays (`jaxinit.shared.case_train.case_arrays`, with ``init_signal``), the points
    (``point_*``) with their selection, the linear baseline and the target (``target`` x the logistic baseline's test
    accuracy), and over a grid the theory diagram. Rows of step 0 without ``init_signal`` (a run written before the
    evaluation of step 0 measured it, re-summarised by ``--resume``) are one `ConfigError`."""
    if "init_signal" not in metrics:
        raise ConfigError(f"{case.act}__d{case.depth}__{case.optimizer}: the rows of step 0 in metrics.jsonl hold no "
                          f"init_signal (a run written by an older version); rerun with --overwrite")
    linear = baseline["logistic"]["test_acc"]
    return {**table, **metrics, **chosen, **{f"point_{k}": v for k, v in case.points.items()},
            "act": np.array(case.act), "depth": np.array(case.depth), "optimizer": np.array(case.optimizer),
            "width": np.array(case.width), "target_acc": np.array(target * linear), "linear_test_acc": np.array(linear),
            "ridge_test_acc": np.array(baseline["ridge"]["test_acc"]),
            "majority_share": np.array(baseline["majority_share"]), **case.diagram}


def check_case(name: str, arrays: Mapping[str, np.ndarray], schema: Mapping[str, str]) -> None:
    """``arrays`` (from ``results/<name>.npz``) has every key of ``schema`` with axes that agree."""
    sizes: dict[str, int] = {}
    for key, axes in schema.items():
        if key not in arrays:
            raise ConfigError(f"results/{name}.npz has no array {key!r} (not a result of this version); {ADVICE}")
        shape = np.shape(arrays[key])
        if len(shape) < len(axes) or (not axes and len(shape) != 0):
            raise ConfigError(f"results/{name}.npz: {key!r} has shape {shape}, expected "
                              f"{'a scalar' if not axes else f'{len(axes)} or more axes'}; {ADVICE}")
        for axis, size in zip(axes, shape):
            if sizes.setdefault(axis, size) != size:
                raise ConfigError(f"results/{name}.npz: {key!r} has shape {shape}, inconsistent with the other "
                                  f"arrays (axis {axis} of size {sizes[axis]}); {ADVICE}")


def check_init(cases: Mapping[str, Mapping[str, np.ndarray]]) -> None:
    """Cases of `jaxinit.igb.study_init` (``<input>__<case>`` and the width sweep)."""
    for name, arrays in cases.items():
        if name != WIDTH_CASE and "__" not in name:
            raise ConfigError(f"results/{name}.npz is not a case of igb_init (names are <input>__<case>); {ADVICE}")
        check_case(name, arrays, WIDTH if name == WIDTH_CASE else INIT)


def check_train(results: Mapping[str, Mapping[str, np.ndarray]]) -> None:
    """Runs of `jaxinit.igb.study_train` (``<act>__d<depth>__<optimizer>``)."""
    for name, arrays in results.items():
        check_case(name, arrays, TRAIN)


@contextlib.contextmanager
def reading(what: str):
    """Whatever the schema does not cover still ends as one line naming the files read."""
    try:
        yield
    except (KeyError, IndexError, ValueError, TypeError) as e:
        if isinstance(e, ConfigError):
            raise
        detail = f"no array {e.args[0]!r}" if isinstance(e, KeyError) and e.args else str(e).splitlines()[0]
        raise ConfigError(f"{what}: saved results do not fit this version ({type(e).__name__}: {detail}); "
                          f"rerun with --overwrite") from None
