"""The machine a benchmark ran on: platform, device kind, CPU model and its nominal peak FLOP/s.

Achieved FLOP/s mean little without the machine's ceiling, so every benchmark line carries
`peak_flops`: the datasheet dense TF32 peak for known accelerators (`NOMINAL_PEAK_FLOPS`), or for a CPU
an estimate from /proc/cpuinfo (cores x clock x FMA width from the vector flags,
`cpu_nominal_peak_flops`). Unknown machines give None, never a guess.
"""
from __future__ import annotations

import platform as _platform
from pathlib import Path

import jax

# Nominal dense peaks in FLOP/s by device_kind prefix. float32 matmuls and convs run as TF32 on these
# GPUs under JAX's default precision, so the TF32 tensor-core figure is the ceiling that applies.
NOMINAL_PEAK_FLOPS = {
    "NVIDIA H200": 494.7e12,          # same SXM compute as the H100 (datasheet)
    "NVIDIA H100 80GB HBM3": 494.7e12,  # SXM
    "NVIDIA H100 PCIe": 378.0e12,
    "NVIDIA A100": 156.0e12,
}


def machine_info() -> dict:
    dev = jax.devices()[0]
    kind = dev.device_kind
    if jax.default_backend() == "cpu":
        peak, note = cpu_nominal_peak_flops(_read_cpuinfo(), _cpu_count())
    else:
        peak, note = nominal_peak_flops(kind), "nominal dense TF32 tensor-core peak (datasheet); null = unknown"
    return {"platform": jax.default_backend(), "device_kind": kind, "n_devices": jax.device_count(),
            "peak_flops": peak, "peak_flops_note": note, "cpu": _cpu_model(), "cpu_count": _cpu_count(),
            "jax": jax.__version__, "python": _platform.python_version()}


def _read_cpuinfo() -> str:
    try:
        return Path("/proc/cpuinfo").read_text()
    except OSError:
        return ""


def cpu_nominal_peak_flops(cpuinfo: str, n_cpus: int) -> tuple[float | None, str]:
    """Nominal float32 peak of the CPUs we may run on: n_cpus x clock x FLOP per cycle per core.

    FLOP per cycle from the vector units the flags announce: 32 with AVX2 + FMA (two 256-bit FMA pipes x
    8 lanes x 2 FLOP; also AMD Zen 4, which runs AVX-512 as two 256-bit halves), 64 for Intel cores with
    AVX-512 (two 512-bit FMA ports on server parts), 8 otherwise (SSE). The clock is /proc/cpuinfo's
    "cpu MHz" (the current clock, not the boost one). An estimate: a vCPU may be an SMT sibling sharing
    its core's pipes, which halves the real ceiling.
    """
    fields = {}
    for line in cpuinfo.splitlines():
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
    try:
        mhz = float(fields.get("cpu MHz", ""))
    except ValueError:
        return None, "CPU clock unknown (/proc/cpuinfo has no cpu MHz)"
    flags = set(fields.get("flags", "").split())
    if "avx512f" in flags and fields.get("vendor_id") == "GenuineIntel":
        per_cycle = 64
    elif {"avx2", "fma"} <= flags:
        per_cycle = 32
    else:
        per_cycle = 8
    peak = n_cpus * mhz * 1e6 * per_cycle
    return peak, f"estimated: {n_cpus} CPUs x {mhz:.0f} MHz x {per_cycle} FP32 FLOP/cycle (vector-unit flags)"


def nominal_peak_flops(device_kind: str) -> float | None:
    """Nominal dense peak (see NOMINAL_PEAK_FLOPS); None where the datasheet number is not known here."""
    for prefix, peak in NOMINAL_PEAK_FLOPS.items():
        if device_kind.startswith(prefix):
            return peak
    return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return _platform.processor() or "unknown"


def _cpu_count() -> int:
    import os
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


# --------------------------------------------------------------------------- compile clock
