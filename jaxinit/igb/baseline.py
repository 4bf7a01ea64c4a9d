"""What a trained network's accuracy is measured against (pure functions): the chance level and the linear baseline.

The chance level is the majority label's share of a split (`majority_share`): the accuracy of always answering
that label and the f_max of perfect predictions (`jaxinit.igb.absorption` reads it as ``share``).

Linear baseline: ridge classification (one-vs-rest least squares on +-1 targets, `sklearn.RidgeClassifier`)
and multinomial logistic regression (`sklearn.LogisticRegression`, lbfgs), regularisation chosen on the
validation split from a fixed grid (ties: the first, i.e. strongest, value), test accuracy reported at
the chosen value. Both solvers are deterministic (no random state enters).
The IGB training study's target accuracy is ``train.target`` x the logistic test accuracy on the same split.
"""
from __future__ import annotations

import numpy as np

RIDGE_ALPHAS = (1000.0, 300.0, 100.0, 30.0, 10.0, 3.0, 1.0, 0.3, 0.1, 0.03, 0.01)     # strongest first
LOGISTIC_CS = (0.01, 0.03, 0.1, 0.3, 1.0, 3.0, 10.0, 30.0, 100.0)     # C = 1 / strength: strongest first


def majority_share(labels) -> float:
    """Share of the most frequent label: the f_max of perfect predictions and the chance accuracy."""
    labels = np.asarray(labels).reshape(-1)
    if labels.size == 0:
        raise ValueError("no labels")
    return float(np.bincount(labels.astype(np.int64)).max() / labels.size)


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


def select_on_validation(fit, grid, train, val, test) -> dict:
    """``fit(x_train, y_train, [val, test], g)`` -> accuracies at every value ``g`` of ``grid``: the value with the best
    validation accuracy (ties: the first, i.e. the strongest regularisation) with its test accuracy, and the grid."""
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
    return {"ridge": select_on_validation(ridge_accuracies, alphas, train, val, test),
            "logistic": select_on_validation(logistic_accuracies, cs, train, val, test),
            "majority_share": majority_share(y_test), "n_test": int(len(y_test))}


__all__ = ["RIDGE_ALPHAS", "LOGISTIC_CS", "majority_share", "ridge_accuracies", "logistic_accuracies",
           "select_on_validation", "linear_baseline"]
