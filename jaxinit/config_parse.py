"""Text in, config out: the command line's dotted overrides (tyro) and a saved config.json (`from_dict`).

Command lines are parsed by tyro over the frozen config dataclasses of `jaxinit.config`, with a few
conventions the project fixed before tyro: `--a.b=value` and `--a.b value` both work, tuples are
comma-separated (`--sweep.sigma_w=0.5,1,2`), booleans take `true/false/1/0/yes/no`, optional values take
`none`. A field typed ``Literal[...]`` (or a tuple of them) takes one of its choices, which ``--help``
shows. Anything unknown or unparsable raises `ConfigError`, which the entrypoints turn into one line +
exit status 2. tyro is imported on first use: only the command line needs it, never training.

Import these names from `jaxinit.config` (which re-exports them); this module holds them so that the
configs themselves stay short.
"""
from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import math
import os
import re
import sys
import types
import typing
from typing import Any, Literal

from jaxinit.config import ConfigError, check_values

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off"}


def choices(typ: Any) -> tuple | None:
    """The allowed values of a ``Literal[...]`` annotation; None for any other."""
    return typing.get_args(typ) if typing.get_origin(typ) is Literal else None


def _scalar(typ: Any, text: str) -> Any:
    """One scalar from text by type; NaN is never a valid value."""
    text = text.strip()
    allowed = choices(typ)
    if allowed is not None:
        if text not in allowed:
            raise ValueError(f"expected one of {'|'.join(allowed)}, got {text!r}")
        return text
    if typ is bool:
        low = text.lower()
        if low not in _TRUE | _FALSE:
            raise ValueError(f"expected true or false, got {text!r}")
        return low in _TRUE
    if typ is float:
        value = float(text)
        if math.isnan(value):
            raise ValueError("NaN is not a valid value")
        return value
    return typ(text)


def _metavar(typ: Any) -> str:
    allowed = choices(typ)
    return "{" + ",".join(allowed) + "}" if allowed is not None else typ.__name__.upper()


def _registry():
    """tyro constructor rules for the project's spellings of bools, optionals and tuples."""
    import tyro
    from tyro.constructors import PrimitiveConstructorSpec

    registry = tyro.constructors.ConstructorRegistry()

    def spec(metavar, parse, is_instance, show):
        return PrimitiveConstructorSpec(nargs=1, metavar=metavar, instance_from_str=lambda parts: parse(parts[0]),
                                        is_instance=is_instance, str_from_instance=lambda v: [show(v)])

    @registry.primitive_rule
    def rules(info):
        t, origin, args = info.type, typing.get_origin(info.type), typing.get_args(info.type)
        if t is bool:
            return spec("true|false", lambda s: _scalar(bool, s), lambda v: isinstance(v, bool), lambda v: str(v).lower())
        if origin in (typing.Union, types.UnionType) and len(args) == 2 and type(None) in args:
            inner = next(a for a in args if a is not type(None))
            parse = lambda s: None if s.strip().lower() in ("none", "null", "") else _scalar(inner, s)
            return spec(f"{_metavar(inner)}|none", parse, lambda v: v is None or _is(inner, v),
                        lambda v: "none" if v is None else str(v))
        if origin is tuple and len(args) == 2 and args[1] is Ellipsis:
            inner = args[0]

            def parse(s):
                items = [p for p in s.split(",") if p.strip()]
                if not items:
                    raise ValueError(f"expected a comma-separated list, got {s!r}")
                return tuple(_scalar(inner, p) for p in items)
            return spec(f"{_metavar(inner)},...", parse, lambda v: isinstance(v, tuple),
                        lambda v: ",".join(str(x) for x in v))
        return None
    return registry


def _is(typ: Any, value: Any) -> bool:
    allowed = choices(typ)
    return value in allowed if allowed is not None else isinstance(value, typ)


def _condense(text: str) -> str:
    """tyro's boxed error as one line: the box's first section, frame characters and title removed. The box
    is drawn in UTF-8 (title inside the top border) or, when stdout's encoding is not exactly "utf-8" (a
    pipe, pytest's capture), in ASCII (title on a line of its own above a line of dashes)."""
    raw = [ln for ln in text.splitlines() if ln.strip()]
    sections: list[list[str]] = [[]]
    for line in raw:
        s = line.strip().strip("│╭╮╰╯").strip()
        if not s or s.startswith("─") or set(s) <= {"-", " "}:
            sections.append([])
        elif s:
            sections[-1].append(s)
    sections = [sec for sec in sections if sec]
    if raw and not raw[0].lstrip().startswith("╭") and len(sections) > 1:
        sections = sections[1:]               # the ASCII box's title
    return " ".join(sections[0]) if sections else "could not parse the command line"


def _tyro():
    """tyro, imported on first use: only the command line's overrides need it, never training."""
    try:
        import tyro
    except ImportError:
        raise ConfigError("the package tyro is not installed and the command line needs it for --help and "
                          "--a.b=value overrides: pip install tyro") from None
    return tyro


def _cli(cfg: Any, args: list[str], prog: str, description: str | None = None) -> Any:
    tyro = _tyro()
    return tyro.cli(type(cfg), default=cfg, args=args, prog=prog, description=description, use_underscores=True,
                    registry=_registry(), config=(tyro.conf.FlagConversionOff,))


def parse_overrides(cfg: Any, args: list[str], prog: str = "jaxinit", description: str | None = None) -> Any:
    """``cfg`` with the dotted overrides in ``args`` applied (tyro, project spellings).

    ``--help`` in ``args`` prints every field with its default (from ``cfg``) and raises SystemExit(0).
    Any parse error raises `ConfigError` with one line. Without ``args`` tyro is not needed (the
    preset as it is); with them and without tyro installed, one line says how to install it.
    """
    if not args:
        check_values(cfg)
        return cfg
    if "-h" in args or "--help" in args:
        _cli(cfg, ["--help"], prog, description)
    err = io.StringIO()
    old_columns = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "1000"   # one rendered line per message, so it condenses to one line
    try:
        with contextlib.redirect_stderr(err):
            parsed = _cli(cfg, list(args), prog)
    except SystemExit as exit_:
        if exit_.code in (0, None):
            raise
        raise ConfigError(_condense(err.getvalue())) from None
    finally:
        if old_columns is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = old_columns
    check_values(parsed)
    return parsed


class _Capture(io.StringIO):
    """Collects what tyro prints, rendered as it would be on the real stdout (its encoding picks the box
    characters, being a terminal turns colours on)."""

    def __init__(self, target):
        super().__init__()
        self._target = target

    @property
    def encoding(self):
        return getattr(self._target, "encoding", "utf-8")

    def isatty(self) -> bool:
        return self._target.isatty()


_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def fields_help(cfg: Any, prog: str = "jaxinit") -> str:
    """tyro's ``--help`` of ``cfg``'s fields (defaults from ``cfg``) without its usage line: the
    entrypoints print their own usage, which knows the fixed flags (`jaxinit.cli`)."""
    capture = _Capture(sys.stdout)
    try:
        with contextlib.redirect_stdout(capture):
            _cli(cfg, ["--help"], prog)
    except SystemExit:
        pass
    lines = capture.getvalue().splitlines()
    start = next((i for i, ln in enumerate(lines) if _ANSI.sub("", ln).lstrip().startswith("usage:")), None)
    if start is not None:                     # the usage (it may wrap) and the blank line after it
        end = next((i for i in range(start, len(lines)) if not lines[i].strip()), len(lines))
        lines = lines[:start] + lines[end + 1:]
    return "\n".join(lines)


def apply_overrides(cfg: Any, overrides: list[str]) -> Any:
    """Return ``cfg`` with each ``--a.b=value`` (leading ``--`` optional) applied. Unknown keys raise."""
    args = [f"--{o}" if not o.startswith("-") and "." in o.split("=", 1)[0] and "=" in o else o for o in overrides]
    return parse_overrides(cfg, args) if args else cfg


# --------------------------------------------------------------------------- config.json
def from_dict(cls: type, data: dict, prefix: str = "") -> Any:
    """Inverse of `to_dict` for nested frozen dataclasses (used by --resume). Missing keys take the
    class defaults (configs saved before a field existed); unknown keys, values whose JSON type is
    not the field's (a hand-edited ``"epochs": "3"``) and strings outside a field's choices raise
    `ConfigError` naming the dotted key."""
    if not isinstance(data, dict):
        raise ConfigError(f"config.json: expected an object for {prefix[:-1] or cls.__name__}, got {_shown(data)}")
    types_ = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    kwargs = {}
    for name, value in data.items():
        key = f"{prefix}{name}"
        if name not in names:
            if _retired(key, value):
                continue      # a run made before the field moved out of this config (jaxinit.runinfo.RETIRED)
            raise ConfigError(f"config.json: unknown key {key!r}")
        kwargs[name] = _typed(key, types_[name], value)
    cfg = cls(**kwargs)
    if not prefix:
        check_values(cfg)
    return cfg


def _retired(key: str, value: Any) -> bool:
    from jaxinit.runinfo import RETIRED
    return tuple(key.split(".")) in RETIRED and value == RETIRED[tuple(key.split("."))] and type(value) is bool


_KINDS = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}


def _typed(key: str, typ: Any, value: Any) -> Any:
    """``value`` (from JSON) as annotation ``typ`` wants it; anything else is a `ConfigError`."""
    origin, args = typing.get_origin(typ), typing.get_args(typ)
    if dataclasses.is_dataclass(typ):
        return from_dict(typ, value, f"{key}.")
    if origin in (typing.Union, types.UnionType) and type(None) in args:
        inner = [a for a in args if a is not type(None)]
        return None if value is None else _typed(key, inner[0], value)
    if origin is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"config.json: {key} must be a list, got {_shown(value)}; correct the file")
        return tuple(_typed(f"{key}[{i}]", args[0], v) for i, v in enumerate(value))
    if origin is Literal:
        if not isinstance(value, str) or value not in args:
            raise ConfigError(f"config.json: {key} must be one of {'|'.join(args)}, got {_shown(value)}; "
                              f"correct the file")
        return value
    ok = {bool: lambda v: isinstance(v, bool),
          int: lambda v: isinstance(v, int) and not isinstance(v, bool),
          float: lambda v: isinstance(v, (int, float)) and not isinstance(v, bool),
          str: lambda v: isinstance(v, str)}.get(typ)
    if ok is None:
        return value
    if not ok(value):
        raise ConfigError(f"config.json: {key} must be {_KINDS[typ]}, got {_shown(value)}; correct the file")
    return float(value) if typ is float else value


def _shown(value: Any) -> str:
    text = json.dumps(value) if isinstance(value, (str, list, dict)) else repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


__all__ = ["parse_overrides", "apply_overrides", "fields_help", "from_dict", "choices"]
