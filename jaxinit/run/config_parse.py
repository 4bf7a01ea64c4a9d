"""Text in, config out: the command line's dotted overrides (tyro), the same from Python (`override`), and a
saved config.json (`from_dict`).

Command lines are parsed by tyro over the frozen config dataclasses of `jaxinit.config`, with a few
conventions the project fixed before tyro: `--a.b=value` and `--a.b value` both work, tuples are
comma-separated (`--sweep.sigma_w=0.5,1,2`), booleans take `true/false/1/0/yes/no`, optional values take
`none`. A field typed ``Literal[...]`` (or a tuple of them) takes one of its choices, which ``--help``
shows. Anything unknown or unparsable raises `ConfigError`, which the entrypoints turn into one line +
exit status 2; a misspelt key keeps tyro's suggestion (``--train.epoch=3``: "did you mean --train.epochs?").
tyro is imported on first use: only the command line needs it, never training.

From Python (notebooks), `override` takes the same overrides as the command line, checked alike:

    cfg = override(forgetting.preset("smoke"), "train.epochs=3", "sweep.sigma_w=0.5,1,2")
    cfg = override(cfg, {"train.epochs": 3, "sweep.sigma_w": (0.5, 1.0, 2.0), "opt.lr": None})

Saved configs: `from_dict` reads config.json back; `comparable` is a config dict as fingerprints and
same-config comparisons see it (`ADDED_DEFAULTS` fields at their default left out, `RETIRED` fields put
back), so a run made before a field was added or removed continues.
"""
from __future__ import annotations

import contextlib
import dataclasses
import difflib
import io
import json
import math
import os
import re
import sys
import types
import typing
from typing import Any, Literal, Mapping

from jaxinit.config import check_values
from jaxinit.errors import ConfigError

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
    """tyro's boxed error as one line: the box's first section, frame characters and title removed, and the
    flags of its "Perhaps you meant" section (a misspelt key) kept as "did you mean ...?". The box is drawn in
    UTF-8 (title inside the top border) or, when stdout's encoding is not exactly "utf-8" (a pipe, pytest's
    capture), in ASCII (title on a line of its own above a line of dashes)."""
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
    if not sections:
        return "could not parse the command line"
    return " ".join(sections[0]) + _suggested(sections[1:])


def _suggested(sections: list[list[str]]) -> str:
    """"; did you mean --a.b?" from tyro's "Perhaps you meant:" section (its flags, each on a line of its own
    followed by its help), or "" without one."""
    for sec in sections:
        if sec[0].lower().startswith("perhaps you meant"):
            flags = list(dict.fromkeys(line.split()[0] for line in sec[1:] if line.startswith("--")))
            if flags:
                return f"; did you mean {' or '.join(flags[:3])}?"
    return ""


def dotted_keys(cfg: Any, prefix: str = "") -> list[str]:
    """Every field of a config tree as its command-line key (``train.epochs``)."""
    keys = []
    for f in dataclasses.fields(cfg):
        value = getattr(cfg, f.name)
        keys += dotted_keys(value, f"{prefix}{f.name}.") if dataclasses.is_dataclass(value) else [prefix + f.name]
    return keys


def close_keys(cfg: Any, key: str) -> list[str]:
    """Config keys close to a mistyped ``key`` (``epochs`` -> ``train.epochs``), best first, at most three."""
    keys = dotted_keys(cfg)
    by_last = {k.rsplit(".", 1)[-1]: k for k in keys}
    near = difflib.get_close_matches(key, keys, n=3, cutoff=0.7)
    near += [by_last[k] for k in difflib.get_close_matches(key.rsplit(".", 1)[-1], list(by_last), n=3, cutoff=0.8)]
    return list(dict.fromkeys(near))[:3]


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
    from jaxinit.run import empty_lists
    args, empty = empty_lists.take_empty(cfg, list(args))   # --phases.names= where --help says what empty means
    if not args:
        parsed = empty_lists.apply(cfg, empty)
        check_values(parsed)
        return parsed
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
    parsed = empty_lists.apply(parsed, empty)
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
    entrypoints print their own usage, which knows the fixed flags (`jaxinit.run.cli`)."""
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


def override(cfg: Any, *overrides: str | Mapping[str, Any]) -> Any:
    """``cfg`` (a frozen config dataclass) with ``overrides`` applied, parsed and checked as the command line's.

    Each override is a command-line item -- ``"train.epochs=3"`` (the leading ``--`` may be left out),
    ``"--train.epochs"`` followed by ``"3"`` -- or a mapping of dotted keys to Python values
    (``{"train.epochs": 3, "sweep.sigma_w": (0.5, 1.0), "opt.lr": None}``), which become those items
    (tuples comma-joined, None ``none``, booleans ``true`` / ``false``). An unknown key or a value that does
    not parse or fails its field's checks raises `ConfigError` in one line; ``cfg`` itself is unchanged
    (configs are frozen). The experiment's own checks (its ``validate``) run when it is trained."""
    args: list[str] = []
    for item in overrides:
        if isinstance(item, Mapping):
            args += [f"--{key}={_as_text(value)}" for key, value in item.items()]
        elif isinstance(item, str):
            dotted = not item.startswith("-") and "=" in item and "." in item.split("=", 1)[0]
            args.append(f"--{item}" if dotted else item)
        else:
            raise TypeError(f"an override is a 'key=value' string or a mapping, got {type(item).__name__}")
    return parse_overrides(cfg, args) if args else cfg


def _as_text(value: Any) -> str:
    """A Python value as the command line spells it (`override`)."""
    if value is None:
        return "none"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, (tuple, list)):
        return ",".join(_as_text(v) for v in value)
    return str(value)


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
                continue      # a run made before the field moved out of this config (`RETIRED`)
            raise ConfigError(f"config.json: unknown key {key!r}")
        kwargs[name] = _typed(key, types_[name], value)
    cfg = cls(**kwargs)
    if not prefix:
        check_values(cfg)
    return cfg


def _retired(key: str, value: Any) -> bool:
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




# --------------------------------------------------------------------------- configs of older versions
# Fields added after runs were made: while at their default (the behaviour before they existed) they are
# left out of a run's fingerprints and same-config comparisons (`comparable`), so a run made before them
# continues (--resume, a same-config rerun) instead of being refused as another config.
ADDED_DEFAULTS = {("train", "precision"): "float32", ("train", "eval_train_subset"): 0,
                  ("train", "async_checkpoint"): False, ("sweep", "lr"): ()}

# Fields since removed, with the only value they ever had where they went: a config without one is the
# config that held that value (the forgetting study's data.binarize, false; the IGB studies keep theirs in
# `jaxinit.config.IGBDataConfig`). Put back before hashing, so runs made before keep their fingerprint;
# `from_dict` skips them in a saved config.json.
RETIRED = {("data", "binarize"): False}


def _is_default(value: Any, default: Any) -> bool:
    """``value`` is ``default`` in kind, not only in value (0 is not False; a list from JSON is a tuple)."""
    if isinstance(default, tuple):
        return isinstance(value, (list, tuple)) and tuple(value) == default
    return value == default and type(value) is type(default)


def comparable(data: dict) -> dict:
    """``to_dict(cfg)`` (or a saved config.json) without the `ADDED_DEFAULTS` fields that hold their default,
    with the `RETIRED` fields in."""
    out = dict(data)
    for (section, key), value in RETIRED.items():
        sub = out.get(section)
        if isinstance(sub, dict) and key not in sub:
            out[section] = {**sub, key: value}
    for (section, key), default in ADDED_DEFAULTS.items():
        sub = out.get(section)
        if isinstance(sub, dict) and key in sub and _is_default(sub[key], default):
            out[section] = {k: v for k, v in sub.items() if k != key}
    return out
