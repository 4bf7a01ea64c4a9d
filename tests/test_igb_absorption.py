"""jaxinit.igb.absorption: sustained absorption on hand-made traces, and the linear baseline."""
import numpy as np
import pytest

from jaxinit.igb import absorption as ab
from jaxinit.igb import baseline as bl

SHARE = 0.535          # majority label share of the binarised digits test split
STEPS = np.array([0, 2, 4, 6, 8, 10, 12])


def _traces(*members):
    """(f_max, accuracy) arrays (evals, members) from per-member lists of (f_max, acc) pairs."""
    fmax = np.array([[p[0] for p in m] for m in members]).T
    acc = np.array([[p[1] for p in m] for m in members]).T
    return fmax, acc


# hand-made members, one (f_max, test accuracy) per evaluation of STEPS
TRANSIENT = [(1.0, .53), (0.55, .62), (1.0, .53), (1.0, .53), (1.0, .53), (1.0, .53), (1.0, .53)]   # dips, returns
SUSTAINED = [(1.0, .53), (0.9, .58), (0.7, .70), (0.56, .80), (0.55, .85), (0.54, .88), (0.53, .90)]
AT_CHANCE = [(0.54, .50), (0.55, .52), (0.53, .54), (0.56, .53), (0.55, .55), (0.54, .54), (0.53, .56)]
GOOD_AT_INIT = [(0.55, .70)] * 7
LATE_RELAPSE = [(1.0, .5), (0.56, .8), (0.55, .85), (0.55, .9), (0.55, .9), (0.7, .75), (0.55, .9)]


def test_a_transient_dip_is_not_absorption_and_a_sustained_drop_is():
    fmax, acc = _traces(TRANSIENT, SUSTAINED)
    got = ab.sustained_absorption(STEPS, fmax, acc, SHARE)
    assert np.isnan(got[0])                     # the old metric would say 2
    assert got[1] == 6                          # |0.56 - 0.535| <= 0.05 and 0.80 > 0.585 from step 6 on
    assert ab.first_crossing(STEPS, fmax, 0.6).tolist() == [2, 6]


def test_chance_level_accuracy_is_not_absorption_even_at_the_right_f_max():
    """A net within the margin from step 0 with accuracy ~ the majority share is not 'absorbed at 0'."""
    fmax, acc = _traces(AT_CHANCE, GOOD_AT_INIT)
    got = ab.sustained_absorption(STEPS, fmax, acc, SHARE)
    assert np.isnan(got[0]) and got[1] == 0
    assert ab.first_crossing(STEPS, fmax, 0.6)[0] == 0


def test_a_later_relapse_moves_absorption_after_it():
    fmax, acc = _traces(LATE_RELAPSE)
    assert ab.sustained_absorption(STEPS, fmax, acc, SHARE)[0] == 12         # 0.7 at step 10 breaks the run
    assert ab.sustained_absorption(STEPS, fmax, acc, SHARE, margin=0.2)[0] == 2   # a looser margin tolerates it


def test_margins_are_what_the_docstring_states():
    fmax, acc = _traces([(SHARE + 0.049, SHARE + 0.051)], [(SHARE + 0.051, 0.9)], [(SHARE - 0.049, 0.9)],
                        [(SHARE, SHARE + 0.049)])
    mask = ab.absorbed_mask(fmax, acc, SHARE)
    assert mask.tolist() == [[True, False, True, False]]
    np.testing.assert_array_equal(ab.sustained_from(np.array([[1, 0], [0, 1], [1, 1]], bool)),
                                  np.array([[0, 0], [0, 1], [1, 1]], bool))


def test_vectorised_over_members_equals_one_at_a_time():
    rng = np.random.default_rng(0)
    rate = np.linspace(0.002, 0.06, 9)                  # slow members never get there, fast ones do
    fmax = np.clip(1.0 - np.cumsum(rng.uniform(0, 2, (40, 9)) * rate, axis=0) + rng.normal(0, 0.02, (40, 9)), 0.5, 1)
    acc = np.clip(0.5 + np.cumsum(rng.uniform(0, 0.02, (40, 9)), axis=0), 0, 1)
    steps = np.arange(40) * 2
    together = ab.sustained_absorption(steps, fmax, acc, SHARE)
    alone = [ab.sustained_absorption(steps, fmax[:, [m]], acc[:, [m]], SHARE)[0] for m in range(9)]
    np.testing.assert_array_equal(together, alone)
    assert np.isfinite(together).any() and not np.isfinite(together).all()   # the draw covers both outcomes


def test_nan_evaluations_count_as_not_absorbed_and_bad_shapes_raise():
    fmax, acc = _traces(SUSTAINED)
    acc[-1, 0] = np.nan                                     # a diverged member never absorbs
    assert np.isnan(ab.sustained_absorption(STEPS, fmax, acc, SHARE)[0])
    with pytest.raises(ValueError, match="evals, members"):
        ab.sustained_absorption(STEPS, fmax[:, 0], acc[:, 0], SHARE)
    with pytest.raises(ValueError, match="6 steps for 7"):
        ab.sustained_absorption(STEPS[:6], fmax, acc, SHARE)
    with pytest.raises(ValueError, match="increase"):
        ab.sustained_absorption(STEPS[::-1], fmax, acc, SHARE)


def test_majority_share():
    assert bl.majority_share([0, 1, 1, 1]) == 0.75 and bl.majority_share(np.array([2, 2, 0, 1, 3])) == 0.4
    with pytest.raises(ValueError):
        bl.majority_share([])


# --------------------------------------------------------------------------- linear baseline
def _linearly_separable(n, d=10, seed=0, noise=0.0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, d))
    w = np.arange(1, d + 1, dtype=float)
    y = (x @ w + noise * rng.standard_normal(n) > 0).astype(int)
    return x, y


def test_linear_baseline_selects_on_validation_and_is_deterministic():
    (xtr, ytr), (xva, yva), (xte, yte) = (_linearly_separable(n, seed=s, noise=2.0) for n, s in
                                          ((400, 1), (200, 2), (300, 3)))
    res = bl.linear_baseline(xtr, ytr, xva, yva, xte, yte)
    for kind in ("ridge", "logistic"):
        r = res[kind]
        assert r["val_acc"] == max(g["val_acc"] for g in r["grid"])            # chosen on validation
        assert r["param"] == next(g["param"] for g in r["grid"] if g["val_acc"] == r["val_acc"])   # ties: first
        assert 0.85 < r["test_acc"] <= 1.0                                     # a linear rule with 2 / 19.6 noise
    assert res["n_test"] == 300 and res["majority_share"] == bl.majority_share(yte)
    assert bl.linear_baseline(xtr, ytr, xva, yva, xte, yte) == res


def test_linear_baseline_is_at_chance_on_labels_that_ignore_the_inputs():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((900, 20))
    y = (rng.uniform(size=900) < 0.7).astype(int)       # 70 % ones, independent of x
    res = bl.linear_baseline(x[:500], y[:500], x[500:650], y[500:650], x[650:], y[650:])
    assert abs(res["logistic"]["test_acc"] - res["majority_share"]) < 0.08
    assert abs(res["ridge"]["test_acc"] - res["majority_share"]) < 0.08


def test_ten_classes_and_image_shaped_inputs():
    rng = np.random.default_rng(5)
    centres = rng.standard_normal((10, 4, 4, 1)) * 3
    y = rng.integers(0, 10, 600)
    x = centres[y] + rng.standard_normal((600, 4, 4, 1))
    res = bl.linear_baseline(x[:300], y[:300], x[300:400], y[300:400], x[400:], y[400:], alphas=(1.0,), cs=(1.0,))
    assert res["ridge"]["test_acc"] > 0.9 and res["logistic"]["test_acc"] > 0.9
    with pytest.raises(ValueError, match="validation"):
        bl.linear_baseline(x[:300], y[:300], x[:0], y[:0], x[400:], y[400:])
