"""Swept values as training sees them: float32, after the cast the engine applies. One check for every study.

Every study sweeps values that become per-member float32 numbers: `jaxinit.train.members.stack` casts each
member's ``scale`` to float32 (the IGB and joined studies' (sigma_w2, sigma_b2) points; the forgetting study's
sigma_w). In float32 a value below the smallest normal number trains as 0 (XLA flushes subnormals to zero), one
beyond its range as inf, and two values that round to one float32 number are one member trained twice, which a
study's statistics then count twice. The points a study trains come from several flags -- the phase points from
``--phases.sigma_b2`` and the factors that place them (``--phases.ordered_factor``, ...), the multiples of the EOC
(``--phases.line``, ``--phases.eoc_factors``), the forgetting study's ``--sweep.sigma_w`` -- so they are checked as
trained, each named by the flag that placed it:

    check_points([Point("phases.line", "1.00000001xEOC", (1.986, 0.1)), Point("phases.sigma_b2", "EOC", ...)])
    check_points(phase_points(rows, line_flag="phases.line"))     # rows of `jaxinit.shared.phases.phase_rows`

One `ConfigError` line, before anything is written or trained.
"""
from __future__ import annotations

from typing import Iterable, NamedTuple, Sequence

import numpy as np

from jaxinit.errors import ConfigError

FLOAT32_MAX = float(np.finfo(np.float32).max)
FLOAT32_TINY = float(np.finfo(np.float32).tiny)     # the smallest normal float32; below it XLA flushes to zero

# The flag that places each phase point of `jaxinit.shared.phases` (the others sit on the EOC line of --phases.sigma_b2).
_ROLE_FLAGS = {"ordered-deep": "phases.ordered_factor", "chaotic-deep": "phases.chaotic_factor",
               "neutrality": "phases.neutral_factor", "grid": "grid.sigma_w2"}


class Point(NamedTuple):
    flag: str                    # the flag that placed it, without "--" ("phases.line")
    label: str                   # what it is, for the message ("1xEOC (tanh, depth 3)")
    values: tuple[float, ...]    # the numbers trained, before the cast (sigma_w2, sigma_b2)


def as_trained(value: float) -> float:
    """``value`` as a member trains it: float32 (inf beyond its range, said by `check_points`, not by a warning)."""
    with np.errstate(over="ignore"):
        return float(np.float32(value))


def check_points(points: Sequence[Point], *, zero_ok: tuple[bool, ...] = (), distinct: bool = True) -> None:
    """Refuse (one `ConfigError` line naming the flag) a point with a value that overflows float32, a non-zero one
    that underflows it (or a zero where ``zero_ok`` does not allow one, per position: sigma_b2 may be 0, sigma_w2
    may not), and (``distinct``) a point that equals an earlier one once cast."""
    seen: dict[tuple, Point] = {}
    for p in points:
        cast = tuple(as_trained(v) for v in p.values)
        for i, (v, c) in enumerate(zip(p.values, cast)):
            shown = f"--{p.flag}: the point {p.label} ({v:.6g})"
            if not abs(c) <= FLOAT32_MAX:
                raise ConfigError(f"{shown} overflows float32 (training's dtype, max 3.4e38); use smaller values")
            if (c == 0 and not (v == 0 and i < len(zero_ok) and zero_ok[i])) or 0 < abs(c) < FLOAT32_TINY:
                raise ConfigError(f"{shown} underflows float32 (training's dtype, smallest normal 1.2e-38), so it "
                                  f"trains as 0; use larger values")
        if distinct and cast in seen:
            raise ConfigError(f"--{p.flag} has repeated values in float32 (training's dtype): the point {p.label} "
                              f"equals {seen[cast].label} there ({', '.join(f'{c:.8g}' for c in cast)}), so it would "
                              f"be trained and counted twice; give values that differ there")
        seen[cast] = p


def phase_points(rows: Iterable[tuple], where: str, line_flag: str) -> list[Point]:
    """Points of a study's ``rows`` -- (role, sigma_w2, sigma_b2, ...) as `jaxinit.shared.phases.phase_rows` gives
    them, then any grid's -- each named by the flag that placed it (``line_flag`` for the ``<f>xEOC`` points);
    ``where`` says which case they belong to ("tanh, depth 3")."""
    return [Point(line_flag if role.endswith("xEOC") else _ROLE_FLAGS.get(role, "phases.sigma_b2"),
                  f"{role} ({where})", (float(sw2), float(sb2))) for role, sw2, sb2, *_ in rows]




def check_cases(cases: dict, line_flag: str) -> None:
    """`check_points` of every case's points (`jaxinit.shared.phases.Case`: one per activation, depth and optimizer);
    sigma_b2 may be 0, sigma_w2 may not."""
    for c in cases.values():
        p = c.points
        rows = list(zip(p["role"].tolist(), p["sigma_w2"].tolist(), p["sigma_b2"].tolist()))
        points = phase_points(rows, f"{c.act}, depth {c.depth}", line_flag)
        check_points([q for q, r in zip(points, rows) if r[0] != "grid"], zero_ok=(False, True))
        # A grid (igb_train's) may pass through a phase point; its own values are distinct (`check_grid_float32`).
        check_points([q for q, r in zip(points, rows) if r[0] == "grid"], zero_ok=(False, True), distinct=False)
