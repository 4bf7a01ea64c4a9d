"""`jaxinit.jsonsafe` (the one JSON sanitiser) and `jaxinit.intervals` (the one t interval): the same output,
to the byte, as the implementations they replace (frozen copies below), so summary.json files stay identical."""
import json
import math
import types
from typing import Mapping

import numpy as np
import pytest

from jaxinit import intervals, jsonsafe
from jaxinit.forgetting import memory
from jaxinit.igb import summary_train
from jaxinit.shared import history


# --------------------------------------------------------------------------- the replaced implementations
def _old_as_float(x):
    if x is None or isinstance(x, bool):
        return math.nan
    try:
        v = float(x)
    except (TypeError, ValueError):
        return math.nan
    return v if math.isfinite(v) else math.nan


def _old_finite_or_none(x):          # forgetting/history.py
    v = _old_as_float(x)
    return None if math.isnan(v) else v


def _old_to_jsonable(obj):           # forgetting/history.py
    if isinstance(obj, Mapping):
        return {str(k): _old_to_jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_old_to_jsonable(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [_old_to_jsonable(v) for v in obj.tolist()]
    if isinstance(obj, (bool, np.bool_)):
        return bool(obj)
    if isinstance(obj, (int, np.integer)):
        return int(obj)
    if isinstance(obj, (float, np.floating)):
        return _old_finite_or_none(obj)
    return obj


def _old_json_safe(obj):             # igb/sink.py
    if isinstance(obj, dict):
        return {str(k): _old_json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_old_json_safe(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return _old_json_safe(obj.tolist())
    if isinstance(obj, (np.floating, float)):
        return float(obj) if math.isfinite(obj) else None
    if isinstance(obj, np.integer):
        return int(obj)
    if isinstance(obj, np.bool_):
        return bool(obj)
    return obj


def _old_ci95(values):               # igb/summary_train.py
    from scipy import stats as sps
    v = np.asarray(values, float)
    if len(v) < 2:
        return None
    half = sps.t.ppf(0.975, len(v) - 1) * v.std(ddof=1) / np.sqrt(len(v))
    return [float(v.mean() - half), float(v.mean() + half)]


RICH = {
    "bool": True, "false": False, "np_bool": np.bool_(False), "np_true": np.True_,
    "int": 7, "big": 2 ** 40, "np_int64": np.int64(-3), "np_int32": np.int32(5), "np_uint8": np.uint8(255),
    "float": 0.1, "np_float32": np.float32(0.1), "np_float64": np.float64(1 / 3), "np_float16": np.float16(0.5),
    "nan": math.nan, "inf": math.inf, "-inf": -math.inf, "np_nan": np.float32("nan"), "np_inf": np.float64("inf"),
    "none": None, "str": "sgd_l2", "np_str": np.str_("adam"),
    "tuple": (1, (2.5, (np.nan, np.float32(3.25)), ()), [True, np.bool_(True)]),
    "arrays": [np.arange(3), np.array([[0.5, np.nan], [np.inf, 1e-30]], np.float32), np.array([True, False]),
               np.array(["a", "b"]), np.zeros((0, 2))],
    "int_keys": {1: "a", np.int64(2): "b", 0.5: "c", (1, 2): "d", None: "e"},
    "nested": {"spread": {"sgd": {"spread_ci95": (np.float32(1.5), np.float64(2.5)), "n": np.int64(4),
                                  "empty": {}, "dropped": []}}},
    "members": [{"member": np.int64(i), "sigma_w": float(s), "acc": np.float32(0.9 - 0.1 * i), "div": bool(i % 2)}
                for i, s in enumerate((0.5, 1.0, 2.0))],
}


def _typed(x):
    """x with the type of every leaf, so that 1 == 1.0 == True cannot pass for equal."""
    if isinstance(x, dict):
        return {k: _typed(v) for k, v in x.items()}
    if isinstance(x, list):
        return [_typed(v) for v in x]
    return (type(x).__name__, x)


def test_to_json_is_the_forgetting_sanitiser_to_the_byte_and_type():
    new, old = jsonsafe.to_json(RICH), _old_to_jsonable(RICH)
    assert _typed(new) == _typed(old)
    assert json.dumps(new, sort_keys=True, allow_nan=False) == json.dumps(old, sort_keys=True, allow_nan=False)
    assert new["np_float32"] == float(np.float32(0.1)) != 0.1          # widened exactly, as before
    assert new["tuple"] == [1, [2.5, [None, 3.25], []], [True, True]]
    assert new["int_keys"] == {"1": "a", "2": "b", "0.5": "c", "(1, 2)": "d", "None": "e"}
    proxy = types.MappingProxyType({"a": np.float32(2.0)})             # any Mapping, not only dict
    assert jsonsafe.to_json(proxy) == _old_to_jsonable(proxy) == {"a": 2.0}


def test_to_json_is_the_igb_sanitiser_to_the_byte():
    new, old = jsonsafe.to_json(RICH), _old_json_safe(RICH)
    assert json.dumps(new, sort_keys=True, allow_nan=False) == json.dumps(old, sort_keys=True, allow_nan=False)
    assert jsonsafe.to_json(np.array(2.5)) == _old_json_safe(np.array(2.5)) == 2.5      # 0-d arrays: a scalar
    assert jsonsafe.to_json(np.array(np.nan)) is None
    assert type(jsonsafe.to_json(np.array(3))) is int and type(jsonsafe.to_json(np.True_)) is bool


@pytest.mark.parametrize("x", [None, True, False, np.bool_(True), 0, -4, np.int64(9), 0.25, np.float32(0.7),
                               math.nan, -math.inf, np.float64("nan"), "1.5", "nan", "x", [1.0], {}, object()])
def test_finite_or_none_as_before(x):
    new, old = jsonsafe.finite_or_none(x), _old_finite_or_none(x)
    assert new == old and type(new) is type(old)
    assert (math.isnan(history.as_float(x)) if old is None else history.as_float(x) == old)   # history's row reader


def _rows():
    """Two settings x 2 seeds x 3 scales, 4 epochs, numpy scalars among the values, one diverged member."""
    rows, m = [], 0
    for opt in ("sgd", "adam"):
        for seed in (0, 1):
            for sw in (0.5, 1.0, 2.0):
                for e in range(4):
                    acc = np.float32(0.5 + 0.1 * e - 0.03 * sw * (opt == "sgd") - 0.01 * seed)
                    bad = opt == "sgd" and sw == 2.0 and seed == 1 and e == 3
                    rows.append({"member": m, "optimizer": opt, "sigma_w": sw, "seed": seed, "epoch": e,
                                 "step": 10 * e, "train_acc": min(1.0, 0.6 + 0.15 * e), "val_acc": float(acc),
                                 "test_acc": acc, "val_loss": math.nan if bad else 2.0 - 0.3 * e + 0.01 * (e == 3),
                                 "param_norm": np.float64(10 + e), "diverged": bad,
                                 "param_norm_layers": {"dense_0/kernel": 3.0 + e, "head/kernel": np.float32(1.5)}})
                m += 1
    return rows


def test_summary_json_is_byte_identical_to_the_old_sanitiser(monkeypatch):
    args = (None, np.full(40, 0.1), 16, {i: 0.0 for i in range(12)})
    new = json.dumps(memory.summarize(_rows(), *args), indent=2, sort_keys=True, allow_nan=False)
    monkeypatch.setattr(history, "to_json", _old_to_jsonable)         # member_summary's
    monkeypatch.setattr(memory, "to_json", _old_to_jsonable)          # summarize's
    old = json.dumps(memory.summarize(_rows(), *args), indent=2, sort_keys=True, allow_nan=False)
    assert new == old and '"diverged": true' in new


def test_one_sanitiser_and_one_interval_remain():
    from jaxinit.shared import seed_stats as stats, sink
    assert history.to_json is memory.to_json is jsonsafe.to_json
    assert history.finite_or_none is jsonsafe.finite_or_none          # the row reader converts through it too
    assert not hasattr(history, "to_jsonable") and not hasattr(sink, "json_safe")   # the old names are gone
    assert stats.t_interval is intervals.t_interval and intervals.LEVEL == 0.95


# --------------------------------------------------------------------------- t interval
def test_t_interval_is_bit_identical_to_the_igb_ci95():
    rng = np.random.default_rng(3)
    for n in (2, 3, 5, 17):
        for scale in (1e-3, 1.0, 300.0):
            v = (rng.normal(size=n) * scale).astype(np.float32 if n % 2 else np.float64)
            assert intervals.t_interval(v) == _old_ci95(v)           # exact: the same float operations
    assert intervals.t_interval([0.5]) is None and intervals.t_interval([]) is None
    assert intervals.t_interval([3.0, 3.0]) == [3.0, 3.0]


def test_t_interval_by_hand_and_other_levels():
    lo, hi = intervals.t_interval([1.0, 2.0, 3.0])
    assert (lo + hi) / 2 == pytest.approx(2.0) and (hi - lo) / 2 == pytest.approx(4.302653 / math.sqrt(3), rel=1e-6)
    lo90, hi90 = intervals.t_interval([1.0, 2.0, 3.0], level=0.90)
    assert (hi90 - lo90) / 2 == pytest.approx(2.919986 / math.sqrt(3), rel=1e-6)


def test_igb_summary_uses_the_shared_interval():
    final = np.array([0.8, 0.9, 0.7], np.float32)
    assert summary_train.t_interval is intervals.t_interval
    assert summary_train.t_interval(final) == _old_ci95(final)
