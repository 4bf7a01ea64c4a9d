"""One clock per line (jaxinit.memory.line): the line's rate from synthetic selection arrays, the plateau rule on
synthetic learning curves, the clocks of a run, and the pre-registered H3 rule (jaxinit.memory.hypotheses)."""
import numpy as np
import pytest

from jaxinit.memory import hypotheses, line

LRS = np.array([0.01, 0.03, 0.1])


def arrays(loss_PRS, alive=None, short=None):
    loss = np.asarray(loss_PRS, float)
    a = {"select_lr": LRS, "select_val_loss": loss, "select_alive": np.ones(loss.shape, bool) if alive is None
         else alive, "point_lr": LRS[np.argmin(loss.mean(-1), axis=1)], "point_rates_alive": np.full(len(loss), 3)}
    if short is not None:
        a.update(select_val_loss_short=np.asarray(short, float), select_alive_short=np.ones(loss.shape, bool),
                 point_lr_short=LRS[np.argmin(np.asarray(short).mean(-1), axis=1)])
    return a


def test_the_line_takes_the_rate_best_on_average_even_where_points_alone_would_differ():
    # point 0 is best at 0.01, point 1 at 0.1; averaged over the line 0.03 wins (2 seeds each)
    loss = [[[1.0, 1.0], [1.1, 1.1], [2.0, 2.0]],
            [[2.0, 2.0], [1.2, 1.2], [1.1, 1.1]]]
    out = line.line_choice(arrays(loss, short=np.array(loss)[:, ::-1]))
    assert out["line_lr"] == 0.03 and out["point_lr"].tolist() == [0.03, 0.03]
    assert out["point_lr_own"].tolist() == [0.01, 0.1]
    assert out["line_scores"] == pytest.approx([1.5, 1.15, 1.55])
    assert out["line_lr_short"] == 0.03 and out["point_lr_own_short"].tolist() == [0.1, 0.01]   # rates reversed
    report = line.report(out)
    assert report["lr"] == 0.03 and report["rates"] == LRS.tolist() and report["point_lr_own"] == [0.01, 0.1]


def test_one_diverged_member_disqualifies_a_rate_for_the_whole_line_and_ties_go_to_the_smaller():
    loss = np.array([[[1.0, 1.0], [0.5, 0.5], [0.5, 0.5]],
                     [[1.0, 1.0], [0.5, 0.5], [0.5, 0.5]]])
    assert line.choose_line(loss, np.ones(loss.shape, bool)) == 1          # tie between 0.03 and 0.1
    alive = np.ones(loss.shape, bool)
    alive[1, 1, 0] = False                                                   # one seed of one point at 0.03
    assert line.choose_line(loss, alive) == 2
    assert line.line_scores(loss, alive)[1] is None
    assert line.choose_line(loss, np.zeros(loss.shape, bool)) == 0         # nothing qualified: the smallest


def test_a_grid_of_one_rate_is_no_selection():
    out = line.line_choice({"point_lr": np.full(3, 0.02), "point_rates_alive": np.full(3, -1)})
    assert out["line_lr"] == 0.02 and out["line_lr_short"] is None and line.report(out)["rates"] is None


def curve(losses, every=100):
    return [{"epoch": k * every, "step": k * every, "val_loss": v} for k, v in enumerate(losses)]


def test_the_plateau_rule_on_synthetic_curves():
    flat = line.plateau(curve([2.3, 1.5, 1.2, 1.1, 1.05, 1.04, 1.04, 1.041, 1.04, 1.039, 1.04]), 0.2, 0.05)
    assert flat["reached"] is True and flat["gain_all"] == pytest.approx(2.3 - 1.039)
    assert flat["gain_last"] == pytest.approx(0.001)
    still = line.plateau(curve([2.3, 2.2, 2.1, 2.0, 1.9, 1.8, 1.7, 1.6, 1.5, 1.4, 1.3]), 0.2, 0.05)
    assert still["reached"] is False and still["gain_last"] == pytest.approx(0.2)
    overfit = line.plateau(curve([2.3, 1.5, 1.2, 1.1, 1.0, 1.1, 1.2, 1.3, 1.4, 1.5, 1.6]), 0.2, 0.05)
    assert overfit["reached"] is True and overfit["gain_last"] == 0.0        # past its best: nothing to gain
    stuck = line.plateau(curve([2.3] * 11), 0.2, 0.05)
    assert stuck["reached"] is True and stuck["gain_all"] == 0.0
    assert line.plateau(curve([2.3, 2.2]), 0.2, 0.05)["reached"] is False   # window: the last evaluation
    assert line.plateau(curve([2.3]), 0.2, 0.05)["reached"] is None


def test_run_clocks_are_steps_times_the_rate():
    c = line.run_clocks(0.03, 2000, 16, 0.05)
    assert c["T_SGD"] == pytest.approx(2000 * 0.03 ** 2 / 16)
    assert c["T_L2"] == pytest.approx(0.05 * 2000 * 0.03) and c["T_adapt"] == pytest.approx(60.0)


def member(case, point, seed, acc):
    return {"case": case, "point": point, "seed": seed, "test_acc_best": acc}


def case(optimizer, clock_at_best, trained=(True, True, True)):
    clock = hypotheses.CROSSING[optimizer][0]
    clocks = {"T_SGD": 0.0, "T_L2": 0.0, "T_adapt": 0.0, clock: clock_at_best}
    return {"optimizer": optimizer, "clocks": {"at_best_median": clocks},
            "points": [{"role": f"p{k}", "trained": t} for k, t in enumerate(trained)]}


def test_the_h3_rule_decides_on_the_arm_past_its_crossing():
    rng = np.random.default_rng(0)
    recs = []
    for s in range(6):           # sgd: points 0.2 / 0.3 / 0.4 (spread 20 pp); sgd_l2: 0.3 / 0.31 / 0.32 (2 pp)
        recs += [member("a", p, s, 0.2 + 0.1 * p + 0.01 * rng.normal()) for p in range(3)]
        recs += [member("b", p, s, 0.3 + 0.01 * p + 0.01 * rng.normal()) for p in range(3)]
    net = {"sgd": ("a", case("sgd", 0.01)), "sgd_l2": ("b", case("sgd_l2", 1.0))}
    out = hypotheses.h3(net, recs)
    assert out["verdict"] == "supported" and out["decided_on"] == "sgd-sgd_l2"
    c = out["contrasts"]["sgd-sgd_l2"]
    assert c["mean_pp"] == pytest.approx(18, abs=4) and c["p"] == pytest.approx(1 / 64) and c["n_seeds"] == 6
    swapped = {"sgd": ("b", case("sgd", 0.01)), "sgd_l2": ("a", case("sgd_l2", 1.0))}
    assert hypotheses.h3(swapped, recs)["verdict"] == "contradicted"
    short = {"sgd": ("a", case("sgd", 0.01)), "sgd_l2": ("b", case("sgd_l2", 0.5))}      # L2 before its crossing
    assert hypotheses.h3(short, recs) == {**hypotheses.h3(short, recs), "verdict": "not decided",
                                          "why": "no arm past its crossing"}
    thin = {"sgd": ("a", case("sgd", 0.01, (True, False, False))), "sgd_l2": ("b", case("sgd_l2", 1.0))}
    assert hypotheses.h3(thin, recs)["verdict"] == "not decided"              # one point trains in both


def test_the_sign_flip_p_is_exact():
    assert hypotheses.sign_flip_p([1.0, 2.0, 3.0]) == pytest.approx(1 / 8)
    assert hypotheses.sign_flip_p([1.0, -1.0]) == pytest.approx(3 / 4)
    assert hypotheses.sign_flip_p([1.0]) is None


PHASES = {"ordered-deep": "ordered deep prejudice", "EOC": "transient deep prejudice (EOC)", "prejudice": "prejudice"}


def planted_net(rng, keep: dict, seeds: int = 8, trained: dict | None = None):
    """Member records and case summaries of one network whose trained off-distribution frequencies keep the planted
    share ``keep[optimizer][role]`` of each seed's own init (the rest: the data's common vector and fresh noise)."""
    from jaxinit.memory import identity
    recs, net, common = [], {}, rng.dirichlet(np.full(10, 2.0))
    for optimizer, shares in keep.items():
        name = f"tanh__d40__{optimizer}"
        mine = []
        for p, role in enumerate(PHASES):
            for s in range(seeds):
                f0 = rng.dirichlet(np.full(10, 0.5))
                f1 = 0.6 * common + 0.4 * (shares[role] * f0 + (1 - shares[role]) * rng.dirichlet(np.full(10, 0.5)))
                mine.append({"case": name, "point": p, "seed": s, "off_class_freq_init": f0.tolist(),
                             "off_class_freq_best": f1.tolist()})
        points = [{"role": role, "theory_phase": phase, "trained": (trained or {}).get(role, True),
                   "identity_best": identity.identity_of([r for r in mine if r["point"] == p], "best", n_draws=2000,
                                                        n_boot=300)}
                  for p, (role, phase) in enumerate(PHASES.items())]
        net[optimizer] = (name, {"optimizer": optimizer, "points": points})
        recs += mine
    return net, recs


def test_the_h1_and_h2_rules_find_a_planted_memory_and_refuse_an_untrained_point():
    rng = np.random.default_rng(7)
    keep = {"sgd": {"ordered-deep": 0.9, "EOC": 0.0, "prejudice": 0.9},
            "adam": dict.fromkeys(PHASES, 0.0), "sgd_l2": dict.fromkeys(PHASES, 0.0)}
    net, recs = planted_net(rng, keep)
    h1 = hypotheses.h1(net, recs)
    assert h1["verdict"] == "supported" and h1["points"] == ["ordered-deep", "prejudice"]
    assert h1["sgd_keeps"]["ci95"][0] > 0 and all(d["ci95"][0] > 0 for d in h1["others_keep_less"].values())
    h2 = hypotheses.h2(net, recs)
    assert h2["verdict"] == "supported" and h2["difference"]["ci95"][0] > 0
    assert hypotheses.h2(net, recs, "adam")["verdict"] == "not decided"      # nothing kept anywhere: no contrast

    eoc_keeps, recs2 = planted_net(rng, {"sgd": {"ordered-deep": 0.0, "EOC": 0.9, "prejudice": 0.0}})
    assert hypotheses.h2(eoc_keeps, recs2)["verdict"] == "contradicted"
    h1_none = hypotheses.h1(eoc_keeps, recs2)
    assert h1_none["verdict"] == "contradicted" and h1_none["sgd_keeps"]["power_r03"] >= 0.8

    untrained, recs3 = planted_net(rng, keep, trained={"ordered-deep": False})
    assert hypotheses.h2(untrained, recs3)["verdict"] == "not decided"
    assert hypotheses.h1(untrained, recs3)["points"] == ["prejudice"]
