"""The command line every `python -m experiments.<name>` shares.

Flags: `--preset NAME`, `--out DIR`, `--resume`, `--help`, and dotted overrides `--a.b=value`.
User errors (`ConfigError`, unknown flags, unwritable output) become one line on stderr and exit 2.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable, Mapping

from jaxinit.config import ConfigError, apply_overrides, from_dict, to_dict


def _usage(prog: str, doc: str, presets: Mapping[str, Any], default: str) -> str:
    names = ", ".join(f"{n}{' (default)' if n == default else ''}" for n in presets)
    return (f"usage: python -m {prog} [--preset NAME] [--out DIR] [--resume] [--a.b=value ...]\n\n"
            f"{doc.strip()}\n\npresets: {names}\n"
            f"overrides: any field of the preset's config, e.g. --train.epochs=3; see config.json of a run.\n")


def parse_args(argv: list[str]) -> tuple[dict[str, Any], list[str]]:
    """Split argv into the fixed flags and the dotted overrides."""
    flags: dict[str, Any] = {"preset": None, "out": None, "resume": False, "help": False, "quick": False,
                             "replot": None}
    overrides: list[str] = []
    it = iter(argv)
    for arg in it:
        if arg in ("-h", "--help"):
            flags["help"] = True
        elif arg == "--resume":
            flags["resume"] = True
        elif arg == "--quick":
            flags["quick"] = True
        elif arg in ("--preset", "--out", "--replot"):
            value = next(it, None)
            if value is None or value.startswith("--"):
                raise ConfigError(f"{arg} needs a value")
            flags[arg[2:]] = value
        elif arg.startswith(("--preset=", "--out=", "--replot=")):
            key, value = arg[2:].split("=", 1)
            flags[key] = value
        elif arg.startswith("--") and "." in arg.split("=", 1)[0] and "=" in arg:
            overrides.append(arg)
        else:
            raise ConfigError(f"unknown argument {arg!r} (overrides take the form --section.key=value)")
    return flags, overrides


def check_writable(out: Path) -> None:
    """Create `out` if needed and prove we can write there, before any work is done."""
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=out, prefix=".probe"):
            pass
    except OSError as e:
        raise ConfigError(f"--out {out}: cannot write there ({e.strerror or e})") from None


def write_json_atomic(path: Path, data: Any) -> None:
    """Write JSON via a temporary file + rename so a killed run never leaves half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    with open(tmp, "w") as f:
        json.dump(data, f, indent=2, sort_keys=True)
        f.write("\n")
    os.replace(tmp, path)


def _read_or_none(path: Path) -> str | None:
    return path.read_text() if path.exists() else None


def _restore(path: Path, text: str | None) -> None:
    if text is None:
        path.unlink(missing_ok=True)
    else:
        path.write_text(text)


def resolve_config(config_cls: type, presets: Mapping[str, Any], default: str, flags: dict, overrides: list[str],
                   out: Path) -> Any:
    """Preset + overrides, or on --resume the saved config.json (+ overrides must agree)."""
    if flags["resume"]:
        saved = out / "config.json"
        if not saved.exists():
            raise ConfigError(f"--resume: no run to resume in {out} (no config.json)")
        try:
            cfg = from_dict(config_cls, json.loads(saved.read_text()))
        except (json.JSONDecodeError, TypeError) as e:
            raise ConfigError(f"--resume: {saved} is not a valid config ({e})") from None
        if overrides and apply_overrides(cfg, overrides) != cfg:
            raise ConfigError("--resume: overrides would change the saved run's config")
        return cfg
    name = flags["preset"] or default
    if name not in presets:
        raise ConfigError(f"--preset: unknown preset {name!r} (choose from {', '.join(presets)})")
    return apply_overrides(presets[name], overrides)


def join_hosts(prog: str, multihost: bool) -> bool:
    """Join a multi-process run if the environment describes one (see `jaxinit.distributed`).

    Returns whether this process writes results (False only on processes other than 0).
    """
    from jaxinit import distributed
    if distributed.launch_settings(os.environ) is not None and not multihost:
        raise ConfigError(f"{prog} runs on one host; unset {', '.join(distributed.ENV_VARS)}")
    distributed.initialize_from_env()
    return distributed.is_writer()


def run_experiment(prog: str, doc: str, config_cls: type, presets: Mapping[str, Any], default: str,
                   main: Callable[[Any, Path, bool], Any], default_out: str,
                   validate: Callable[[Any], None] | None = None, argv: list[str] | None = None,
                   multihost: bool = False, replot: Callable[[Path], list[Path]] | None = None) -> int:
    """Parse, validate, run `main(cfg, out_dir, resume)`; print where results went. Returns exit status.

    `multihost`: the experiment supports several processes (`jaxinit.distributed`); the others refuse
    a multi-process launch with one line rather than have every host write the same files.
    """
    argv = sys.argv[1:] if argv is None else argv
    try:
        flags, overrides = parse_args(argv)
        if flags["help"]:
            print(_usage(prog, doc, presets, default))
            return 0
        if flags["replot"] is not None:
            if replot is None:
                raise ConfigError(f"{prog} has no --replot")
            return _replot(prog, flags["replot"], replot)
        writer = join_hosts(prog, multihost)
        out = Path(flags["out"] or default_out)
        if flags["resume"] and not out.is_dir():
            raise ConfigError(f"--resume: no run to resume in {out}")
        cfg = resolve_config(config_cls, presets, default, flags, overrides, out)
        if validate is not None:
            validate(cfg)
        check_writable(out)
        previous = None
        owns_config = writer and not flags["resume"]
        if owns_config:
            previous = _read_or_none(out / "config.json")
            write_json_atomic(out / "config.json", to_dict(cfg))
        try:
            main(cfg, out, flags["resume"])
        except ConfigError:
            if owns_config:  # a run refused at set-up leaves the directory as it found it
                _restore(out / "config.json", previous)
            raise
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    if writer:
        print(f"wrote {out}")
    return 0


def _replot(prog: str, run_dir: str, plot_all: Callable[[Path], list[Path]]) -> int:
    """`python -m experiments.<prog> --replot DIR`: figures from a run's saved results/*.npz only."""
    out = Path(run_dir).expanduser()
    if not list((out / "results").glob("*.npz")):
        raise ConfigError(f"--replot {out}: no saved results (results/*.npz) of a {prog} run there")
    print("\n".join(str(p) for p in plot_all(out)))
    return 0


def replot(prog: str, run_dir: str, plot_all: Callable[[Path], list[Path]]) -> int:
    """(Kept for the argv form ``--replot DIR`` of older mains.)"""
    try:
        return _replot(prog, run_dir, plot_all)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
