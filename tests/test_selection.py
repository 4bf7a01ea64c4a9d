"""The fair protocol's selection rule (`jaxinit.shared.selection`): the rate better at the long horizon wins when
a pair of learning curves swaps its ranking, a diverged seed disqualifies a rate, ties go to the smaller rate, a
grid of one rate is no selection, and every preset selects over half its reported run on two seeds or more."""
import numpy as np
import pytest

from jaxinit.errors import ConfigError
from jaxinit.igb import config_rescale, config_train
from jaxinit.memory import config as memory_config
from jaxinit.shared import case_train, selection
from jaxinit.shared.phases import Case


def _rows(curves: dict[float, list[dict[int, float]]], steps) -> list[dict]:
    """Evaluation rows of one point's selection members (rate-major, then seed) from their validation losses
    ({rate: [{step: loss} per seed]}); a NaN loss is a diverged member (as the engine writes it)."""
    rows, member = [], 0
    for rate in sorted(curves):
        for seed_curve in curves[rate]:
            for step in steps:
                loss = seed_curve[step]
                rows.append({"member": member, "epoch": step, "step": step, "diverged": bool(np.isnan(loss)),
                             "val_loss": None if np.isnan(loss) else loss,
                             "val_acc": None if np.isnan(loss) else float(np.exp(-loss))})
            member += 1
    return rows


def test_the_rate_better_at_the_long_horizon_is_chosen_when_two_learning_curves_swap_their_ranking():
    """A fast starter (0.1) leads at the short horizon and plateaus; the slow rate (0.01) overtakes it: the rule
    reads the long horizon (half the reported run of 100 steps), and reports the short one's choice beside it."""
    h = selection.horizons(100, 0.5, 0.2)
    assert h == (50, 20)
    fast = [{0: 2.3, 20: 0.30, 50: 0.35}, {0: 2.3, 20: 0.32, 50: 0.33}]
    slow = [{0: 2.3, 20: 0.60, 50: 0.20}, {0: 2.3, 20: 0.62, 50: 0.22}]
    case = case_train.case_arrays(_rows({0.1: fast, 0.01: slow}, (0, h.short, h.steps)), [0, 1, 2, 3])
    out = selection.arrays(case, [0.1, 0.01], n_points=1, n_seeds=2, h=h)
    assert out["point_lr"].tolist() == [0.01] and out["point_lr_short"].tolist() == [0.1]
    np.testing.assert_allclose(out["select_val_loss"][0], [[0.20, 0.22], [0.35, 0.33]])
    assert selection.report(out) == {"criterion": "val_loss", "horizon_steps": 50, "short_steps": 20, "seeds": 2,
                                     "rates": 2, "points": 1, "changed_at_short": 1}
    point = selection.point_report(out, 0)
    assert (point["lr"], point["lr_short"], point["rates_alive"]) == (0.01, 0.1, 2)
    assert [r["val_loss_mean"] for r in point["lr_curve"]] == pytest.approx([0.21, 0.34])
    assert [r["val_loss_mean_short"] for r in point["lr_curve"]] == pytest.approx([0.61, 0.31])


def test_the_criterion_is_the_validation_loss_not_the_accuracy():
    """A rate right on more inputs but confidently wrong on the rest (higher accuracy, higher loss) loses."""
    case = {"step": np.array([0, 4]), "alive": np.ones((2, 4), bool),
            "val_loss": np.array([[2.3] * 4, [0.30, 0.32, 0.50, 0.52]]),
            "val_acc": np.array([[0.5] * 4, [0.80, 0.81, 0.90, 0.91]])}
    out = selection.arrays(case, [0.01, 0.1], n_points=1, n_seeds=2, h=selection.Horizons(4, 0))
    assert out["point_lr"].tolist() == [0.01]


def test_the_selection_run_is_evaluated_at_init_and_at_both_horizons():
    plan = case_train.selection_plan(selection.Horizons(50, 20))
    assert [e for e in range(51) if plan.evaluated(e)] == [0, 20, 50] and plan.epochs == 50
    plan = case_train.selection_plan(selection.Horizons(7, 0))
    assert [e for e in range(8) if plan.evaluated(e)] == [0, 7]


def test_the_horizon_is_at_least_half_the_run_and_the_short_one_below_it():
    for steps in range(1, 2000):
        h = selection.horizons(steps, 0.5, 0.2)
        assert 2 * h.steps >= steps > 2 * (h.steps - 1) and h.short < h.steps and h.short == (2 * steps) // 10
    assert selection.horizons(300, 0.5, 0.2) == (150, 60) and selection.horizons(6, 0.5, 0.2) == (3, 1)


def test_a_diverged_seed_or_a_non_finite_loss_disqualifies_a_rate_and_each_point_gets_its_own_best():
    # 3 points x 3 rates x 2 seeds, constructed so that every point's best rate differs
    loss = np.array([[[0.6, 0.5], [0.3, 0.2], [0.5, 0.5]],       # point 0: rate 1
                     [[0.2, 0.2], [0.6, 0.5], [0.7, 0.7]],       # point 1: rate 0
                     [[0.6, 0.6], [0.5, 0.5], [0.1, 0.05]]])     # point 2: rate 2 is best, but a seed diverged
    alive = np.ones_like(loss, bool)
    alive[2, 2, 1] = False
    assert selection.choose(loss, alive).tolist() == [1, 0, 1]
    assert selection.survivors(loss, alive).tolist() == [3, 3, 2]
    loss[0, 1, 0] = np.nan                                       # alive but a NaN loss: out as well
    assert selection.choose(loss, alive).tolist() == [2, 0, 1]
    assert selection.choose(loss[:1], np.zeros_like(alive[:1])).tolist() == [0]      # all out: the smallest rate


def test_ties_go_to_the_smaller_rate_and_an_unsorted_grid_is_sorted_first():
    assert selection.choose(np.full((1, 3, 2), 0.5), np.ones((1, 3, 2), bool)).tolist() == [0]
    assert selection.choose(np.array([[[0.7, 0.7], [0.4, 0.4], [0.4, 0.4]]]), np.ones((1, 3, 2), bool)).tolist() == [1]
    steps = (0, 3)
    curves = {lr: [{0: 2.0, 3: loss}, {0: 2.0, 3: loss}] for lr, loss in ((0.3, 0.4), (0.01, 0.9), (0.1, 0.4))}
    case = case_train.case_arrays(_rows(curves, steps), list(range(6)))
    out = selection.arrays(case, [0.3, 0.01, 0.1], n_points=1, n_seeds=2, h=selection.Horizons(3, 0))
    assert out["select_lr"].tolist() == [0.01, 0.1, 0.3] and out["point_lr"].tolist() == [0.1]
    assert "point_lr_short" not in out and selection.report(out)["changed_at_short"] is None


def test_a_grid_of_one_rate_is_no_selection():
    points = {"role": np.array(["EOC", "prejudice"]), "sigma_w2": np.array([2.0, 2.4]), "sigma_b2": np.array([.1, .1]),
              "seeds": np.array([3, 2])}
    cases = {"a": Case("tanh", 3, "sgd", 8, points, {}), "b": Case("tanh", 3, "adam", 8, points, {})}
    lrs = {"sgd": (0.1, 0.01), "adam": (1e-3,)}.get
    assert list(selection.grids(cases, lrs)) == ["a"]
    chosen = selection.chosen(cases, lrs, {"a": {"point_lr": np.array([0.1, 0.01])}})
    assert chosen["a"]["point_lr"].tolist() == [0.1, 0.01]
    assert chosen["b"]["point_lr"].tolist() == [1e-3, 1e-3] and chosen["b"]["point_rates_alive"].tolist() == [-1, -1]
    assert selection.report(chosen["b"]) is None
    assert selection.point_report(chosen["b"], 1) == {"lr": 1e-3, "lr_short": None, "rates_alive": -1, "lr_curve": []}


def test_selection_members_are_points_by_rates_by_seeds_on_seeds_disjoint_from_the_reported_ones():
    points = {"role": np.array(["EOC", "prejudice"]), "sigma_w2": np.array([2.0, 2.4]), "sigma_b2": np.array([.1, .1]),
              "seeds": np.array([3, 2])}
    m = selection.members(points, [0.1, 0.01], n_seeds=2)
    assert m["role"].tolist() == ["EOC"] * 4 + ["prejudice"] * 4
    assert m["lr"].tolist() == [0.01, 0.01, 0.1, 0.1] * 2 and m["seed"].tolist() == [1000, 1001] * 4
    r = case_train.reported_members(points, [0.1, 0.01])
    assert r["role"].tolist() == ["EOC"] * 3 + ["prejudice"] * 2 and r["seed"].tolist() == [0, 1, 2, 0, 1]
    assert r["lr"].tolist() == [0.1] * 3 + [0.01] * 2 and r["point"].tolist() == [0, 0, 0, 1, 1]
    assert not set(m["seed"]) & set(r["seed"])


@pytest.mark.parametrize("horizon,short,seeds,message", [
    (0.4, 0.2, 2, "--opt.select_horizon must lie in [0.5, 1] (a fraction of the reported run) and "
                  "--opt.select_short in [0, select_horizon), got 0.4 and 0.2"),
    (1.5, 0.2, 2, "--opt.select_horizon must lie in [0.5, 1]"),
    (0.5, 0.5, 2, "--opt.select_short in [0, select_horizon), got 0.5 and 0.5"),
    (float("nan"), 0.2, 2, "got nan and 0.2"),
    (0.5, 0.2, 1, "--opt.select_seeds must be >= 2 (seeds disjoint from the reported ones), got 1"),
])
def test_a_selection_that_could_flip_verdicts_is_refused_in_one_line(horizon, short, seeds, message):
    with pytest.raises(ConfigError) as e:
        selection.SelectionConfig(horizon, short, seeds).check("opt")
    assert message in str(e.value) and "\n" not in str(e.value)
    selection.SelectionConfig(0.5, 0.0, 2).check("opt")            # the least the rule allows


def test_every_preset_selects_over_half_its_reported_run_on_two_seeds_or_more():
    runs = [(c.train.steps, c.opt) for c in config_train.PRESETS.values()]
    runs += [(c.train.steps, c.opt) for c in memory_config.PRESETS.values()]
    runs += [(c.finetune.steps, c.finetune) for c in config_rescale.PRESETS.values()]
    for steps, o in runs:
        h = selection.horizons(steps, o.select_horizon, o.select_short)
        assert 2 * h.steps >= steps and 0 < h.short < h.steps and o.select_seeds >= 2
