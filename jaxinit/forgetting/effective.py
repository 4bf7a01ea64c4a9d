"""Effective clocks of the BatchNorm-invariant kernels, from the kernel norms a member's rows record.

A kernel W followed by BatchNorm does not change the function when it is rescaled: L(c W) = L(W). Its
gradient is then orthogonal to W and scales as 1 / |W|, so a step of size eta turns the direction
u = W / |W| by eta |grad_u L| / |W|^2: the step on the sphere is eta / |W|^2, not eta. A member whose
kernels start at sigma_w times a base draw B (|W_0| = sigma_w |B|, the same B for every sigma_w of a
seed) takes, relative to that draw, the dimensionless effective step

    rho_k = eta_k |B|^2 / |W_k|^2 = eta_k (|W_0| / sigma_w)^2 / |W_k|^2      (eta_k / sigma_w^2 at init),

and the clocks of docs/theory.md section 6 on that step are

    T_SGD_eff = (1/b) sum_k rho_k^2,      T_adapt_eff = sum_k rho_k,

per invariant kernel; a member's clock is their mean over its invariant kernels. |W_k| is known at the
evaluated epochs only: over the steps between two evaluations rho_k uses the mean of 1 / |W|^2 (and of
1 / |W|^4 for T_SGD_eff) at the two ends (the trapezoid rule). Which kernels are invariant: every kernel
outside the classifier (`head`) when the network has BatchNorm after its hidden layers; without
BatchNorm there are none and the clocks are None.

`run_clocks` aggregates members into one value per run (the quantities a collapse test compares across
runs): the median over members, and the clock of the slowest member, the median over seeds of the
smallest member clock of a seed (usually its largest sigma_w: the spread over sigma_w can close only
once that member has moved). Pure numpy on metrics rows.
"""
from __future__ import annotations

import math
from typing import Any, Mapping, Sequence

import numpy as np

from jaxinit.shared.history import as_float, by_epoch

EFFECTIVE_CLOCKS = ("T_SGD_eff", "T_adapt_eff")
HEAD = "head"


def invariant_kernels(layers: Mapping[str, Any], batchnorm: bool = True) -> list[str]:
    """The `param_norm_layers` keys of the kernels BatchNorm makes scale-invariant: every key ending in the
    component `kernel` outside the classifier (first path component `head`); none without BatchNorm."""
    if not batchnorm:
        return []
    return sorted(k for k in layers if str(k).rsplit("/", 1)[-1] == "kernel" and str(k).split("/", 1)[0] != HEAD)


def member_clocks(rows: Sequence[Mapping[str, Any]], etas: Any, sigma_w: float, batch_size: int,
                  batchnorm: bool = True) -> dict[str, float | None]:
    """`T_SGD_eff`, `T_adapt_eff` of one member over the steps its rows cover (module docstring).

    `rows`: the member's rows up to the horizon (epoch 0, its init, first); `etas`: eta_k of every step
    taken (at least the last row's `step` of them). None when the rows carry no norms of invariant
    kernels, a norm is not positive and finite, or `etas` is missing or too short.
    """
    ordered = by_epoch(rows)
    if etas is None or len(ordered) < 1 or not sigma_w > 0:
        return dict.fromkeys(EFFECTIVE_CLOCKS)
    layers0 = ordered[0].get("param_norm_layers") or {}
    keys = invariant_kernels(layers0, batchnorm)
    eta = np.asarray(etas, np.float64).reshape(-1)
    steps = [int(as_float(r.get("step"))) if math.isfinite(as_float(r.get("step"))) else -1 for r in ordered]
    if not keys or steps[0] != 0 or min(steps) < 0 or steps[-1] > eta.size or np.any(np.diff(steps) < 0):
        return dict.fromkeys(EFFECTIVE_CLOCKS)
    norms = np.array([[as_float((r.get("param_norm_layers") or {}).get(k)) for k in keys] for r in ordered])
    if not np.all(np.isfinite(norms) & (norms > 0)):
        return dict.fromkeys(EFFECTIVE_CLOCKS)
    base2 = (norms[0] / sigma_w) ** 2                      # |B|^2 per kernel
    inv2, inv4 = base2 / norms ** 2, (base2 / norms ** 2) ** 2
    t_sgd, t_adapt = np.zeros(len(keys)), np.zeros(len(keys))
    for j in range(1, len(ordered)):
        seg = eta[steps[j - 1]:steps[j]]
        t_adapt += seg.sum() * 0.5 * (inv2[j - 1] + inv2[j])
        t_sgd += np.square(seg).sum() * 0.5 * (inv4[j - 1] + inv4[j])
    return {"T_SGD_eff": float(np.mean(t_sgd)) / batch_size, "T_adapt_eff": float(np.mean(t_adapt))}


def run_clocks(members: Sequence[Mapping[str, Any]]) -> dict[str, float | None]:
    """One value per run from member entries {"seed", "sigma_w", "T_SGD_eff", "T_adapt_eff"}: for each
    clock c, `c` = the median over members and `c_slowest` = the median over seeds of the smallest clock of
    a seed's members. None where no member has the clock."""
    out: dict[str, float | None] = {}
    for c in EFFECTIVE_CLOCKS:
        vals = [(int(m["seed"]), as_float(m.get(c))) for m in members]
        vals = [(s, v) for s, v in vals if math.isfinite(v)]
        out[c] = float(np.median([v for _, v in vals])) if vals else None
        by_seed: dict[int, list[float]] = {}
        for s, v in vals:
            by_seed.setdefault(s, []).append(v)
        out[f"{c}_slowest"] = float(np.median([min(v) for v in by_seed.values()])) if by_seed else None
    return out
