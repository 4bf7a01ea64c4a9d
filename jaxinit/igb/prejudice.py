"""A prejudice measure that does not depend on accuracy, its null, and absorption on it (pure numpy).

Two measures per evaluation and member (docs/igb.md, "Prejudice in training"):

- the **recall gap** g = max_c r_c - mean_c r_c, with r_c the recall (accuracy) on the test inputs labelled c
  (classes with no input left out). g = 0 for a net whose errors fall evenly on the classes, whatever its accuracy;
  a net answering one class has g = 1 - 1/C (1/2 for two classes); at balanced accuracy a = mean_c r_c,
  g <= min(1 - a, (C - 1) a), so only a net that errs can lean;
- the **off-distribution f_max**: f_max (`jaxinit.shared.igb_stats.f_max`) on fixed Gaussian inputs on the sphere
  |x|^2 / d = 1 (`gaussian_inputs`), which carry no label: the part of the initial guessing bias that no data
  correct directly.

**Null** (`null_threshold`): the same measure on nets trained from a neutral init, at matched balanced accuracy
b = mean_c r_c (`balanced_accuracy`, the accuracy the recall gap is measured against): for a measured value at b,
the ``q`` quantile of the null's values (every evaluation of every null member) whose b lies within ``halfwidth``;
NaN where fewer than ``min_n`` null values match. The neutral init is the study's *centred twin* of a point
(`jaxinit.igb.centred`): the same draw with the readout bias shifted so that the mean logit over reference training
inputs is 0 in every class. The null is **informative** at b only where its threshold lies below ``informative`` x
the largest gap possible there, g_max(b) = min(1 - b, (C - 1) b) (`max_gap`): a null whose own nets reach
near-maximally lopsided errors at that accuracy cannot tell a prejudiced net from a neutral one.

**Absorbed** (`window_absorption`): the first evaluation t such that the measure is at or below an informative null
threshold at every evaluation with step in [t, t + window], and the run reaches t + window (so absorption at the end
of a run rests on a full window, never on its last evaluation or two). NaN: never. An evaluation without a threshold
(too few matched null values) or with an uninformative one breaks a window: no evidence either way.
"""
from __future__ import annotations

import numpy as np

DEFAULT_WINDOW = 50
DEFAULT_HALFWIDTH = 0.05
DEFAULT_QUANTILE = 0.95
DEFAULT_MIN_N = 20
DEFAULT_INFORMATIVE = 0.9


def gaussian_inputs(n: int, dim: int, seed: int = 12345) -> np.ndarray:
    """(n, dim) float32 N(0, 1) inputs rescaled to |x|^2 / dim = 1 (the study's input convention), from ``seed``."""
    x = np.random.default_rng(seed).standard_normal((n, dim))
    return (x * np.sqrt(dim) / np.linalg.norm(x, axis=1, keepdims=True)).astype(np.float32)


def recall_gap(class_acc) -> np.ndarray:
    """g = max_c r_c - mean_c r_c over the classes with a finite recall (last axis); NaN where none is finite."""
    r = np.asarray(class_acc, float)
    finite = np.isfinite(r)
    n = finite.sum(axis=-1)
    top = np.max(np.where(finite, r, -np.inf), axis=-1)
    mean = np.where(finite, r, 0.0).sum(axis=-1) / np.maximum(n, 1)
    return np.where(n > 0, top - mean, np.nan)


def balanced_accuracy(class_acc) -> np.ndarray:
    """b = mean_c r_c over the classes with a finite recall (last axis)."""
    r = np.asarray(class_acc, float)
    finite = np.isfinite(r)
    return np.where(finite.any(axis=-1), np.where(finite, r, 0.0).sum(axis=-1) / np.maximum(finite.sum(axis=-1), 1),
                    np.nan)


def max_gap(b, n_classes: int = 2) -> np.ndarray:
    """The largest recall gap at balanced accuracy b: min(1 - b, (C - 1) b)."""
    b = np.asarray(b, float)
    return np.minimum(1 - b, (n_classes - 1) * b)


def null_threshold(acc, acc_null, measure_null, halfwidth: float = DEFAULT_HALFWIDTH,
                   q: float = DEFAULT_QUANTILE, min_n: int = DEFAULT_MIN_N) -> np.ndarray:
    """Per entry of ``acc`` (any shape): the ``q`` quantile of the finite null values ``measure_null`` whose
    accuracy ``acc_null`` (same shape as ``measure_null``, flattened) lies within ``halfwidth``; NaN with fewer
    than ``min_n`` such values or a non-finite ``acc``."""
    a = np.asarray(acc, float)
    an, mn = np.asarray(acc_null, float).ravel(), np.asarray(measure_null, float).ravel()
    keep = np.isfinite(an) & np.isfinite(mn)
    an, mn = an[keep], mn[keep]
    out = np.full(a.shape, np.nan)
    flat = a.ravel()
    for i, v in enumerate(flat):
        if not np.isfinite(v):
            continue
        near = mn[np.abs(an - v) <= halfwidth]
        if near.size >= min_n:
            out.flat[i] = np.quantile(near, q)
    return out


def window_absorption(steps_E, ok_EM, window: int = DEFAULT_WINDOW) -> np.ndarray:
    """Per member (column): the first evaluated step t with ``ok`` at every evaluation of step in [t, t + window]
    and t + window <= the last evaluated step; NaN: never. ``ok``: bool (evals, members)."""
    steps = np.asarray(steps_E, float)
    ok = np.asarray(ok_EM, bool)
    if ok.ndim != 2 or ok.shape[0] != steps.size:
        raise ValueError(f"ok must be (evals, members) with {steps.size} evals, got {ok.shape}")
    if np.any(np.diff(steps) <= 0):
        raise ValueError("steps must increase")
    if window < 0:
        raise ValueError(f"window must be >= 0, got {window}")
    out = np.full(ok.shape[1], np.nan)
    for e, t in enumerate(steps):
        if t + window > steps[-1]:
            break
        inside = (steps >= t) & (steps <= t + window)
        hit = ok[inside].all(axis=0) & np.isnan(out)
        out[hit] = t
    return out


def informative(thr, acc, n_classes: int = 2, share: float = DEFAULT_INFORMATIVE) -> np.ndarray:
    """bool: the null threshold ``thr`` at balanced accuracy ``acc`` lies below ``share`` x `max_gap`."""
    thr = np.asarray(thr, float)
    return np.isfinite(thr) & (thr < share * max_gap(acc, n_classes))


def prejudiced(measure_EM, acc_EM, acc_null, measure_null, n_classes: int = 2,
               share: float = DEFAULT_INFORMATIVE, **null_kw) -> np.ndarray:
    """bool (E, M): the measure lies above its null threshold at matched balanced accuracy ``acc``; an evaluation
    without a threshold or with an uninformative one (`informative`) counts as prejudiced (not absorbed: no
    evidence either way)."""
    thr = null_threshold(acc_EM, acc_null, measure_null, **null_kw)
    m = np.asarray(measure_EM, float)
    return ~(informative(thr, acc_EM, n_classes, share) & np.isfinite(m) & (m <= thr))


def absorption(steps_E, measure_EM, acc_EM, acc_null, measure_null, window: int = DEFAULT_WINDOW,
               **kw) -> np.ndarray:
    """`window_absorption` of "not `prejudiced`": the first step from which the measure stays within an informative
    null for a full window; NaN: never."""
    return window_absorption(steps_E, ~prejudiced(measure_EM, acc_EM, acc_null, measure_null, **kw), window)


__all__ = ["gaussian_inputs", "recall_gap", "balanced_accuracy", "max_gap", "null_threshold", "informative",
           "window_absorption", "prejudiced", "absorption", "DEFAULT_WINDOW", "DEFAULT_HALFWIDTH", "DEFAULT_QUANTILE",
           "DEFAULT_MIN_N", "DEFAULT_INFORMATIVE"]
