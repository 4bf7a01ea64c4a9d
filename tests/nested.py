"""Comparing nested JSON values (summaries, metrics rows) across runs that may differ in float order only."""
import pytest


def assert_close(a, b, path: str = "", rel: float = 1e-5, abs_: float = 1e-7) -> None:
    """Equal structure, ints, bools and strings; floats to ``rel`` / ``abs_`` (float32 accumulation order,
    another partition of the program, another machine's float code); ``path`` names the first difference."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), path
        for k in a:
            assert_close(a[k], b[k], f"{path}.{k}", rel, abs_)
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), path
        for i, (x, y) in enumerate(zip(a, b)):
            assert_close(x, y, f"{path}[{i}]", rel, abs_)
    elif isinstance(a, float) and isinstance(b, float):
        assert a == pytest.approx(b, rel=rel, abs=abs_), path
    else:
        assert a == b, path
