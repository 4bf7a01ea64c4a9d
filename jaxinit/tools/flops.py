"""FLOPs of a jax function from its jaxpr: the same count on every backend, computed without compiling.

A GPU program's own cost analysis does not see the convolutions that became library calls, so rates
and projections divide by a count taken here instead, from the traced program's shapes. The rules are
those of XLA's HLO cost analysis, so on a CPU (where the compiled program keeps its convolutions) both
agree:

- ``dot_general``: 2 x (output elements) x (contracted size);
- ``conv_general_dilated``: 2 x (C_in / feature_group_count) x C_out x (B / batch_group_count) x
  prod_d V_d, where V_d counts the (output position, kernel tap) pairs of spatial dim d whose input index
  falls on a real input element (padding and the holes of an input dilation do not count);
- elementwise arithmetic, comparisons, selects and conversions: 1 per output element; transcendental
  functions (exp, log, tanh, rsqrt, ...) are counted apart, as XLA does;
- reductions: (input elements - output elements); window reductions: (window - 1) x output elements; a
  max pool's gradient (select and scatter) window x source elements; a scatter-add its update elements.

Convolutions and dots agree exactly with XLA's count of the same (unoptimised) program; elementwise work
only nearly (random bits, for one, are counted nowhere here), which matters little in a network whose
work is its convolutions.

Nested jaxprs (jit, custom derivatives, remat) are counted once per call, ``scan`` bodies ``length`` times,
``cond`` at its most expensive branch, ``while`` bodies once (``loops_unknown`` counts them: the trip
count is data).
"""
from __future__ import annotations

import collections
import math
from typing import Any, Callable

import jax
import numpy as np

ELEMENTWISE = frozenset({
    "add", "sub", "mul", "div", "rem", "max", "min", "neg", "abs", "sign", "floor", "ceil", "round", "square",
    "select_n", "convert_element_type", "eq", "ne", "lt", "le", "gt", "ge", "and", "or", "not", "xor",
    "clamp", "integer_pow", "nextafter", "is_finite", "add_any", "shift_left", "shift_right_logical",
    "shift_right_arithmetic", "population_count", "reduce_precision", "copy_p"})
TRANSCENDENTAL = frozenset({
    "exp", "exp2", "log", "log1p", "expm1", "tanh", "logistic", "rsqrt", "sqrt", "cbrt", "pow", "erf", "erfc",
    "erf_inv", "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "asinh", "acosh", "atanh",
    "lgamma", "digamma"})
REDUCTIONS = frozenset({"reduce_sum", "reduce_max", "reduce_min", "reduce_prod", "reduce_and", "reduce_or",
                        "argmax", "argmin"})
WINDOW_REDUCTIONS = frozenset({"reduce_window_sum", "reduce_window_max", "reduce_window_min", "reduce_window"})


def _size(aval: Any) -> int:
    return int(math.prod(getattr(aval, "shape", ())))


def dot_flops(lhs_shape: tuple, out_shape: tuple, contracting: tuple) -> int:
    """2 x output elements x the size of ``lhs``'s contracted dims."""
    return 2 * int(math.prod(out_shape)) * int(math.prod(lhs_shape[d] for d in contracting))


def valid_taps(n_in: int, n_out: int, n_kernel: int, stride: int, pad_lo: int, lhs_dil: int, rhs_dil: int) -> int:
    """Pairs (o, k) of one spatial dim with o*stride - pad_lo + k*rhs_dil on a real element of the
    ``lhs_dil``-dilated input of ``n_in`` elements."""
    o = np.arange(n_out)[:, None]
    k = np.arange(n_kernel)[None, :]
    pos = o * stride - pad_lo + k * rhs_dil
    real = (pos >= 0) & (pos % lhs_dil == 0) & (pos // lhs_dil < n_in)
    return int(real.sum())


def conv_flops(eqn) -> int:
    """FLOPs of one ``conv_general_dilated`` equation (see the module docstring)."""
    p = eqn.params
    lhs, rhs = (v.aval.shape for v in eqn.invars)
    out = eqn.outvars[0].aval.shape
    dn = p["dimension_numbers"]
    (lb, lf, *ls), (ro, ri, *rs), (ob, of, *os_) = dn.lhs_spec, dn.rhs_spec, dn.out_spec
    taps = 1
    for d in range(len(ls)):
        taps *= valid_taps(lhs[ls[d]], out[os_[d]], rhs[rs[d]], p["window_strides"][d], p["padding"][d][0],
                           p["lhs_dilation"][d], p["rhs_dilation"][d])
    fma = (lhs[lf] // p["feature_group_count"]) * out[of] * (lhs[lb] // p["batch_group_count"]) * taps
    return 2 * fma


def _sub_jaxprs(eqn) -> list[tuple[Any, int]]:
    """(jaxpr, times it runs) of the nested jaxprs of ``eqn``; ``cond`` is handled by the caller."""
    out = []
    for name, value in eqn.params.items():
        if name == "branches":
            continue
        jaxpr = getattr(value, "jaxpr", value)
        if hasattr(jaxpr, "eqns"):
            out.append((jaxpr, int(eqn.params.get("length", 1)) if eqn.primitive.name == "scan" else 1))
    return out


def count_jaxpr(jaxpr, totals: collections.Counter) -> collections.Counter:
    """Add the FLOPs of ``jaxpr``'s equations to ``totals`` (keys: "flops", "transcendentals", per
    primitive "flops:<name>", "loops_unknown")."""
    for eqn in jaxpr.eqns:
        name = eqn.primitive.name
        if name == "cond":
            branches = [count_jaxpr(b.jaxpr, collections.Counter()) for b in eqn.params["branches"]]
            totals.update(max(branches, key=lambda c: c["flops"]))
            continue
        for sub, times in _sub_jaxprs(eqn):
            inner = count_jaxpr(sub, collections.Counter())
            totals.update({k: v * times for k, v in inner.items()})
            totals["loops_unknown"] += name == "while"
        flops = equation_flops(eqn)
        if flops:
            totals["flops"] += flops
            totals[f"flops:{name}"] += flops
        if name in TRANSCENDENTAL:
            totals["transcendentals"] += _size(eqn.outvars[0].aval)
    return totals


def equation_flops(eqn) -> int:
    """FLOPs of one equation without nested jaxprs (0 for data movement)."""
    name = eqn.primitive.name
    out = eqn.outvars[0].aval if eqn.outvars else None
    if name == "dot_general":
        (contract, _), _ = eqn.params["dimension_numbers"]
        return dot_flops(eqn.invars[0].aval.shape, out.shape, tuple(contract))
    if name == "conv_general_dilated":
        return conv_flops(eqn)
    if name in ELEMENTWISE:
        return _size(out)
    if name in REDUCTIONS:
        return _size(eqn.invars[0].aval) - _size(out)
    if name in WINDOW_REDUCTIONS:
        return (int(math.prod(eqn.params["window_dimensions"])) - 1) * _size(out)
    if name == "select_and_scatter_add":       # per source element: window - 1 comparisons and one add
        return int(math.prod(eqn.params["window_dimensions"])) * _size(eqn.invars[0].aval)
    if name in ("scatter-add", "scatter_add"):
        return _size(eqn.invars[2].aval)
    return 0


def function_flops(fn: Callable, *args, **kwargs) -> dict:
    """{"flops", "transcendentals", "loops_unknown", "by_primitive"} of one call of ``fn`` at ``args``
    (arrays or `jax.ShapeDtypeStruct`s): traced, never compiled or run."""
    closed = jax.make_jaxpr(fn)(*args, **kwargs)
    totals = count_jaxpr(closed.jaxpr, collections.Counter())
    by = {k.split(":", 1)[1]: v for k, v in totals.items() if k.startswith("flops:")}
    return {"flops": float(totals["flops"]), "transcendentals": float(totals["transcendentals"]),
            "loops_unknown": int(totals["loops_unknown"]), "by_primitive": dict(sorted(by.items()))}


def member_step_flops(model: Any, setting: Any, input_shape: tuple, batch_size: int, augment: bool = False,
                      precision: str = "float32", n_train: int | None = None) -> dict:
    """`function_flops` of one member's training step (`jaxinit.train.step.train_step`, the library's own
    jitted single-member step) of ``model`` under optimizer setting ``setting`` at ``batch_size``."""
    from jaxinit.train import members as members_lib
    from jaxinit.train.compiled import Compiler
    from jaxinit.train.step import StepData
    n = n_train or batch_size
    fns = Compiler().fns(("flops", id(model)), model, tuple(input_shape), setting, max(n // batch_size, 1), 1,
                         batch_size, augment, False, precision)
    args = members_lib.member_args([members_lib.Member(0, setting.label, 1.0, 0)], setting, False)
    x = jax.ShapeDtypeStruct((n, *input_shape), np.float32)
    state = jax.eval_shape(fns.init, args, jax.ShapeDtypeStruct((batch_size, *input_shape), np.float32))
    data = StepData(x, jax.ShapeDtypeStruct((n,), np.int32), jax.ShapeDtypeStruct((), np.int32))
    return function_flops(fns.step, state, args, jax.ShapeDtypeStruct((n,), np.int32), data)
