"""The device check's plan: its sizes, its variants in order of promise, and each variant's time limit.

Imports neither jax nor torch: the check's parent process (`jaxinit.tools.accel_runner`) reads it and runs
each variant in a process of its own (`jaxinit.tools.accel_variant`, `jaxinit.tools.accel_torch`).

Order: a preflight (versions, devices, a bf16 matrix product's rate), then the batched step
(`step.batched_train_step`) with lax convolutions in bf16, the same with im2col convolutions, the
sequential loop of the single-member step, PyTorch's ResNet-9 (one member, and a batch as large as all
members), tf32 and float32 of the fastest bf16 variant (the *winner*), and last, if time is left, the vmap
of the single-member step (the gradient inside the vmap) for comparison.
"""
from __future__ import annotations

from typing import NamedTuple


class Plan(NamedTuple):
    """The sizes of one check. ``deadline_s``: the whole check; ``reserve_s``: kept for the table at the end;
    ``min_start_s``: no variant starts with less than this left."""
    name: str
    members: int
    batch_size: int
    width_mult: float
    image_size: int
    n_train: int              # synthetic training examples on the device (batches are drawn from them)
    warmup: int               # untimed steps after the compile
    steps: int                # timed steps (each timed alone); fewer only where a variant's time runs out
    eval_examples: int        # one evaluation pass of every member, for the projection (first variant)
    matmul_n: int             # the preflight's bf16 matrix product: n x n x n
    deadline_s: float
    reserve_s: float
    min_start_s: float
    inject: tuple[str, ...]   # test variants: "hang" (killed at its limit), "crash" (aborts)


class Variant(NamedTuple):
    """One subprocess of the check. ``kind``: preflight | jax | torch | hang | crash."""
    name: str
    kind: str
    timeout_s: float
    strategy: str = "vmap"        # vmap (batched step) | sequential (loop of the single-member step)
    form: str = "sum_grad"        # the batched step's form (`compiled.BATCHED_FORMS`)
    conv_impl: str = "lax"
    precision: str = "bf16"
    evaluate: bool = False        # also time one evaluation pass (for the projection)


FULL = Plan("full", members=24, batch_size=128, width_mult=1.0, image_size=32, n_train=4096, warmup=3, steps=20,
            eval_examples=2000, matmul_n=8192, deadline_s=290.0, reserve_s=5.0, min_start_s=20.0, inject=())
TINY = Plan("tiny", members=3, batch_size=8, width_mult=0.0625, image_size=32, n_train=64, warmup=2, steps=20,
            eval_examples=32, matmul_n=256, deadline_s=600.0, reserve_s=1.0, min_start_s=2.0,
            inject=("hang", "crash"))

# Time limits of the full check (seconds, each also cut to what the deadline leaves): the first compile of
# the batched step autotunes every convolution; later ones find much of that done.
LIMITS = {"preflight": 45.0, "batched-lax-bf16": 120.0, "batched-im2col-bf16": 70.0, "sequential-lax-bf16": 60.0,
          "torch": 60.0, "tf32": 60.0, "float32": 60.0, "vmapgrad-lax-bf16": 120.0, "hang": 3.0, "crash": 30.0}
TINY_LIMITS = {"hang": 3.0}


def limit(plan: Plan, key: str) -> float:
    if plan.name == "tiny":
        return TINY_LIMITS.get(key, 180.0)
    return LIMITS[key]


def jax_variant(plan: Plan, strategy: str, conv_impl: str, precision: str, form: str = "sum_grad",
                evaluate: bool = False, key: str | None = None) -> Variant:
    """A timed training step of the plan's members: name ``<strategy>-<conv>-<precision>``, where the
    strategy is ``batched``, ``sequential`` or ``vmapgrad``."""
    label = "vmapgrad" if form == "vmap_grad" else ("batched" if strategy == "vmap" else strategy)
    name = f"{label}-{conv_impl}-{precision}"
    return Variant(name, "jax", limit(plan, key or name), strategy, form, conv_impl, precision, evaluate)


def first_variants(plan: Plan) -> list[Variant]:
    """Preflight, the three bf16 candidates (the first also evaluates), the injected test variants after the
    first candidate (so that later ones show the check survives them), then PyTorch's reference."""
    out = [Variant("preflight", "preflight", limit(plan, "preflight")),
           jax_variant(plan, "vmap", "lax", "bf16", evaluate=True)]
    out += [Variant(name, name, limit(plan, name)) for name in plan.inject]
    out += [jax_variant(plan, "vmap", "im2col", "bf16"), jax_variant(plan, "sequential", "lax", "bf16"),
            Variant("torch", "torch", limit(plan, "torch"))]
    return out


def later_variants(plan: Plan, winner: Variant) -> list[Variant]:
    """tf32 and float32 of the winner, then the vmap of the single-member gradient (bf16, lax)."""
    out = [jax_variant(plan, winner.strategy, winner.conv_impl, p, winner.form, key=p) for p in ("tf32", "float32")]
    return out + [jax_variant(plan, "vmap", "lax", "bf16", form="vmap_grad")]


def winner(variants: list[Variant], step_s: dict[str, float]) -> Variant:
    """The bf16 jax variant with the smallest measured step (the first candidate where none was measured)."""
    candidates = [v for v in variants if v.kind == "jax" and v.precision == "bf16" and v.form == "sum_grad"]
    timed = [v for v in candidates if step_s.get(v.name) is not None]
    return min(timed, key=lambda v: step_s[v.name]) if timed else candidates[0]
