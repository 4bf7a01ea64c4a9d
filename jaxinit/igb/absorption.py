"""Metrics of bias absorption in training (pure functions).

Sustained absorption (issue "Bias meets trainability, tested fairly", item 4). A net has absorbed its initial
guessing bias at evaluation `t` when, at `t` and at EVERY later evaluation of the run,
- its test `f_max` (share of test inputs given the most-predicted class) lies within `margin` of the
  majority label's share `s` of the test set, `|f_max - s| <= margin` (a net that predicts the labels
  has `f_max ~ s`; `f_max >= 1/n` always, so for `s ~ 1/n` only the upper side binds), and
- its test accuracy exceeds the chance level, the accuracy of always answering the majority label,
  `acc > s + acc_margin`.
The absorption step is the first such `t` (NaN: never within the run). A transient dip of `f_max` followed
by `f_max` back at 1.0 is not absorption (a later evaluation fails); a net that starts within the margin
at chance accuracy is not "absorbed at 0" (the accuracy condition fails). Defaults `margin = acc_margin
= 0.05`: two standard errors of a fraction near 1/2 on ~400 test inputs (`sqrt(0.25 / 359) = 0.026`), so
sampling noise alone rarely breaks a sustained run or fakes one. The verdict is conditional on the
run's horizon: a condition that first holds at the last evaluation counts as absorbed there.
The share s and the linear baseline that sets the accuracy target are `jaxinit.igb.baseline`'s.
"""
from __future__ import annotations

import numpy as np

DEFAULT_MARGIN = 0.05
DEFAULT_ACC_MARGIN = 0.05


# --------------------------------------------------------------------------- sustained absorption
def absorbed_mask(fmax_EM, acc_EM, share, margin: float = DEFAULT_MARGIN,
                  acc_margin: float = DEFAULT_ACC_MARGIN) -> np.ndarray:
    """Per evaluation and member: `|f_max - share| <= margin` and `acc > share + acc_margin` (bool (E, M))."""
    fmax_EM, acc_EM = np.asarray(fmax_EM, float), np.asarray(acc_EM, float)
    if fmax_EM.shape != acc_EM.shape or fmax_EM.ndim != 2:
        raise ValueError(f"f_max and accuracy must both be (evals, members), got {fmax_EM.shape} / {acc_EM.shape}")
    return (np.abs(fmax_EM - share) <= margin) & (acc_EM > share + acc_margin)   # NaN compares False


def sustained_from(mask_EM) -> np.ndarray:
    """bool (E, M): the condition holds at this evaluation and at every later one (a reversed running AND)."""
    mask_EM = np.asarray(mask_EM, bool)
    return np.logical_and.accumulate(mask_EM[::-1], axis=0)[::-1]


def sustained_absorption(steps_E, fmax_EM, acc_EM, share, margin: float = DEFAULT_MARGIN,
                         acc_margin: float = DEFAULT_ACC_MARGIN) -> np.ndarray:
    """First evaluated step from which the net stays absorbed (module docstring), per member; NaN = never.

    `steps_E`: the step of each evaluation (increasing); `fmax_EM`, `acc_EM`: test f_max and accuracy,
    shape (evals, members); `share`: the test set's majority label share (`majority_share`).
    """
    steps_E = np.asarray(steps_E, float)
    ok = sustained_from(absorbed_mask(fmax_EM, acc_EM, share, margin, acc_margin))
    if steps_E.shape != ok.shape[:1]:
        raise ValueError(f"{len(steps_E)} steps for {ok.shape[0]} evaluations")
    if np.any(np.diff(steps_E) <= 0):
        raise ValueError("steps must increase")
    first = np.argmax(ok, axis=0)
    return np.where(ok.any(axis=0), steps_E[first], np.nan)


def first_crossing(steps_E, fmax_EM, threshold: float) -> np.ndarray:
    """The old metric, for comparison: first evaluated step with `f_max <= threshold` (NaN = never).
    Counts transients: a single dip below the threshold is enough."""
    hit = np.asarray(fmax_EM, float) <= threshold
    return np.where(hit.any(axis=0), np.asarray(steps_E, float)[np.argmax(hit, axis=0)], np.nan)


__all__ = ["DEFAULT_MARGIN", "DEFAULT_ACC_MARGIN", "absorbed_mask", "sustained_from", "sustained_absorption",
           "first_crossing"]
