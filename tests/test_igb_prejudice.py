"""The accuracy-independent prejudice measure (`jaxinit.igb.prejudice`): it separates a one-class-biased net from a
neutral net at the same accuracy, its null is matched on accuracy, and absorption needs a full window."""
import jax.numpy as jnp
import numpy as np
import pytest

from jaxinit.igb import absorption as old
from jaxinit.igb import prejudice
from jaxinit.shared import igb_stats


def _logits(labels, predicted):
    return jnp.asarray(np.eye(2)[predicted] * 4.0 - 2.0, jnp.float32)


def _net(labels, wrong0: int, wrong1: int):
    """Per-class recall of a net that gets ``wrong0`` inputs of class 0 and ``wrong1`` of class 1 wrong."""
    pred = labels.copy()
    pred[np.flatnonzero(labels == 0)[:wrong0]] = 1
    pred[np.flatnonzero(labels == 1)[:wrong1]] = 0
    out = igb_stats.per_class(_logits(labels, pred), jnp.asarray(labels))
    return {k: np.asarray(v) for k, v in out.items()}


def _neutral_null(labels, rng, n_members=60):
    """Null nets: errors fall on each input independently with the same probability, at accuracies 0.5-1."""
    accs, gaps = [], []
    for err in np.linspace(0.0, 0.5, n_members):
        pred = np.where(rng.random(labels.size) < err, 1 - labels, labels)
        out = igb_stats.per_class(_logits(labels, pred), jnp.asarray(labels))
        accs.append(float(out["acc"]))
        gaps.append(float(prejudice.recall_gap(np.asarray(out["class_acc"]))))
    return np.array(accs), np.array(gaps)


def test_biased_and_neutral_net_at_90_percent_are_told_apart():
    labels = np.repeat([0, 1], 200)
    biased, neutral = _net(labels, 0, 40), _net(labels, 20, 20)
    assert float(biased["acc"]) == pytest.approx(0.9) and float(neutral["acc"]) == pytest.approx(0.9)
    gaps = prejudice.recall_gap(np.stack([biased["class_acc"], neutral["class_acc"]]))
    assert gaps[0] == pytest.approx(0.1) and gaps[1] == pytest.approx(0.0)
    acc_null, gap_null = _neutral_null(labels, np.random.default_rng(0), 400)
    flags = prejudice.prejudiced(gaps[None], np.array([[0.9, 0.9]]), acc_null, gap_null)
    assert flags.tolist() == [[True, False]]


def test_the_measure_does_not_follow_accuracy_where_the_old_mask_does():
    """A neutral net is unmarked at 70 % and at 95 %; the old mask (f_max within 0.05 of the share, accuracy above
    it) counts the 70 % net as not absorbed only because a 30 %-error net can lean by chance: here it does not
    lean, and the new measure says so at both accuracies."""
    labels = np.repeat([0, 1], 200)
    acc_null, gap_null = _neutral_null(labels, np.random.default_rng(1), 400)
    nets = [_net(labels, 60, 60), _net(labels, 10, 10)]
    gaps = prejudice.recall_gap(np.stack([n["class_acc"] for n in nets]))
    accs = np.array([[float(n["acc"]) for n in nets]])
    assert not prejudice.prejudiced(gaps[None], accs, acc_null, gap_null).any()
    leaning = _net(labels, 0, 120)    # 70 %, every error on class 1
    g = prejudice.recall_gap(leaning["class_acc"][None])
    assert prejudice.prejudiced(g[None], np.array([[0.7]]), acc_null, gap_null).all()
    # the old mask ties absorption to accuracy: balanced errors at 52.5 % accuracy are "not absorbed"
    chance = _net(labels, 95, 95)
    assert not old.absorbed_mask(np.array([[float(chance["fmax"])]]), np.array([[float(chance["acc"])]]), 0.5)[0, 0]
    g = prejudice.recall_gap(chance["class_acc"][None])
    assert not prejudice.prejudiced(g[None], np.array([[float(chance["acc"])]]), acc_null, gap_null).any()


def test_recall_gap():
    assert prejudice.recall_gap(np.array([1.0, 0.0])) == pytest.approx(0.5)
    assert prejudice.recall_gap(np.array([0.9, 0.7, np.nan])) == pytest.approx(0.1)
    assert np.isnan(prejudice.recall_gap(np.array([np.nan, np.nan])))
    assert prejudice.recall_gap(np.full((3, 4, 10), 0.8)).shape == (3, 4)
    assert prejudice.recall_gap(np.eye(10)[0]) == pytest.approx(0.9)    # one class of 10


def test_null_threshold_is_matched_on_accuracy():
    acc_null = np.concatenate([np.full(50, 0.6), np.full(50, 0.9)])
    gap_null = np.concatenate([np.linspace(0, 0.2, 50), np.linspace(0, 0.02, 50)])
    thr = prejudice.null_threshold(np.array([0.6, 0.9, 0.75, np.nan]), acc_null, gap_null)
    assert thr[0] == pytest.approx(np.quantile(gap_null[:50], 0.95))
    assert thr[1] == pytest.approx(np.quantile(gap_null[50:], 0.95))
    assert np.isnan(thr[2]) and np.isnan(thr[3])        # no null net near 0.75; no accuracy
    assert np.isnan(prejudice.null_threshold(np.array([0.6]), acc_null[:10], gap_null[:10]))[0]   # < min_n


def test_window_absorption_needs_a_full_window():
    steps = np.array([0, 10, 20, 30, 40, 50, 60, 70, 80])
    ok = np.array([[0, 0, 0, 0, 0, 0],
                   [1, 0, 0, 0, 0, 0],
                   [1, 1, 0, 0, 0, 0],
                   [1, 1, 1, 0, 0, 0],
                   [1, 1, 1, 1, 0, 0],
                   [1, 0, 1, 1, 0, 0],
                   [1, 1, 1, 1, 0, 0],
                   [1, 1, 1, 1, 1, 0],
                   [1, 1, 1, 1, 1, 0]], bool)
    got = prejudice.window_absorption(steps, ok, window=30)
    # col 0 from 10; col 1 dips at 50: 60 would need 90; col 2 from 30; col 3 from 40 (40..70 within 80)
    # col 4 only at the last two evaluations: no full window; col 5 never
    assert got[0] == 10 and np.isnan(got[1]) and got[2] == 30 and got[3] == 40
    assert np.isnan(got[4]) and np.isnan(got[5])
    assert prejudice.window_absorption(steps, ok, window=0)[4] == 70
    with pytest.raises(ValueError):
        prejudice.window_absorption(steps[::-1], ok)


def test_gaussian_inputs_on_the_sphere():
    x = prejudice.gaussian_inputs(64, 30, seed=3)
    assert x.shape == (64, 30) and x.dtype == np.float32
    np.testing.assert_allclose((x ** 2).mean(axis=1), 1.0, rtol=1e-5)
    assert np.array_equal(x, prejudice.gaussian_inputs(64, 30, seed=3))
    assert abs(x.mean()) < 0.05


def test_a_null_that_reaches_the_largest_gap_decides_nothing():
    """Null nets whose errors are all on one class at every accuracy: their threshold sits at the largest possible
    gap, so no evaluation is informative and nothing is absorbed, however small its gap."""
    acc_null = np.linspace(0.5, 1.0, 200)
    gap_null = prejudice.max_gap(acc_null)
    thr = prejudice.null_threshold(np.array([0.7, 0.9]), acc_null, gap_null)
    assert not prejudice.informative(thr, np.array([0.7, 0.9])).any()
    steps = np.arange(0, 200, 10)
    assert np.isnan(prejudice.absorption(steps, np.zeros((20, 2)), np.full((20, 2), 0.9), acc_null, gap_null)).all()
    labels = np.repeat([0, 1], 200)        # an informative (binomial) null absorbs the same nets
    acc_b, gap_b = _neutral_null(labels, np.random.default_rng(2), 400)
    assert (prejudice.absorption(steps, np.zeros((20, 2)), np.full((20, 2), 0.9), acc_b, gap_b) == 0).all()


def test_balanced_accuracy_and_the_largest_gap():
    np.testing.assert_allclose(prejudice.balanced_accuracy(np.array([[1.0, 0.8], [0.9, np.nan]])), [0.9, 0.9])
    np.testing.assert_allclose(prejudice.max_gap(np.array([0.5, 0.9, 0.2]), 2), [0.5, 0.1, 0.2])
    assert prejudice.max_gap(0.5, 10) == pytest.approx(0.5)
    assert prejudice.recall_gap(np.array([1.0, 0.8])) == pytest.approx(prejudice.max_gap(0.9))   # all errors on one class
