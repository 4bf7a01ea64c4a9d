"""What the IGB figures share: a phase's colour, the named (non-grid) points of a case, a log step axis."""
from __future__ import annotations

import numpy as np
from matplotlib import colormaps
from matplotlib.ticker import NullFormatter

from jaxinit.shared.phases import PHASES

PHASE_COLORS = {name: f"C{i}" for i, name in enumerate(PHASES)}


def phase_color(role: str, k: int = 0) -> str:
    """A phase's own colour; sweep points (``<f>xEOC``) take a colour map by their order."""
    return PHASE_COLORS.get(role, colormaps["viridis"](min(k, 9) / 9.0))


def named_points(r) -> list[tuple[int, str]]:
    """(point index, role) of the case's non-grid points."""
    return [(p, role) for p, role in enumerate(r["point_role"].tolist()) if role != "grid"]


def step_ticks(ax, last: int) -> None:
    """A log step axis with step 0 drawn at 0.5: major ticks 0, 1, 10, 100, ... labelled as plain numbers, no
    minor labels (labels that cannot overlap)."""
    ticks = [0.5] + [10.0 ** k for k in range(0, int(np.log10(max(last, 1))) + 1)]
    ax.set_xscale("log")
    ax.set_xticks(ticks, ["0"] + [f"{int(t)}" for t in ticks[1:]])
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlim(0.4, last * 1.3)
