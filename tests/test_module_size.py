"""No module of the project is longer than 400 lines: a longer one is split into cohesive modules."""
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("jaxinit", "experiments", "theory")
MAX_LINES = 400


def _line_count(path: Path) -> int:
    with open(path, "rb") as f:
        return sum(1 for _ in f)


def test_every_module_is_at_most_400_lines():
    files = sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py") if "__pycache__" not in p.parts)
    assert files, f"no modules found under {', '.join(PACKAGES)} of {ROOT}"
    long = {p.relative_to(ROOT).as_posix(): n for p in files if (n := _line_count(p)) > MAX_LINES}
    assert not long, (f"modules above {MAX_LINES} lines (split them): "
                      + ", ".join(f"{name} ({n} lines)" for name, n in sorted(long.items())))
