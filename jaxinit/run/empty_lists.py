"""Empty lists on the command line: ``--phases.names=`` where ``--help`` says what an empty value means.

A tuple field takes an empty value (``--a.b=`` or ``--a.b ""``) when its default is empty or its docstring -- the
line ``--help`` shows -- says what empty means (``"phases trained (empty: every phase of the activation)"``). Any
other tuple field still needs at least one value: the parser refuses the empty one in one line, as before. The
argument parser (tyro) reads no value at all as a parse error, so such items are taken out of the arguments
(`take_empty`) and set on the parsed config afterwards (`apply`).
"""
from __future__ import annotations

import ast
import dataclasses
import functools
import inspect
import textwrap
import typing
from typing import Any


def take_empty(cfg: Any, args: list[str]) -> tuple[list[str], dict[str, tuple]]:
    """(``args`` without the empty values of fields that allow one, {dotted key: ()} for them)."""
    allowed = {key for key, field_cls, name in _tuple_fields(cfg) if _may_be_empty(field_cls, name)}
    left: list[str] = []
    empty: dict[str, tuple] = {}
    i = 0
    while i < len(args):
        item = args[i]
        key, eq, value = item[2:].partition("=") if item.startswith("--") else ("", "", "")
        if key in allowed and eq and not value.strip():
            empty[key] = ()
        elif key in allowed and not eq and i + 1 < len(args) and not args[i + 1].strip():
            empty[key] = ()
            i += 1
        else:
            left.append(item)
        i += 1
    return left, empty


def apply(cfg: Any, values: dict[str, Any]) -> Any:
    """``cfg`` with each dotted key set to its value (frozen dataclasses: replaced along the path)."""
    for key, value in values.items():
        cfg = _replace(cfg, key.split("."), value)
    return cfg


def _replace(cfg: Any, path: list[str], value: Any) -> Any:
    head, *rest = path
    return dataclasses.replace(cfg, **{head: _replace(getattr(cfg, head), rest, value) if rest else value})


def _tuple_fields(cfg: Any, prefix: str = "") -> list[tuple[str, type, str]]:
    """(dotted key, the dataclass that declares it, field name) of every tuple field of the config tree."""
    found = []
    hints = typing.get_type_hints(type(cfg))
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        if dataclasses.is_dataclass(value):
            found += _tuple_fields(value, f"{prefix}{f.name}.")
        elif typing.get_origin(hints.get(f.name)) is tuple:
            found.append((prefix + f.name, type(cfg), f.name))
    return found


def _may_be_empty(cls: type, name: str) -> bool:
    default = next(f for f in dataclasses.fields(cls) if f.name == name).default
    return default == () or "empty" in field_doc(cls, name).lower()


@functools.lru_cache(maxsize=None)
def field_doc(cls: type, name: str) -> str:
    """The docstring under a dataclass field (``x: int = 0`` then ``\"\"\"...\"\"\"``), searched along the class's
    bases; "" where there is none or the source cannot be read."""
    for klass in cls.__mro__:
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError, SyntaxError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for stmt, nxt in zip(body, body[1:]):
            if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name \
                    and isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) \
                    and isinstance(nxt.value.value, str):
                return nxt.value.value
    return ""
