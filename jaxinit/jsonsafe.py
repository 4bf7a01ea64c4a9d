"""Values for JSON files: Python numbers, lists and str keys only, and None where JSON has no number.

The one sanitiser every summary.json / metrics.jsonl / clocks.jsonl writer passes its results through
(`jaxinit.run.files.write_json` refuses NaN and infinity rather than write tokens other readers reject).
Pure Python / numpy.
"""
from __future__ import annotations

import math
from typing import Any, Mapping

import numpy as np


def finite_or_none(x: Any) -> float | None:
    """``x`` as a finite float; None for None, bools, non-numbers, NaN and infinities."""
    if x is None or isinstance(x, bool):
        return None
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if math.isfinite(v) else None


def to_json(obj: Any) -> Any:
    """Recursively: numpy scalars and arrays -> Python, NaN / inf -> None, tuples -> lists, keys -> str.

    bool and ``np.bool_`` stay bools (tested before int: ``True`` is an int), integers become ``int``,
    floats (``np.float32`` widened exactly to the double it holds) go through `finite_or_none`; a
    0-d array becomes its scalar; anything else (str, None) is returned as it is.
    """
    if isinstance(obj, Mapping):
        return {str(k): to_json(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_json(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return to_json(obj.tolist())
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return finite_or_none(obj)
    return obj
