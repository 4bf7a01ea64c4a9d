"""The command line every `python -m experiments.<name>` shares.

    python -m experiments.NAME [--preset NAME] [--out DIR] [--resume | --overwrite] [--a.b=value | --a.b value ...]
    python -m experiments.NAME --help          # the presets, and every config field with its default (chosen preset)
    python -m experiments.NAME --replot DIR    # figures from a run's saved results (where supported)

Every experiment has one shape: a module-level ``EXPERIMENT = cli.Experiment(name=..., doc=__doc__,
presets=..., default=..., main=..., validate=..., ...)`` and ``def run(argv=None) -> int: return
cli.run(EXPERIMENT, argv)``; its name is the module's (``experiments.<name>``) and is listed in
`jaxinit.run.registry`. The fixed flags are parsed with argparse; everything else is a dotted override of the
preset's config, parsed by tyro over the frozen config dataclasses (`jaxinit.run.config_parse`, chosen
because it reads the dataclasses we already have, field docstrings and ``Literal`` choices included, with no
second schema to keep in step; ml_collections' config flags would force a `--config.` prefix on every key
that docs/design.md fixes). A misspelt key or preset is one line that names the closest ones. The presets
are `Presets` (`jaxinit.config`): each with a line that ``--help`` prints; ``--preset NAME`` picks one.
Without ``--out`` a run goes to ``runs/<experiment>_<preset>``. Run directories are owned
(`jaxinit.run.rundir`: lock, manifest, same-config continuation; `jaxinit.run.claim`: `--overwrite` sets the
run's own files aside and deletes them only once the new run has started, `jaxinit.run.overwrite`), every check
the set-up can make (the experiment's ``validate`` and ``prepare``) runs before any file is written, results
are written atomically (`jaxinit.run.files`), run.json names the experiment (a run of another one is refused),
every continuation is checked against the fingerprint the run started with (`jaxinit.run.runinfo`: config.json,
numeric environment) and run.json's provenance gains one segment per part of a run (`jaxinit.run.provenance`).
Progress lines name the experiment (`jaxinit.progress.study`). SIGINT/SIGTERM stop at once in set-up,
summary and figures and at a step boundary in training (`jaxinit.interrupt`); a signal still pending at
the end stops the run with its status, never 0. User errors (`ConfigError`) become one line on stderr and
exit status 2.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Mapping

from jaxinit import distributed, interrupt, progress
from jaxinit.config import Presets, to_dict
from jaxinit.errors import ConfigError
from jaxinit.run import environment, files, overwrite, provenance, rundir, runinfo
from jaxinit.run.claim import Claim, claim, stop_advice
from jaxinit.run.config_parse import close_keys, comparable, fields_help, from_dict, parse_overrides
from jaxinit.run.manifest import Manifest


@dataclass(frozen=True)
class Experiment:
    """One ``python -m experiments.<name>``: what `run` needs to parse, claim the run directory and run it."""
    name: str
    """its name, listed in `jaxinit.run.registry` (its module is ``experiments.<name>``; run.json records it)"""
    doc: str
    """the module docstring, printed first by --help"""
    presets: Presets
    """the named configs, each with its description"""
    default: str | Callable[[], str]
    """the preset without --preset (a callable is asked at run time: the benchmark's depends on the platform)"""
    main: Callable[[Any, Path, bool], Any]
    """``main(cfg, out_dir, resume)``: the experiment itself"""
    validate: Callable[[Any], None] | None = None
    """``validate(cfg)`` raises a one-line `ConfigError` for values that make no sense"""
    prepare: Callable[[Any], None] | None = None
    """``prepare(cfg)`` raises the `ConfigError` the set-up would (data and batch sizes, memory estimates, swept
    points in float32, figure ranges); it runs before any file is written or set aside"""
    replot: Callable[[Path], list[Path]] | None = None
    """``plot_all(run_dir) -> paths`` behind ``--replot DIR`` (None: no such flag)"""
    replot_reads: tuple[str, ...] = ()
    """files besides config.json and the results that ``replot`` reads (``summary.json``): checked first"""
    multihost: bool = False
    """several processes may run it (`jaxinit.distributed`); otherwise a multi-process launch is one line"""
    preset_flags: Mapping[str, str] = field(default_factory=dict)
    """flags that stand for a preset: ``{"quick": "quick"}`` gives ``--quick``"""

    @property
    def prog(self) -> str:
        return f"experiments.{self.name}"

    def default_preset(self) -> str:
        return self.default() if callable(self.default) else self.default

    def default_out(self, preset: str) -> str:
        """The run directory without --out: ``runs/<experiment>_<preset>``."""
        return f"runs/{self.name}_{preset}"

    @property
    def config_cls(self) -> type:
        """The config dataclass (that of the default preset; every preset has it): what --resume reads."""
        return type(self.presets[self.default_preset()])


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):   # argparse would print usage and exit; we want one line
        raise ConfigError(message)


def _fixed_parser(prog: str, replot: bool, preset_flags: Mapping[str, str]) -> _Parser:
    p = _Parser(prog=f"python -m {prog}", add_help=False, allow_abbrev=False)
    p.add_argument("-h", "--help", action="store_true")
    p.add_argument("--preset")
    p.add_argument("--out")
    p.add_argument("--resume", action="store_true")
    p.add_argument("--overwrite", action="store_true")
    if replot:
        p.add_argument("--replot", metavar="DIR")
    for flag in preset_flags:
        p.add_argument(f"--{flag}", action="store_true")
    return p


def _usage(exp: Experiment, default: str) -> str:
    """The one usage of ``--help``: the fixed flags, then every preset with its description."""
    replot = " [--replot DIR]" if exp.replot is not None else ""
    flags = "".join(f" [--{flag}]" for flag in exp.preset_flags)
    lines = [f"usage: python -m {exp.prog} [--preset NAME]{flags} [--out DIR] [--resume | --overwrite]{replot} "
             f"[--a.b=value ...]",
             "",
             f"  --preset NAME   a preset below (default: {default})",
             f"  --out DIR       run directory (default: {exp.default_out('<preset>')}); a fresh run into a run "
             f"of the same config continues it",
             "  --resume        continue the run in --out (its saved config.json)",
             "  --overwrite     replace the run in --out (deletes that run's own files only)"]
    if exp.replot is not None:
        lines.append("  --replot DIR    redraw the figures of a finished run from its saved results")
    lines += [f"  --{flag:<13} same as --preset {name}" for flag, name in exp.preset_flags.items()]
    names = {name: name + (" (default)" if name == default else "") for name in exp.presets}
    width = max(map(len, names.values()))
    lines += ["", "presets:"] + [f"  {names[n]:<{width}}  {exp.presets.description(n)}" for n in exp.presets]
    lines += ["", "config fields of the chosen preset (--a.b=value or --a.b value):", ""]
    return "\n".join(lines)


def _choose_preset(args, presets: Presets, preset_flags: Mapping[str, str]) -> str | None:
    chosen = [name for flag, name in preset_flags.items() if getattr(args, flag)]
    if chosen and args.preset:
        raise ConfigError(f"--{next(f for f, n in preset_flags.items() if n == chosen[0])} is --preset {chosen[0]}; give one of them")
    name = chosen[0] if chosen else args.preset
    if name is not None:
        try:
            presets.pick(name)
        except ConfigError as err:
            raise ConfigError(f"--preset: {err}; --help says what each is for") from None
    return name


def resolve_config(config_cls: type, presets: Mapping[str, Any], default: str, preset: str | None,
                   overrides: list[str], out: Path, resume: bool, prog: str) -> Any:
    """Preset + overrides, or on --resume the saved config.json (a preset / overrides must agree with it)."""
    if not resume:
        return parse_overrides(presets[preset or default], overrides, prog=prog)
    if not (out / "config.json").exists():
        raise ConfigError(f"--resume: no run to resume in {files.safe_path(out)} (no config.json)")
    try:
        saved = from_dict(config_cls, rundir.read_saved_config(out))
    except TypeError as e:
        raise ConfigError(f"--resume: {files.safe_path(out / 'config.json')} is not a valid config ({e})") from None
    if preset is not None or overrides:
        asked = parse_overrides(presets[preset] if preset else saved, overrides, prog=prog)
        if asked != saved:
            diff = ", ".join(rundir.diff_keys(to_dict(saved), to_dict(asked))[:4])
            raise ConfigError(f"--resume: the preset / overrides describe another config than the saved run "
                              f"(differs in {diff})")
    return saved


def _say_left_alone(out: Path) -> None:
    """After a run: name what in its directory is not its own (left untouched), if anything."""
    found = rundir.foreign_entries(out)
    if found:
        print(f"{files.safe_path(out)}: left {len(found)} path(s) that are not the run's alone "
              f"({files.safe_path(', '.join(found[:3]))})", file=sys.stderr)


def _stamp_provenance(out: Path, resumed: bool, status: str) -> None:
    """Append this process's segment (code, packages, device, how it ended) to run.json's provenance."""
    info = {**provenance.provenance(), "resumed": resumed, "status": status}
    provenance.append_provenance(out / "run.json", info, write=Manifest(out).write_json)


def _fingerprint(out: Path, cfg: Any, env: dict, resume: bool) -> None:
    parts = {"config": comparable(to_dict(cfg)), "environment": env}
    if resume:
        runinfo.check_fingerprint(out, parts, from_config_json=True)   # cfg is config.json (or equals it)
    else:
        runinfo.start_fingerprint(out, parts)


def _run(exp: Experiment, argv: list[str]) -> int:
    args, overrides = _fixed_parser(exp.prog, exp.replot is not None, exp.preset_flags).parse_known_args(argv)
    preset = _choose_preset(args, exp.presets, exp.preset_flags)
    default = exp.default_preset()
    bad = [a for a in overrides if a.startswith("--") and "." not in a.split("=", 1)[0]]
    if bad:
        near = close_keys(exp.presets[preset or default], bad[0][2:].split("=", 1)[0])
        hint = f"; did you mean {' or '.join('--' + k for k in near)}?" if near else ""
        raise ConfigError(f"unknown argument {bad[0]!r} (overrides take the form --section.key=value){hint}")
    if args.help:
        print(exp.doc.strip() + "\n\n" + _usage(exp, default))
        print(fields_help(exp.presets[preset or default], prog=f"python -m {exp.prog}"))
        return 0
    if exp.replot is not None and args.replot is not None:
        from jaxinit.run.replot import replot
        paths = replot(exp.name, exp.prog, exp.config_cls, args.replot, exp.replot, exp.replot_reads)
        print("\n".join(files.safe_path(p) for p in paths))
        return 0
    if args.resume and args.overwrite:
        raise ConfigError("--resume and --overwrite contradict each other; give one")
    environment.check_xla_flags()
    with environment.backend_errors():
        writer = join_hosts(exp.prog, exp.multihost)
        env = provenance.numeric_environment()
    out = rundir.resolve_out(args.out, exp.default_out(preset or default))
    if writer:
        overwrite.recover_first(out)              # an --overwrite killed midway: its old run put back first
    if args.resume and not out.is_dir():
        raise ConfigError(f"--resume: no run to resume in {files.safe_path(out)}")
    if args.resume:
        runinfo.check_experiment(out, exp.name)      # before its config.json is read as this experiment's
    cfg = resolve_config(exp.config_cls, exp.presets, default, preset, overrides, out, args.resume, exp.prog)
    if exp.validate is not None:
        exp.validate(cfg)
    if exp.prepare is not None and not args.resume:
        exp.prepare(cfg)          # what the set-up would refuse: before any file is written or set aside
    if writer:
        rundir.check_not_nested(out)
    with (rundir.RunLock(out) if writer else contextlib.nullcontext()):
        claimed = Claim(out, args.resume)
        try:
            if writer:
                claimed = claim(out, cfg, exp.name, resume=args.resume, overwrite_=args.overwrite)
                _fingerprint(out, cfg, env, claimed.resume)
            if claimed.continuing:
                print(f"continuing the run of the same config in {files.safe_path(out)}", file=sys.stderr)
        except BaseException as err:
            claimed.abandon()
            if isinstance(err, ConfigError):
                _agree_across_hosts(-1)   # the other hosts must not wait for a run that will not start
            raise
        claimed.resume = _agree_across_hosts(int(claimed.resume)) == 1
        with progress.study(exp.name):
            _run_main(exp.main, cfg, claimed, writer, exp.prog)
    if writer:
        _say_left_alone(out)
        print(f"wrote {files.safe_path(out)}")
    interrupt.check()             # a signal during the last writes: its status, never 0
    return 0


def _run_main(main, cfg, claimed: Claim, writer: bool, prog: str) -> None:
    """``main`` in a prompt phase (its training sections defer signals themselves). A fresh run that fails or is
    stopped before it started leaves nothing (an --overwrite's old run put back: `Claim.abandon`); a run that
    started keeps what it wrote and gains a provenance segment, however it ended."""
    out, resume = claimed.out, claimed.resume
    try:
        with interrupt.prompt():
            main(cfg, out, resume)
        interrupt.check()         # a signal recorded in a deferred section at the very end
    except interrupt.Interrupted as stop:
        if claimed.aside is not None and claimed.abandon():
            raise _Stopped(stop, f"stopped by {stop} before the new run started; {_untouched(claimed)}") from None
        claimed.done()            # a fresh run keeps its config.json: --resume starts it again
        if writer:
            with contextlib.suppress(ConfigError):   # the stop's own line matters more
                _stamp_provenance(out, resume, f"stopped by {stop}")
        raise _Stopped(stop, f"stopped by {stop}: {stop_advice(out, prog)}") from None
    except ConfigError as err:
        if claimed.abandon():
            raise ConfigError(f"{err}; {_untouched(claimed)}") from None
        if writer:
            with contextlib.suppress(ConfigError):
                _stamp_provenance(out, resume, f"error: {str(err)[:160]}")
        raise
    except BaseException:
        claimed.abandon()         # a bug: its traceback follows, but it costs no run
        raise
    claimed.done()
    if writer:
        _stamp_provenance(out, resume, "finished")


def _untouched(claimed: Claim) -> str:
    where = files.safe_path(claimed.out)
    return f"the earlier run in {where} is as it was" if claimed.aside is not None else f"nothing was left in {where}"


def _agree_across_hosts(code: int) -> int:
    """Several hosts: process 0 decided (it owns the directory: 1 resume, 0 fresh, -1 refused); every
    process follows its decision."""
    if not distributed.is_multiprocess():
        return code
    from jax.experimental import multihost_utils
    import numpy as np
    decided = int(multihost_utils.broadcast_one_to_all(np.int32(code)))
    if decided < 0:
        raise ConfigError("process 0 refused the run directory (its message says why)")
    return decided


class _Stopped(Exception):
    def __init__(self, stop: interrupt.Interrupted, message: str):
        super().__init__(message)
        self.status = stop.status


def join_hosts(prog: str, multihost: bool) -> bool:
    """Join a multi-process run if the environment describes one (see `jaxinit.distributed`).

    Returns whether this process writes results (False only on processes other than 0).
    """
    if distributed.launch_settings(os.environ) is not None and not multihost:
        raise ConfigError(f"{prog} runs on one host; unset {', '.join(distributed.ENV_VARS)}")
    distributed.initialize_from_env()
    return distributed.is_writer()


def run(exp: Experiment, argv: list[str] | None = None) -> int:
    """Parse ``argv`` (default: the process's), claim the run directory, run ``exp.main(cfg, out_dir,
    resume)``; return the exit status (0, 2 for a user error in one line, a signal's status)."""
    argv = sys.argv[1:] if argv is None else list(argv)
    from jaxinit import compile_cache
    compile_cache.enable()        # before anything compiles: jax's persistent cache (JAXINIT_COMPILE_CACHE)
    try:
        with interrupt.handled():
            return _run(exp, argv)
    except ConfigError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    except _Stopped as e:
        print(str(e), file=sys.stderr)
        return e.status
    except interrupt.Interrupted as e:   # before the run directory was claimed: nothing to keep
        print(f"stopped by {e}", file=sys.stderr)
        return e.status
