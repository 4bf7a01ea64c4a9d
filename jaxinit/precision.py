"""Numeric precision of training and evaluation as a config choice (`--train.precision`).

- ``float32`` (default): float32 everywhere, matmuls and convolutions at ``jax.default_matmul_precision
  ("highest")``. Set explicitly because the backend's default is not float32 everywhere: on NVIDIA GPUs
  since Ampere, XLA's DEFAULT precision lets float32 dots run in TF32 (10-bit mantissa), and on TPUs in
  bfloat16 passes (JAX docs, "jax.default_matmul_precision" and `jax.lax.Precision`). On a CPU "highest"
  is what XLA computes anyway: the results are those of the code before this option existed.
- ``tf32``: float32 storage, matmuls at ``"tensorfloat32"`` (TF32 tensor cores on GPUs; `lax.Precision.HIGH`,
  which XLA:CPU ignores, so on a CPU it computes what float32 does).
- ``bf16``: mixed precision in the usual recipe (Micikevicius et al. 2018, "Mixed Precision Training";
  flax's `dtype` / `param_dtype` split): parameters, optimizer state, BatchNorm running statistics, the
  loss and the gradients stay float32; inside the forward pass the parameters and inputs are cast to
  bfloat16 and the logits cast back to float32 before the loss. The gradient of a float32 parameter
  through the cast is float32. flax's BatchNorm reduces its batch statistics in float32
  (``force_float32_reductions``), so the running statistics keep their float32 dtype. bfloat16 keeps
  float32's exponent range, so no loss scaling is needed (the same paper; Kalamkar et al. 2019).

`bind` gives a model's functions (init, step, evaluation) for a precision in one call: each bound to the
model that computes in its dtype (`policy_model`) and traced under its matmul precision (`under`). The
choice is part of the compile cache key of `jaxinit.train.compiled.Compiler` and is recorded in run.json
(`record`).
"""
from __future__ import annotations

import functools
from typing import Any, Callable

import jax
import jax.numpy as jnp

from jaxinit.errors import ConfigError

PRECISIONS = ("float32", "tf32", "bf16")
# jax.default_matmul_precision names (JAX docs): what each choice sets around every traced step / eval.
MATMUL_PRECISION = {"float32": "highest", "tf32": "tensorfloat32", "bf16": "default"}
COMPUTE_DTYPE = {"float32": "float32", "tf32": "float32", "bf16": "bfloat16"}


def check_precision(name: str) -> None:
    """One-line `ConfigError` for a value that is not a precision this module knows."""
    if name not in PRECISIONS:
        raise ConfigError(f"--train.precision must be one of {'|'.join(PRECISIONS)}, got {name!r}")


def matmul_precision(name: str) -> str:
    check_precision(name)
    return MATMUL_PRECISION[name]


def under(name: str, fn: Callable) -> Callable:
    """``fn`` traced under the matmul precision of ``name`` (set inside the traced function, so the jitted
    program does not depend on the caller's context)."""
    precision = matmul_precision(name)

    @functools.wraps(fn)
    def wrapped(*args, **kwargs):
        with jax.default_matmul_precision(precision):
            return fn(*args, **kwargs)
    wrapped.__name__ = _name(fn)       # what jax calls the program (run.json's compile list)
    return wrapped


def _name(fn: Callable) -> str:
    while isinstance(fn, functools.partial):
        fn = fn.func
    return getattr(fn, "__name__", "program")


def _to(dtype, tree: Any) -> Any:
    return jax.tree.map(lambda x: x.astype(dtype) if jnp.issubdtype(x.dtype, jnp.floating) else x, tree)


def policy_model(model: Any, name: str) -> Any:
    """The `jaxinit.models.Model` that computes in ``name``'s dtype: unchanged for float32 / tf32; for bf16 an
    ``apply`` that casts parameters and inputs to bfloat16 and the logits back to float32 (the state, BatchNorm
    statistics, is passed through in float32; see the module docstring)."""
    check_precision(name)
    if COMPUTE_DTYPE[name] == "float32":
        return model
    inner = model.apply

    def apply(params, state, x, *, train: bool):
        logits, new_state = inner(_to(jnp.bfloat16, params), state, _to(jnp.bfloat16, x), train=train)
        return logits.astype(jnp.float32), new_state
    return model._replace(apply=apply)


def bind(name: str, model: Any, *fns: Callable) -> tuple[Callable, ...]:
    """Each ``fn(model, *args)`` as ``fn(*args)`` of ``model`` computing in ``name``'s dtype (`policy_model`),
    traced under its matmul precision (`under`)."""
    policy = policy_model(model, name)
    return tuple(under(name, functools.partial(fn, policy)) for fn in fns)


def record(name: str) -> dict:
    """What run.json says about the arithmetic of a run."""
    return {"precision": name, "matmul_precision": matmul_precision(name), "compute_dtype": COMPUTE_DTYPE[name]}
