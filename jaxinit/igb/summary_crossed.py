"""The crossed design's analysis (`jaxinit.igb.crossed`): does depth add anything once L / xi_c is known, and
where is the threshold?

Every reported member of the crossed points (the EOC at r = 0 and the 'r<r> ordered / chaotic' points) of every
case of one activation and optimizer is one Bernoulli outcome, trains = final test accuracy >= the case's target.
Models (Firth logistic, `jaxinit.igb.logistic`), with d = log2 L - its mean over the members:

    M_r:   logit P = a + b r
    M_rd:  logit P = a + b r + c d             (depth once r is known: LRT of c = 0, c's profile interval)
    M_rds: M_rd + e [chaotic side]             (the side of the EOC; r50 per side at the centre depth)
    M_rdn: M_rd + n [theory phase = neutrality]  (neutrality beyond r and depth)

The depth and side tests have permutation nulls besides their chi-square p (`permutation_lrt`): whole points'
depths are shuffled among the points of equal r and side, sides among the points of equal r and depth. The
chi-square p counts every seed as independent; the seeds of one point share its rate and its draw of the
point's behaviour, so the permutation p, which moves a point's seeds together, is the one to read.
The threshold r50 (P = 1/2) is M_r's -a / b with its profile interval, and per depth M_rd's; the design's power is
the share of outcomes simulated from M_rd with b at M_r's estimate and c planted at ``planted`` (per doubling of
depth) for which the LRT rejects c = 0 at 0.05. The analysis runs at the selection horizon's rates (arm 0) and at
the short horizon's (each point's arm-1 members where its rate differs, else its arm-0 members).
"""
from __future__ import annotations

import numpy as np

from jaxinit.igb import crossed, logistic
from jaxinit.igb.summary_prejudice import member_index

PLANTED = (-0.5, -1.0)        # depth coefficients per doubling for the power
N_SIMS = 200
N_PERM = 200


def is_crossed(r: dict, parse=crossed.parse) -> bool:
    return any(parse(str(x)) not in (None, (0.0, "EOC")) for x in r["point_role"])


def table(results: dict[str, dict], horizon: str = "H", parse=crossed.parse) -> dict[str, np.ndarray]:
    """Per member of every crossed point: r, depth, side (+1 chaotic, -1 ordered, 0 EOC), neutral, trains,
    final test accuracy, point label. ``parse`` reads a role's side (`crossed.parse`; `crossed.parse_sweep` for
    the `xi` sweep's '<f>xEOC' points, which `analyse_table` then fits the same way)."""
    cols = {k: [] for k in ("r", "depth", "side", "neutral", "trains", "final", "point")}
    for r in results.values():
        if not is_crossed(r, parse):
            continue
        target = float(r["target_acc"])
        short = r.get("point_lr_short")
        for p, role in enumerate(r["point_role"].tolist()):
            parsed = parse(role)
            if parsed is None:
                continue
            idx = member_index(r, p, 0)
            if horizon == "h" and short is not None and float(short[p]) != float(r["point_lr"][p]):
                own = member_index(r, p, 1)
                if own.size:
                    idx = own
            final = r["test_acc"][-1, idx]
            n = idx.size
            cols["r"] += [float(r["point_depth_over_xi_c"][p])] * n
            cols["depth"] += [int(r["depth"])] * n
            cols["side"] += [{"ordered": -1, "chaotic": 1, "EOC": 0}[parsed[1]]] * n
            cols["neutral"] += [str(r["point_theory_phase"][p]) == "neutrality"] * n
            cols["trains"] += (final >= target).tolist()
            cols["final"] += final.tolist()
            cols["point"] += [f"d{int(r['depth'])} {role}"] * n
    return {k: np.asarray(v) for k, v in cols.items()}


def design(tab: dict) -> tuple[np.ndarray, float]:
    """Columns [1, r, d, chaotic, neutral] and the mean of log2 depth that d is centred on."""
    logd = np.log2(tab["depth"].astype(float))
    centre = float(logd.mean())
    X = np.column_stack([np.ones(tab["r"].size), tab["r"], logd - centre, (tab["side"] > 0).astype(float),
                         tab["neutral"].astype(float)])
    return X, centre


def permutation_lrt(tab: dict, shuffle: str, within: tuple[str, ...], cols: list[int], drop: int,
                    n_perm: int = N_PERM, seed: int = 0) -> dict:
    """A covariate's LRT statistic (column ``drop`` of the model ``design(tab)[:, cols]``) against its permutation
    null: the ``shuffle`` column's values of whole points are shuffled among the points that share the ``within``
    columns (the design's strata: the other covariates stay where they were, each point's seeds move together, so
    seeds of one point are not counted as independent), and the statistic recomputed. Observed statistic,
    p = (1 + #{null >= observed}) / (1 + n_perm), n_perm."""
    y = tab["trains"].astype(float)
    observed = logistic.lrt(design(tab)[0][:, cols], y, [drop])["stat"]
    labels, first = np.unique(tab["point"], return_index=True)
    member_point = np.searchsorted(labels, tab["point"])
    strata = [tuple(np.round(float(tab[w][i]), 6) for w in within) for i in first]
    groups = [np.flatnonzero([k == key for k in strata]) for key in sorted(set(strata))]
    values = tab[shuffle][first]
    rng = np.random.default_rng(seed)
    above = 0
    for _ in range(n_perm):
        shuffled = values.copy()
        for idx in groups:
            shuffled[idx] = rng.permutation(values[idx])
        Xp = design({**tab, shuffle: shuffled[member_point]})[0][:, cols]
        above += logistic.lrt(Xp, y, [drop])["stat"] >= observed
    return {"stat": observed, "p": (1 + above) / (1 + n_perm), "n_perm": n_perm}


def analyse_table(tab: dict, planted=PLANTED, n_sims: int = N_SIMS, n_perm: int = N_PERM) -> dict:
    """The models of the module docstring on one table."""
    y = tab["trains"].astype(float)
    X, centre = design(tab)
    m_r, m_rd = X[:, :2], X[:, :3]
    fit_r, fit_rd = logistic.fit(m_r, y), logistic.fit(m_rd, y)
    out = {"n": int(y.size), "trains": int(y.sum()), "log2_depth_centre": centre,
           "M_r": {"coef": fit_r.beta.tolist(), "r_ci95": logistic.coef_interval(m_r, y, 1),
                   "r50": logistic.threshold(m_r, y, 1, np.array([1.0, 0.0]))},
           "M_rd": {"coef": fit_rd.beta.tolist(), "depth_coef_ci95": logistic.coef_interval(m_rd, y, 2),
                    "lrt_depth": logistic.lrt(m_rd, y, [2]),
                    "permutation_depth": permutation_lrt(tab, "depth", ("r", "side"), [0, 1, 2], 2, n_perm),
                    "r50_by_depth": {int(d): logistic.threshold(m_rd, y, 1, np.array([1.0, 0.0, np.log2(d) - centre]))
                                     for d in sorted(set(tab["depth"].tolist()))}}}
    if (X[:, 3] > 0).any() and (X[:, 3] == 0).any():
        m = X[:, :4]
        out["M_rds"] = {"coef": logistic.fit(m, y).beta.tolist(), "lrt_side": logistic.lrt(m, y, [3]),
                        "side_coef_ci95": logistic.coef_interval(m, y, 3),
                        "permutation_side": permutation_lrt(tab, "side", ("r", "depth"), [0, 1, 2, 3], 3, n_perm),
                        # a side effect moves the threshold: r50 on each side, at the centre depth (d = 0)
                        "r50_by_side": {side: logistic.threshold(m, y, 1, np.array([1.0, 0.0, 0.0, flag]))
                                        for side, flag in (("ordered", 0.0), ("chaotic", 1.0))}}
    if (X[:, 4] > 0).any() and (X[:, 4] == 0).any():
        m = X[:, [0, 1, 2, 4]]
        out["M_rdn"] = {"coef": logistic.fit(m, y).beta.tolist(), "lrt_neutral": logistic.lrt(m, y, [3]),
                        "neutral_coef_ci95": logistic.coef_interval(m, y, 3)}
    out["power_depth"] = {f"{c:g}": logistic.power(m_rd, [2], [fit_r.beta[0], fit_r.beta[1], c], n_sims)
                          for c in planted}
    return out


def per_point(tab: dict) -> list[dict]:
    """Per point: r, depth, side, trains k / n, mean final accuracy."""
    rows = []
    for label in dict.fromkeys(tab["point"].tolist()):
        m = tab["point"] == label
        rows.append({"point": label, "r": float(tab["r"][m][0]), "depth": int(tab["depth"][m][0]),
                     "neutral": bool(tab["neutral"][m][0]), "trains": int(tab["trains"][m].sum()),
                     "n": int(m.sum()), "final_test_acc_mean": float(tab["final"][m].mean())})
    return rows


def analyse(results: dict[str, dict], target_of_linear: float, n_sims: int = N_SIMS, n_perm: int = N_PERM) -> dict:
    """Per activation and optimizer: `analyse_table` at the horizon (H) and at the short horizon (h), with the
    per-point table."""
    out = {}
    groups = dict.fromkeys((str(r["act"]), str(r["optimizer"])) for r in results.values() if is_crossed(r))
    for act, opt in groups:
        mine = {n: r for n, r in results.items() if str(r["act"]) == act and str(r["optimizer"]) == opt}
        out[f"{act}__{opt}"] = {
            "target_of_linear": target_of_linear,
            **{f"at_{h}": {"points": per_point(table(mine, h)),
                           "models": analyse_table(table(mine, h), n_sims=n_sims, n_perm=n_perm)}
               for h in ("H", "h")}}
    return out
