"""The crossed design for L / xi_c: points at equal L / xi_c at several depths, on both sides of the EOC.

At depth L and target r = L / xi_c the point's sigma_w2 solves xi_c(sigma_w2, sigma_b2) = L / r
(`theory.meanfield.depth_scales`, Schoenholz et al. 2017) on each side of the EOC, where xi_c is monotone:
increasing in sigma_w2 below the EOC (ordered) and decreasing above it (chaotic), infinite at the EOC itself.
`solve_sigma_w2` bisects in log sigma_w2 between the EOC and ``lo`` (ordered) or ``hi`` (chaotic); a target
that the side cannot reach inside that bracket (on the chaotic side xi_c falls slowly towards its large-sigma_w2
limit) gives NaN and the point is left out (`crossed_rows`). The points are named ``"r<r> ordered"`` and
``"r<r> chaotic"``; with the EOC (r = 0) at each depth. On the chaotic side of a bounded activation the phase
changes along a line of equal r (prejudice at large depth, neutrality beyond the neutrality line at small depth):
`theory.phase` labels every point, so the design also asks whether neutrality adds anything once r is known.
"""
from __future__ import annotations

import math

import numpy as np

SIDES = ("ordered", "chaotic")


def role(r: float, side: str) -> str:
    return f"r{r:g} {side}"


def parse(role_: str) -> tuple[float, str] | None:
    """(r, side) of a crossed point's role, (0, 'EOC') for the EOC, None otherwise."""
    if role_ == "EOC":
        return 0.0, "EOC"
    parts = str(role_).split(" ")
    if len(parts) == 2 and parts[0].startswith("r") and parts[1] in SIDES:
        try:
            return float(parts[0][1:]), parts[1]
        except ValueError:
            return None
    return None


def parse_sweep(role_: str) -> tuple[float, str] | None:
    """(f, side) of a sigma_w2 = f x EOC sweep point's role ('0.7xEOC': the ordered side, '1.3xEOC': the chaotic
    side), (0, 'EOC') for the EOC, None otherwise: the `xi` preset's points, read by the crossed analysis
    (`jaxinit.igb.summary_crossed.table`) although they are not placed at equal L / xi_c."""
    if role_ == "EOC":
        return 0.0, "EOC"
    head, sep, tail = str(role_).partition("xEOC")
    if not sep or tail:
        return None
    try:
        f = float(head)
    except ValueError:
        return None
    return (0.0, "EOC") if f == 1 else (f, "ordered" if f < 1 else "chaotic")


def solve_sigma_w2(act: str, sigma_b2: float, xi_target, side: str, lo: float = 0.3, hi: float = 20.0,
                   iters: int = 60) -> np.ndarray:
    """sigma_w2 with xi_c = ``xi_target`` (array) on ``side`` of the EOC at ``sigma_b2``; NaN where the bracket
    [lo, EOC) or (EOC, hi] does not reach it."""
    from theory import meanfield as mf
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    target = np.atleast_1d(np.asarray(xi_target, float))
    eoc = float(mf.eoc(sigma_b2, act))
    a, b = (math.log(lo), math.log(eoc)) if side == "ordered" else (math.log(eoc), math.log(hi))
    xi = lambda lsw: np.asarray(mf.depth_scales(np.exp(lsw), np.full_like(lsw, sigma_b2), act)[1], float)
    # xi_c grows towards the EOC on both sides: the far end of the bracket is where it is smallest
    far = a if side == "ordered" else b
    reachable = xi(np.full_like(target, far)) <= target
    left, right = np.full_like(target, a), np.full_like(target, b)
    for _ in range(iters):
        mid = 0.5 * (left + right)
        big = xi(mid) > target          # too close to the EOC
        if side == "ordered":
            right, left = np.where(big, mid, right), np.where(big, left, mid)
        else:
            left, right = np.where(big, mid, left), np.where(big, right, mid)
    return np.where(reachable, np.exp(0.5 * (left + right)), np.nan)


def crossed_rows(act: str, depth: int, sigma_b2: float, targets, seeds: int,
                 max_sigma_w2: float = 20.0) -> list[tuple[str, float, float, int]]:
    """(role, sigma_w2, sigma_b2, seeds): the EOC, then per target r the ordered and the chaotic point at
    L / xi_c = r (`solve_sigma_w2`), those the bracket reaches."""
    from theory import meanfield as mf
    rows = [("EOC", float(mf.eoc(sigma_b2, act)), sigma_b2, seeds)]
    targets = np.asarray(targets, float)
    for side in SIDES:
        sw = solve_sigma_w2(act, sigma_b2, depth / targets, side, hi=max_sigma_w2)
        rows += [(role(r, side), float(w), sigma_b2, seeds) for r, w in zip(targets, sw) if np.isfinite(w)]
    return rows
