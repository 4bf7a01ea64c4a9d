"""What a program's text says about its convolutions and matrix products: grouping, dtypes, library calls.

`convolutions` reads the StableHLO a jitted function lowers to (``fn.lower(...).as_text()``: what every
backend's compiler receives); `library_calls` reads a compiled program (``.compile().as_text()``), where
an NVIDIA GPU's convolutions and matrix products have become cuDNN / cuBLAS custom calls.

A *weight-gradient* convolution is one whose kernel operand is spatially larger than its output: the
activations are convolved with the output gradient, and the result is kernel-sized. (For this to
tell the forward and input-gradient convolutions of 3 x 3 kernels apart, every feature map must be
larger than 3 x 3.)
"""
from __future__ import annotations

import collections
import re
from typing import NamedTuple

_CONV = re.compile(r"stablehlo\.convolution\(.*dim_numbers = \[([^\]]*)\]x\[([^\]]*)\]->\[([^\]]*)\].*"
                   r"batch_group_count = (\d+).*feature_group_count = (\d+).*"
                   r":\s*\(tensor<([^>]*)>,\s*tensor<([^>]*)>\)\s*->\s*tensor<([^>]*)>")
_DOT = re.compile(r"stablehlo\.dot_general.*:\s*\(tensor<([^>]*)>,\s*tensor<([^>]*)>\)\s*->\s*tensor<([^>]*)>")
_CALL = re.compile(r'custom_call_target="([^"]+)"')


class Conv(NamedTuple):
    lhs: tuple[int, ...]
    rhs: tuple[int, ...]
    out: tuple[int, ...]
    dtype: str                  # the lhs element type (f32, bf16, ...)
    feature_group_count: int
    batch_group_count: int
    weight_gradient: bool


def _tensor(text: str) -> tuple[tuple[int, ...], str]:
    *dims, dtype = text.split("x")
    return tuple(int(d) for d in dims), dtype


def _spatial(spec: str, shape: tuple[int, ...]) -> tuple[int, ...]:
    labels = [s.strip() for s in spec.split(",")]
    return tuple(shape[i] for i, label in enumerate(labels) if label.isdigit())


def convolutions(stablehlo: str) -> list[Conv]:
    """Every ``stablehlo.convolution`` of a lowered program, in program order."""
    out = []
    for m in _CONV.finditer(stablehlo):
        lhs_spec, rhs_spec, out_spec, bgc, fgc, lhs_t, rhs_t, out_t = m.groups()
        (lhs, dtype), (rhs, _), (res, _) = _tensor(lhs_t), _tensor(rhs_t), _tensor(out_t)
        window, result = _spatial(rhs_spec, rhs), _spatial(out_spec, res)
        grad = all(w > r for w, r in zip(window, result)) and bool(window)
        out.append(Conv(lhs, rhs, res, dtype, int(fgc), int(bgc), grad))
    return out


def dot_dtypes(stablehlo: str) -> list[str]:
    """The lhs element type of every ``stablehlo.dot_general``."""
    return [_tensor(m.group(1))[1] for m in _DOT.finditer(stablehlo)]


def conv_report(stablehlo: str) -> dict:
    """Counts a device check prints: convolutions by kind and grouping, their dtypes and the dots'."""
    convs = convolutions(stablehlo)
    grads = [c for c in convs if c.weight_gradient]
    return {"convolutions": len(convs), "weight_gradient": len(grads),
            "weight_gradient_feature_grouped": sum(c.feature_group_count > 1 for c in grads),
            "weight_gradient_batch_grouped": sum(c.batch_group_count > 1 for c in grads),
            "conv_dtypes": dict(collections.Counter(c.dtype for c in convs)),
            "dot_dtypes": dict(collections.Counter(dot_dtypes(stablehlo)))}


def library_calls(compiled_hlo: str) -> dict[str, int]:
    """Custom-call targets of a compiled program and how often each occurs (``__cudnn$convForward``,
    ``__cudnn$convBackwardFilter``, ``__cublas$gemm``, ...); empty where nothing became a library call."""
    return dict(sorted(collections.Counter(_CALL.findall(compiled_hlo)).items()))
