"""The device check's words and numbers: one line per record as it arrives, the table at the end, PyTorch's
ratio, the paper table's projection, and the merge of XLA's autotuning dumps. Imports no jax."""
from __future__ import annotations

GIB = 2 ** 30
MS = 1e3


def _f(x, fmt: str = ".1f", scale: float = 1.0) -> str:
    return "-" if x is None else format(x * scale, fmt)


def _calls(calls: dict) -> str:
    short = {k.replace("__cudnn$", "").replace("__cublas$", "cublas:"): n for k, n in (calls or {}).items()}
    return " ".join(f"{k} {n}" for k, n in short.items()) or "none"


def _grads(lowered: dict | None) -> str:
    if not lowered:
        return "-"
    return (f"{lowered['weight_gradient_batch_grouped']}/{lowered['weight_gradient_feature_grouped']} of "
            f"{lowered['weight_gradient']}")


def line(rec: dict) -> str | None:
    """The printed line of one record (None: printed nowhere, kept in accel.jsonl)."""
    name, kind = rec["variant"], rec.get("record")
    if kind == "preflight":
        v = rec.get("versions", {})
        return (f"[{name}] {rec['backend']} {rec['device_kind']} x{rec['devices']}; jax {v.get('jax')} jaxlib "
                f"{v.get('jaxlib')} flax {v.get('flax')} optax {v.get('optax')} numpy {v.get('numpy')}; memory limit "
                f"{_f((rec.get('memory') or {}).get('bytes_limit'), '.1f', 1 / GIB)} GiB; torch "
                f"{'installed' if rec.get('torch_installed') else 'absent'}")
    if kind == "matmul":
        m, nom = rec["measured_flops"], rec["nominal_flops"]
        return f"[{name}] {rec['n']}^3 matmul TFLOP/s measured (nominal): " + ", ".join(
            f"{p} {_f(m[p], '.1f', 1e-12)} ({_f(nom.get(p), '.0f', 1e-12)})" for p in m)
    if kind == "compiled":
        mem = (rec.get("memory") or {}).get("total_bytes")
        cached = " from jax's cache" if rec.get("cache_hit") else ""
        flop = rec.get("member_step_flop")
        return (f"[{name}] compiled in {rec['compile_s']:.1f} s{cached} (lower {rec['lower_s']:.1f}, init "
                f"{rec['init_s']:.1f}); program {_f(mem, '.2f', 1 / GIB)} GiB; weight-grad convs batch/feature-"
                f"grouped {_grads(rec.get('lowered'))}; conv dtypes {(rec.get('lowered') or {}).get('conv_dtypes')}; "
                f"calls {_calls(rec.get('calls'))}; {_f(flop, '.4g', 1e-9)} GFLOP a member step"
                + "".join(f"; {k} failed: {e}" for k, e in (rec.get("errors") or {}).items()))
    if kind == "timed":
        return (f"[{name}] {rec['steps']} steps: median {rec['step_s'] * MS:.2f} ms, min "
                f"{rec['step_s_min'] * MS:.2f} ms, {rec['member_steps_per_s']:.1f} member-steps/s; device peak "
                f"{_f((rec.get('device_memory') or {}).get('peak_bytes_in_use'), '.2f', 1 / GIB)} GiB")
    if kind == "eval":
        return (f"[{name}] eval: {rec['examples']} examples x every member in {rec['pass_s']:.2f} s "
                f"({rec['s_per_example'] * 1e6:.1f} us an example; first call {rec['first_call_s']:.1f} s)")
    if kind == "torch":
        return (f"[{name}] batch {rec['batch']}: median {rec['step_s'] * MS:.2f} ms, min "
                f"{rec['step_s_min'] * MS:.2f} ms ({rec['steps']} steps; warm-up {rec['warmup_s']:.1f} s)")
    if kind in ("skipped", "torch_version"):
        return f"[{name}] " + ", ".join(f"{k} {v}" for k, v in rec.items() if k not in ("variant", "record", "t_s"))
    if kind == "end":
        why = f": {rec.get('error') or rec.get('reason')}" if rec["status"] != "ok" else ""
        took = f" in {rec['wall_s']:.1f} s (limit {rec['limit_s']:.0f} s)" if "wall_s" in rec else ""
        return f"[{name}] {rec['status']}{took}{why}"
    return None


def by_variant(records: list[dict]) -> dict[str, dict]:
    """{variant: its records merged (record kinds as keys)}, in order of appearance."""
    out: dict[str, dict] = {}
    for r in records:
        out.setdefault(r["variant"], {})[r.get("record")] = r
    return out


def rates(v: dict, matmul: dict | None, precision: str) -> tuple[float | None, float | None, float | None]:
    """(achieved FLOP/s, fraction of the nominal peak, fraction of the measured matmul rate) of a variant."""
    c, t = v.get("compiled"), v.get("timed")
    if not c or not t or not c.get("member_step_flop"):
        return None, None, None
    achieved = c["member_step_flop"] * c["members"] / t["step_s"]
    nominal = c.get("nominal_peak_flops")
    measured = (matmul or {}).get("measured_flops", {}).get(precision)
    return achieved, achieved / nominal if nominal else None, achieved / measured if measured else None


def precision_of(name: str) -> str:
    return name.rsplit("-", 1)[-1]


def table(records: list[dict]) -> str:
    """Markdown: one row per training variant (the torch and preflight results follow as lines)."""
    groups = by_variant(records)
    matmul = groups.get("preflight", {}).get("matmul")
    rows = ["| variant | status | compile s | init s | step ms median / min | member-steps/s | TFLOP/s | % nominal "
            "| % measured matmul | program GiB | device peak GiB | weight-grad batch/feature-grouped | calls |",
            "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for name, v in groups.items():
        if name in ("preflight", "torch"):
            continue
        c, t, end = v.get("compiled") or {}, v.get("timed") or {}, v.get("end") or {}
        achieved, nominal, measured = rates(v, matmul, precision_of(name))
        rows.append(" | ".join([
            f"| {name}", end.get("status", "?"), _f(c.get("compile_s")) + (" (cache)" if c.get("cache_hit") else ""),
            _f(c.get("init_s")),
            f"{_f(t.get('step_s'), '.2f', MS)} / {_f(t.get('step_s_min'), '.2f', MS)}", _f(t.get("member_steps_per_s")),
            _f(achieved, ".3g", 1e-12), _f(nominal, ".1f", 100), _f(measured, ".1f", 100),
            _f((c.get("memory") or {}).get("total_bytes"), ".2f", 1 / GIB),
            _f((t.get("device_memory") or {}).get("peak_bytes_in_use"), ".2f", 1 / GIB),
            _grads(c.get("lowered")), _calls(c.get("calls")) + " |"]))
    return "\n".join(rows)


def best(records: list[dict]) -> tuple[str, dict] | None:
    """The timed variant with the smallest median step (any precision)."""
    timed = [(name, v) for name, v in by_variant(records).items() if v.get("timed") and v.get("compiled")]
    return min(timed, key=lambda kv: kv[1]["timed"]["step_s"]) if timed else None


def torch_lines(records: list[dict]) -> list[str]:
    """PyTorch's reference and the ratios of the fastest variant to it (same machine, same run)."""
    groups = by_variant(records)
    runs = [r for r in records if r["variant"] == "torch" and r.get("record") == "torch"]
    top = best(records)
    if len(runs) < 2 or top is None:
        return ["PyTorch reference: none (" + ((groups.get("torch") or {}).get("skipped") or {}).get(
            "reason", "not measured") + ")"]
    one, many = runs[0], runs[1]
    name, v = top
    members = v["compiled"]["members"]
    step = v["timed"]["step_s"]
    return [f"PyTorch: one member (batch {one['batch']}) {one['step_s'] * MS:.2f} ms; all members' batch "
            f"({many['batch']}) {many['step_s'] * MS:.2f} ms",
            f"{name} / {members} PyTorch single-member steps: {step / (members * one['step_s']):.3f}; "
            f"/ PyTorch's {members}x batch: {step / many['step_s']:.3f}"]


def projection_lines(records: list[dict]) -> list[str]:
    """The paper table's hours at the fastest bf16 variant's step and the first variant's evaluation rate."""
    from jaxinit.tools.projection import paper_table, project
    groups = by_variant(records)
    timed = [(n, v) for n, v in groups.items() if v.get("timed") and precision_of(n) == "bf16"]
    if not timed:
        return ["projection: none (no bf16 step was timed)"]
    name, v = min(timed, key=lambda kv: kv[1]["timed"]["step_s"])
    ev = next((g["eval"] for g in groups.values() if g.get("eval")), None)
    p = project(paper_table(), {"step_s": {"sgd": v["timed"]["step_s"]},
                                "eval_s_per_example": ev["s_per_example"] if ev else None})
    parts = ", ".join(f"{k[:-2]} {_f(p[k], '.2f')} h" for k in ("train_h", "eval_h", "compile_h"))
    return [f"projection of the paper table at {name} ({v['timed']['step_s'] * MS:.2f} ms a step): {p['hours']:.2f} h "
            f"({parts}; checkpoints not measured)", "  assumed: " + ("; ".join(p["assumed"]) or "nothing")]


def merge_autotune(old: str, new: str) -> str:
    """XLA autotune results (text protos of ``version: N`` and ``results { ... }`` blocks): ``old``'s blocks,
    then ``new``'s not already present, under one version line."""
    version, blocks = _blocks(old) if old.strip() else (None, [])
    new_version, new_blocks = _blocks(new)
    seen = set(blocks)
    merged = blocks + [b for b in new_blocks if b not in seen]
    head = version or new_version
    return "\n".join(([head] if head else []) + merged) + "\n"


def _blocks(text: str) -> tuple[str | None, list[str]]:
    """(the top-level ``version`` line, each top-level ``results { ... }`` block as text); braces inside
    quoted strings do not count."""
    version, blocks, depth, start, quoted, escaped = None, [], 0, None, False, False
    for i, ch in enumerate(text):
        if quoted:
            escaped, quoted = (not escaped and ch == "\\"), quoted and not (ch == '"' and not escaped)
            continue
        if ch == '"':
            quoted = True
        elif ch == "{":
            if depth == 0:
                start = text.rfind("\n", 0, i) + 1
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0 and start is not None:
                blocks.append(text[start:i + 1].strip())
    for ln in text.splitlines():
        if ln.startswith("version:"):
            version = ln.strip()
    return version, blocks


def summary(records: list[dict]) -> str:
    """Everything printed at the end: the table, PyTorch's ratios, the projection."""
    return "\n".join([table(records), *torch_lines(records), *projection_lines(records)])

