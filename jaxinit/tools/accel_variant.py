"""One variant of the device check, in a process of its own: ``python -m jaxinit.tools.accel_variant SPEC``.

SPEC is the JSON the parent (`jaxinit.tools.accel_runner`) writes: ``{"plan": ..., "variant": ...,
"deadline_at": unix time}``. Every result is one line ``@accel {json}`` on stdout, printed and flushed as
soon as it is known, so that what a process measured survives its being killed: a ``compiled`` line
(compile seconds, the program's memory, its convolutions' grouping and dtypes from the lowered text, the
library calls they became in the compiled text, the model's FLOPs), then a ``timed`` line (median and
minimum of single timed steps after a warm-up, the device's peak memory), and for the first variant an
``eval`` line (one evaluation pass of every member).

The training step is the library's: `compiled.Compiler.fns` (the engine's jitted functions) over the
`paper` preset's sgd setting and sigma_w grid, ResNet-9, crop + flip augmentation, on a synthetic
on-device training set; the step is lowered and compiled ahead of time, and the executable it gives is
the one timed.
"""
from __future__ import annotations

import json
import os
import sys
import time

from jaxinit.tools.accel_plan import Plan, Variant

PREFIX = "@accel "


def emit(record: dict) -> None:
    print(PREFIX + json.dumps(record, allow_nan=False, default=str), flush=True)


def _median(xs: list[float]) -> float:
    s = sorted(xs)
    return s[len(s) // 2] if len(s) % 2 else 0.5 * (s[len(s) // 2 - 1] + s[len(s) // 2])


def device_memory() -> dict | None:
    """Bytes in use, the peak and the limit where the backend keeps them (GPU); None on a CPU."""
    import jax
    try:
        stats = jax.devices()[0].memory_stats() or {}
    except Exception:
        return None
    keep = ("peak_bytes_in_use", "bytes_in_use", "bytes_limit")
    return {k: int(stats[k]) for k in keep if k in stats} or None


def program_memory(compiled) -> dict | None:
    try:
        m = compiled.memory_analysis()
    except Exception:
        return None
    if m is None:
        return None
    get = lambda name: int(getattr(m, name, 0) or 0)
    return {"argument_bytes": get("argument_size_in_bytes"), "temp_bytes": get("temp_size_in_bytes"),
            "total_bytes": get("argument_size_in_bytes") + get("output_size_in_bytes")
            - get("alias_size_in_bytes") + get("temp_size_in_bytes")}


# --------------------------------------------------------------------------- preflight
def matmul_rate(n: int, dtype: str, precision: str, repeats: int = 10) -> float:
    """FLOP/s of one jitted n x n x n product (2 n^3 FLOP), median of ``repeats`` after a warm-up."""
    import jax
    import jax.numpy as jnp
    a = jax.random.normal(jax.random.key(0), (n, n), jnp.float32).astype(dtype)
    f = jax.jit(lambda x, y: jnp.matmul(x, y, precision=precision))
    f(a, a).block_until_ready()
    times = []
    for _ in range(repeats):
        t = time.perf_counter()
        f(a, a).block_until_ready()
        times.append(time.perf_counter() - t)
    return 2.0 * n ** 3 / _median(times)


def preflight(plan: Plan) -> None:
    import importlib.util
    import platform
    from importlib import metadata

    import jax
    versions = {"python": platform.python_version()}
    for name in ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy"):
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    dev = jax.devices()[0]
    emit({"record": "preflight", "backend": jax.default_backend(), "device_kind": dev.device_kind,
          "devices": jax.device_count(), "versions": versions, "memory": device_memory(),
          "torch_installed": importlib.util.find_spec("torch") is not None,
          "xla_flags": os.environ.get("XLA_FLAGS", "")})
    rates = {p: matmul_rate(plan.matmul_n, dt, mp) for p, dt, mp in
             (("bf16", "bfloat16", "default"), ("tf32", "float32", "tensorfloat32"), ("float32", "float32", "highest"))}
    from jaxinit.tools.machine import nominal_peak_flops
    emit({"record": "matmul", "n": plan.matmul_n, "measured_flops": rates,
          "nominal_flops": {p: nominal_peak_flops(dev.device_kind, p) for p in rates}})


# --------------------------------------------------------------------------- a timed training step
class Setup:
    """The variant's members, their chunks and compiled functions, the data, the initial states."""

    def __init__(self, plan: Plan, v: Variant):
        import jax
        import numpy as np
        from jaxinit.config import ModelConfig
        from jaxinit.forgetting.config import PAPER
        from jaxinit.models import make_model
        from jaxinit.optim import resolve_setting
        from jaxinit.train import members as M
        from jaxinit.train.compiled import Compiler
        self.shape = (plan.image_size, plan.image_size, 3)
        self.model = make_model(ModelConfig(name="resnet9", width_mult=plan.width_mult, conv_impl=v.conv_impl),
                                self.shape, 10)
        self.setting = resolve_setting("sgd", PAPER.opt)
        seeds = max(1, plan.members // len(PAPER.sweep.sigma_w))
        self.members = M.make_members(("sgd",), PAPER.sweep.sigma_w[: plan.members // seeds], seeds)
        self.steps_per_epoch = plan.n_train // plan.batch_size
        compiler = Compiler()
        make = lambda batched: compiler.fns(("resnet9", plan.width_mult, v.conv_impl), self.model, self.shape,
                                            self.setting, self.steps_per_epoch, PAPER.train.epochs, plan.batch_size,
                                            True, batched, v.precision, batched_form=v.form)
        size = len(self.members) if v.strategy == "vmap" else 1
        self.chunks = M.split_chunks(self.members, size, self.setting, make)
        kx, ky = jax.random.split(jax.random.key(0))
        self.x = jax.random.normal(kx, (plan.n_train, *self.shape), np.float32)
        self.y = jax.random.randint(ky, (plan.n_train,), 0, 10, np.int32)
        t = time.perf_counter()
        self.states = [c.fns.init(c.args, self.x[: plan.batch_size]) for c in self.chunks]
        self.orders = [c.fns.order(c.args.seed, np.int32(1), plan.n_train) for c in self.chunks]
        jax.block_until_ready((self.states, self.orders))
        self.init_s = time.perf_counter() - t

    def data(self, i: int):
        import numpy as np
        from jaxinit.train.step import StepData
        return StepData(self.x, self.y, np.int32(i % self.steps_per_epoch))


def compile_step(setup: Setup, v: Variant, plan: Plan):
    """(executable, the ``compiled`` record): the step lowered and compiled ahead of time, read."""
    import jax
    from jaxinit.tools import flops, hlo
    from jaxinit.tools.machine import nominal_peak_flops
    from jaxinit.train.timing import Compiles
    chunk = setup.chunks[0]
    t = time.perf_counter()
    lowered = chunk.fns.step.lower(setup.states[0], chunk.args, setup.orders[0], setup.data(0))
    lower_s = time.perf_counter() - t
    heard = Compiles()
    t = time.perf_counter()
    compiled = lowered.compile()
    compile_s = time.perf_counter() - t
    heard.stop()
    errors = {}
    member = guarded(errors, "flops", lambda: flops.member_step_flops(
        setup.model, setup.setting, setup.shape, plan.batch_size, True, v.precision, plan.n_train)["flops"])
    kind = jax.devices()[0].device_kind
    return compiled, {"record": "compiled", "lower_s": lower_s, "compile_s": compile_s, "init_s": setup.init_s,
                      "cache_hit": heard.cache_hits > 0,
                      "members": len(setup.members), "chunks": len(setup.chunks), "memory": program_memory(compiled),
                      "lowered": guarded(errors, "lowered", lambda: hlo.conv_report(lowered.as_text())),
                      "calls": guarded(errors, "calls", lambda: hlo.library_calls(compiled.as_text())),
                      "member_step_flop": member, "nominal_peak_flops": nominal_peak_flops(kind, v.precision),
                      "errors": errors}


def guarded(errors: dict, what: str, fn):
    """``fn()``, or None with its error kept in ``errors``: a reading that fails costs itself, not the timing."""
    try:
        return fn()
    except Exception as err:                     # noqa: BLE001 -- any failure of a reading, recorded
        errors[what] = f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"
        return None


def time_steps(setup: Setup, compiled, plan: Plan, deadline_at: float) -> dict:
    """Warm-up, then up to ``plan.steps`` steps of every chunk, each step timed alone (blocked on); stops early,
    keeping what it timed, where the deadline would pass."""
    import jax
    args = [c.args for c in setup.chunks]
    states = setup.states
    for i in range(plan.warmup):
        states = [compiled(s, a, o, setup.data(i))[0] for s, a, o in zip(states, args, setup.orders)]
    jax.block_until_ready(states)
    times = []
    for i in range(plan.steps):
        if times and time.time() + 2 * max(times) > deadline_at:
            break
        t = time.perf_counter()
        states = [compiled(s, a, o, setup.data(plan.warmup + i))[0] for s, a, o in zip(states, args, setup.orders)]
        jax.block_until_ready(states)
        times.append(time.perf_counter() - t)
    setup.states = states
    n = len(setup.members)
    return {"record": "timed", "steps": len(times), "steps_asked": plan.steps, "step_s": _median(times),
            "step_s_min": min(times), "step_s_mean": sum(times) / len(times), "member_steps_per_s": n / _median(times),
            "device_memory": device_memory()}


def time_eval(setup: Setup, plan: Plan) -> dict:
    """One pass of every member over ``plan.eval_examples`` examples in batches of the paper's eval batch."""
    import jax
    import jax.numpy as jnp
    from jaxinit.forgetting.config import PAPER
    from jaxinit.train.step import EvalBatch
    n = min(plan.eval_examples, plan.n_train)
    b = min(PAPER.train.eval_batch_size, n)
    lanes = list(zip(setup.chunks, setup.states))
    batches = [EvalBatch(setup.x[s:s + b], setup.y[s:s + b], jnp.ones((b,), bool)) for s in range(0, n - b + 1, b)]
    t = time.perf_counter()
    jax.block_until_ready(lanes[0][0].fns.eval(lanes[0][1], batches[0]))
    first_s = time.perf_counter() - t
    t = time.perf_counter()
    jax.block_until_ready([c.fns.eval(s, e) for c, s in lanes for e in batches])
    seconds = time.perf_counter() - t
    examples = b * len(batches)
    return {"record": "eval", "examples": examples, "eval_batch": b, "first_call_s": first_s, "pass_s": seconds,
            "s_per_example": seconds / examples}


def measure(plan: Plan, v: Variant, deadline_at: float) -> None:
    setup = Setup(plan, v)
    compiled, record = compile_step(setup, v, plan)
    emit(record)
    emit(time_steps(setup, compiled, plan, deadline_at))
    if v.evaluate and time.time() < deadline_at - 5:
        emit(time_eval(setup, plan))


def main(argv: list[str]) -> int:
    spec = json.loads(argv[0])
    plan, v = Plan(**{k: tuple(x) if isinstance(x, list) else x for k, x in spec["plan"].items()}), \
        Variant(**spec["variant"])
    if v.kind == "hang":                 # a helper process too: the limit must end the whole group
        import subprocess
        helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(1e6)"])
        emit({"record": "started", "pid": os.getpid(), "helper_pid": helper.pid})
        time.sleep(1e6)
    emit({"record": "started", "pid": os.getpid()})
    if v.kind == "crash":
        os.abort()
    from jaxinit import compile_cache
    compile_cache.enable()
    if v.kind == "preflight":
        preflight(plan)
    else:
        measure(plan, v, float(spec["deadline_at"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
