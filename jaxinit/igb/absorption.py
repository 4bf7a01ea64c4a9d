"""Metrics of bias absorption in training and the linear baseline that sets the accuracy target (pure functions).

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

Linear baseline: ridge classification (one-vs-rest least squares on +-1 targets, `sklearn.RidgeClassifier`)
and multinomial logistic regression (`sklearn.LogisticRegression`, lbfgs), regularisation chosen on the
validation split from a fixed grid (ties: the first, i.e. strongest, value), test accuracy reported at
the chosen value. Both solvers are deterministic (no random state enters).
"""
from __future__ import annotations

import numpy as np

DEFAULT_MARGIN = 0.05
DEFAULT_ACC_MARGIN = 0.05
RIDGE_ALPHAS = (1000.0, 300.0, 100.0, 30.0, 10.0, 3.0, 1.0, 0.3, 0.1, 0.03, 0.01)     # strongest first
LOGISTIC_CS = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)     # C = 1 / strength: strongest first


# --------------------------------------------------------------------------- sustained absorption
def majority_share(labels) -> float:
    """Share of the most frequent label: the f_max of perfect predictions and the chance accuracy."""
    labels = np.asarray(labels).reshape(-1)
    if labels.size == 0:
        raise ValueError("no labels")
    return float(np.bincount(labels.astype(np.int64)).max() / labels.size)


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


# --------------------------------------------------------------------------- linear baseline
def _flat(x) -> np.ndarray:
    x = np.asarray(x, np.float64)
    return x.reshape(len(x), -1)


def ridge_accuracies(x_train, y_train, x_eval_list, alpha: float) -> list[float]:
    """Accuracies of `RidgeClassifier(alpha)` fitted on the training split, on each (x, y) of `x_eval_list`."""
    from sklearn.linear_model import RidgeClassifier
    model = RidgeClassifier(alpha=alpha).fit(_flat(x_train), np.asarray(y_train))
    return [float(model.score(_flat(x), np.asarray(y))) for x, y in x_eval_list]


def logistic_accuracies(x_train, y_train, x_eval_list, c: float, max_iter: int = 5000) -> list[float]:
    """Accuracies of multinomial `LogisticRegression(C=c)` (lbfgs) on each (x, y) of `x_eval_list`."""
    from sklearn.linear_model import LogisticRegression
    model = LogisticRegression(C=c, max_iter=max_iter, tol=1e-6).fit(_flat(x_train), np.asarray(y_train))
    return [float(model.score(_flat(x), np.asarray(y))) for x, y in x_eval_list]


def _select(fit, grid, train, val, test) -> dict:
    rows = [(g, *fit(*train, [val, test], g)) for g in grid]
    best = max(range(len(rows)), key=lambda i: (rows[i][1], -i))     # best validation, ties to the first
    g, val_acc, test_acc = rows[best]
    return {"param": g, "val_acc": val_acc, "test_acc": test_acc,
            "grid": [{"param": r[0], "val_acc": r[1], "test_acc": r[2]} for r in rows]}


def linear_baseline(x_train, y_train, x_val, y_val, x_test, y_test, alphas=RIDGE_ALPHAS, cs=LOGISTIC_CS) -> dict:
    """Ridge and logistic test accuracy on the study's own split, regularisation chosen on validation.

    Returns `{"ridge": {"param" (alpha), "val_acc", "test_acc", "grid": [...]}, "logistic": {... (C)},
    "majority_share": chance on the test split, "n_test"}`. Inputs of any shape are flattened per example.
    """
    if len(x_val) == 0:
        raise ValueError("the linear baseline selects its regularisation on a validation split; it is empty")
    train, val, test = (x_train, y_train), (x_val, y_val), (x_test, y_test)
    return {"ridge": _select(ridge_accuracies, alphas, train, val, test),
            "logistic": _select(logistic_accuracies, cs, train, val, test),
            "majority_share": majority_share(y_test), "n_test": int(len(y_test))}


__all__ = ["DEFAULT_MARGIN", "DEFAULT_ACC_MARGIN", "majority_share", "absorbed_mask", "sustained_from",
           "sustained_absorption", "first_crossing", "ridge_accuracies", "logistic_accuracies", "linear_baseline"]
