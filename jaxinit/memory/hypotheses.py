"""The joined study's hypotheses H1-H3, decided by rules fixed before the run (docs/memory_phases.md) (pure).

Every verdict is one of "supported", "contradicted" or "not decided", with the numbers it rests on. Identity
statistics are `jaxinit.memory.identity` (r of the seed-specific off-distribution class frequencies, init against
the selected step; permutation p; seed-bootstrap interval; power), on the points that train (a point's ``trained``
flag, `jaxinit.memory.summary.TRAINED_ACC`): a network that does not move keeps its init trivially.

- **H1** (per network, i.e. activation and depth). Points: the prejudiced ones (theory phase "ordered deep
  prejudice" or "prejudice") that train under SGD. (a) SGD keeps each seed's own class preference: supported if
  the pooled r has p < `ALPHA` and its interval lies above 0; contradicted if its interval lies below
  `identity.R_REF` while the power at that r is >= `identity.POWER`; (b) Adam and SGD + L2 keep less than SGD: per
  optimizer, r_SGD - r_other on the same points and seeds (paired seed bootstrap) above 0 (supported) or below 0
  (contradicted). H1 is supported when (a) and every (b) are, contradicted when (a) or any (b) is.
- **H2** (per network, SGD). r at the ordered-deep point minus r at the EOC (paired seed bootstrap), both points
  trained: supported if the difference's interval lies above 0, the ordered-deep r has p < `ALPHA` and the EOC's
  p >= `ALPHA`; contradicted if the difference's interval lies below 0, or the EOC keeps a residue (p < `ALPHA`,
  interval above 0) while the difference's interval does not lie above 0.
- **H3** (per network). Each optimizer's own clock at its median selected step (`CROSSING`: the clock and the
  value at which the forgetting study's spread falls below half of low-LR SGD's, docs/clocks.md) makes it an arm
  "past" or "before" its crossing. On the points that train in both arms of a (before, past) pair, per seed the
  line's spread (max - min over the points of the selected-step test accuracy, pp) of the arm before minus that
  of the arm past: mean, 95 % t interval, exact one-sided sign-flip p over seeds. Supported if the interval lies
  above 0 and p < `ALPHA`; contradicted if it lies below 0; not decided when no arm is past (or none before) its
  crossing, or fewer than 2 points train in both. The pair decided first is (sgd, sgd_l2), then any other.
"""
from __future__ import annotations

import itertools

import numpy as np

from jaxinit import intervals
from jaxinit.memory import identity

ALPHA = 0.05
CROSSING = {"sgd": ("T_SGD", 0.6), "sgd_l2": ("T_L2", 0.8), "adam": ("T_adapt", 2.0)}
PREJUDICED = ("ordered deep prejudice", "prejudice")
SUPPORTED, CONTRADICTED, OPEN = "supported", "contradicted", "not decided"


def _above(ci) -> bool:
    return ci is not None and ci[0] is not None and ci[0] > 0


def _below(ci, level: float = 0.0) -> bool:
    return ci is not None and ci[1] is not None and ci[1] < level


def _mine(recs, case_name, points) -> list[dict]:
    return [r for r in recs if r["case"] == case_name and r["point"] in points]


def _args(recs) -> tuple:
    return identity.identity_args(recs, "best")


def h1(net: dict, recs: list[dict]) -> dict:
    """H1 of one network (``net``: optimizer -> (case name, case summary))."""
    if "sgd" not in net:
        return {"verdict": OPEN, "why": "no sgd case"}
    name, case = net["sgd"]
    points = [p for p, pt in enumerate(case["points"]) if pt.get("theory_phase") in PREJUDICED and pt["trained"]]
    out = {"points": [case["points"][p]["role"] for p in points]}
    if not points:
        return {**out, "verdict": OPEN, "why": "no prejudiced point trains under sgd"}
    sgd = identity.identity_of(_mine(recs, name, points), "best")
    a = OPEN
    if sgd["p"] is not None and sgd["p"] < ALPHA and _above(sgd["ci95"]):
        a = SUPPORTED
    elif _below(sgd["ci95"], identity.R_REF) and (sgd["power_r03"] or 0) >= identity.POWER:
        a = CONTRADICTED
    contrasts = {}
    for other in ("adam", "sgd_l2"):
        if other in net:
            d = identity.paired_difference(_args(_mine(recs, name, points)), _args(_mine(recs, net[other][0], points)))
            d["verdict"] = SUPPORTED if _above(d["ci95"]) else CONTRADICTED if _below(d["ci95"]) else OPEN
            contrasts[other] = d
    parts = [a] + [d["verdict"] for d in contrasts.values()]
    verdict = (CONTRADICTED if CONTRADICTED in parts else SUPPORTED if all(v == SUPPORTED for v in parts) else OPEN)
    return {**out, "verdict": verdict, "sgd_keeps": {**sgd, "verdict": a}, "others_keep_less": contrasts}


def h2(net: dict, recs: list[dict], optimizer: str = "sgd") -> dict:
    """H2 of one network under ``optimizer``."""
    if optimizer not in net:
        return {"verdict": OPEN, "why": f"no {optimizer} case"}
    name, case = net[optimizer]
    roles = [pt["role"] for pt in case["points"]]
    if "ordered-deep" not in roles or "EOC" not in roles:
        return {"verdict": OPEN, "why": "needs an ordered-deep and an EOC point"}
    o, e = roles.index("ordered-deep"), roles.index("EOC")
    po, pe = case["points"][o], case["points"][e]
    out = {"optimizer": optimizer, "ordered_deep": po["identity_best"], "eoc": pe["identity_best"]}
    if not (po["trained"] and pe["trained"]):
        return {**out, "verdict": OPEN, "why": "the ordered-deep or the EOC point does not train"}
    d = identity.paired_difference(_args(_mine(recs, name, [o])), _args(_mine(recs, name, [e])))
    ro, re_ = po["identity_best"], pe["identity_best"]
    eoc_keeps = re_["p"] is not None and re_["p"] < ALPHA and _above(re_["ci95"])
    if _above(d["ci95"]) and ro["p"] is not None and ro["p"] < ALPHA and not (re_["p"] is not None and re_["p"] < ALPHA):
        verdict = SUPPORTED
    elif _below(d["ci95"]) or (eoc_keeps and not _above(d["ci95"])):
        verdict = CONTRADICTED
    else:
        verdict = OPEN
    return {**out, "difference": d, "verdict": verdict}


def sign_flip_p(diffs) -> float | None:
    """Exact one-sided p of mean(diffs) > 0 over every sign flip (the identity included)."""
    d = np.asarray(diffs, float)
    if d.size < 2:
        return None
    obs = d.mean()
    null = np.array([np.mean(d * s) for s in itertools.product((1.0, -1.0), repeat=d.size)])
    return float(np.mean(null >= obs - 1e-12))


def arm(case: dict) -> dict:
    """The optimizer's own clock at its median selected step and whether it is past its crossing."""
    clock, cross = CROSSING[case["optimizer"]]
    value = case["clocks"]["at_best_median"][clock]
    return {"clock": clock, "value": value, "crossing": cross, "past": value >= cross}


def per_seed_spread(recs: list[dict], name: str, points: list[int]) -> dict:
    """{seed: 100 x (max - min over ``points`` of the selected-step test accuracy)} of case ``name``'s members;
    seeds missing a point are left out."""
    acc: dict = {}
    for r in recs:
        if r["case"] == name and r["point"] in points and r["test_acc_best"] is not None:
            acc.setdefault(r["seed"], []).append(float(r["test_acc_best"]))
    return {s: 100 * (max(v) - min(v)) for s, v in acc.items() if len(v) == len(points)}


def spread_contrast(recs: list[dict], before: tuple, past: tuple) -> dict:
    """Per-seed spread (pp) over the points trained in both arms (each ``(case name, case summary)``), before
    minus past (module docstring)."""
    pb, pp = before[1]["points"], past[1]["points"]
    common = [p for p, (a, b) in enumerate(zip(pb, pp)) if a["trained"] and b["trained"]]
    out = {"points": [pb[p]["role"] for p in common]}
    if len(common) < 2:
        return {**out, "mean_pp": None, "ci95": None, "p": None, "n_seeds": 0}
    sb, sp = per_seed_spread(recs, before[0], common), per_seed_spread(recs, past[0], common)
    seeds = sorted(set(sb) & set(sp))
    diffs = [sb[s] - sp[s] for s in seeds]
    return {**out, "mean_pp": float(np.mean(diffs)) if diffs else None, "ci95": intervals.t_interval(diffs),
            "p": sign_flip_p(diffs), "n_seeds": len(seeds),
            "before_pp": float(np.mean([sb[s] for s in seeds])) if seeds else None,
            "past_pp": float(np.mean([sp[s] for s in seeds])) if seeds else None}


def h3(net: dict, recs: list[dict]) -> dict:
    """H3 of one network (module docstring)."""
    arms = {opt: arm(case) for opt, (_, case) in net.items() if opt in CROSSING}
    out = {"arms": arms}
    before = [o for o, a in arms.items() if not a["past"]]
    past = [o for o, a in arms.items() if a["past"]]
    if not before or not past:
        return {**out, "verdict": OPEN, "why": "no arm past its crossing" if not past else "no arm before its crossing"}
    pairs = [(b, p) for b in before for p in past]
    pairs.sort(key=lambda bp: bp != ("sgd", "sgd_l2"))
    contrasts = {f"{b}-{p}": spread_contrast(recs, net[b], net[p]) for b, p in pairs}
    first = contrasts[f"{pairs[0][0]}-{pairs[0][1]}"]
    if first["mean_pp"] is None:
        verdict = OPEN
    elif _above(first["ci95"]) and first["p"] is not None and first["p"] < ALPHA:
        verdict = SUPPORTED
    elif _below(first["ci95"]):
        verdict = CONTRADICTED
    else:
        verdict = OPEN
    return {**out, "decided_on": f"{pairs[0][0]}-{pairs[0][1]}", "contrasts": contrasts, "verdict": verdict}


def decide(cases: dict, recs: list[dict]) -> dict:
    """Per network ("<act>__d<depth>") the verdicts of H1, H2 (sgd; adam and sgd_l2 beside) and H3."""
    nets: dict[str, dict] = {}
    for name, case in cases.items():
        nets.setdefault(f"{case['act']}__d{case['depth']}", {})[case["optimizer"]] = (name, case)
    out = {}
    for key, net in nets.items():
        out[key] = {"H1": h1(net, recs), "H2": h2(net, recs),
                    "H2_other_optimizers": {o: h2(net, recs, o) for o in net if o != "sgd"},
                    "H3": h3(net, recs)}
    return out
