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

# Nominal dense peaks in FLOP/s by device_kind prefix and training precision (`jaxinit.precision`), from the
# vendors' datasheets: bf16 on the bf16 tensor cores, tf32 on the TF32 tensor cores, float32 (matmul
# precision "highest") on the non-tensor float32 units.
NOMINAL_PEAKS = {
    "NVIDIA H200": {"bf16": 989.4e12, "tf32": 494.7e12, "float32": 66.9e12},     # SXM: the H100 SXM's compute
    "NVIDIA H100 80GB HBM3": {"bf16": 989.4e12, "tf32": 494.7e12, "float32": 66.9e12},
    "NVIDIA H100 PCIe": {"bf16": 756.0e12, "tf32": 378.0e12, "float32": 51.2e12},
    "NVIDIA A100": {"bf16": 312.0e12, "tf32": 156.0e12, "float32": 19.5e12},
}
# float32 matmuls and convs run as TF32 on these GPUs under JAX's default precision: the benchmark's ceiling.
NOMINAL_PEAK_FLOPS = {kind: peaks["tf32"] for kind, peaks in NOMINAL_PEAKS.items()}


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


def nominal_peak_flops(device_kind: str, precision: str = "tf32") -> float | None:
    """Nominal dense peak of ``precision`` (see NOMINAL_PEAKS); None where the datasheet number is not known here."""
    for prefix, peaks in NOMINAL_PEAKS.items():
        if device_kind.startswith(prefix):
            return peaks.get(precision)
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

