"""The lock, the numeric environment, provenance segments and prompt signals (issue 20 items 5, 10, 11).

- item 10: `d/.lock -> ~/precious` truncated `precious` and wrote "pid ... on vm" into it;
- item 5: a run resumed under JAX_ENABLE_X64=1 was accepted, and run.json's provenance was replaced on
  every run, so nothing recorded that earlier epochs came from another environment;
- item 11: a SIGTERM during set-up, data generation or the summary was only noted (or ignored).
"""
import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import jax
import pytest

from jaxinit import interrupt
from jaxinit.run import manifest, provenance, rundir
from jaxinit.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- item 10: the lock
def _refused(out, fragment):
    with pytest.raises(ConfigError, match=fragment) as err:
        with rundir.RunLock(out):
            pass
    assert "\n" not in str(err.value)


def test_a_symlinked_lock_is_refused_and_its_target_untouched(tmp_path):
    precious = tmp_path / "precious"
    precious.write_text("years of notes")
    out = tmp_path / "d"
    out.mkdir()
    (out / ".lock").symlink_to(precious)
    _refused(out, "is a symbolic link")
    assert precious.read_text() == "years of notes"


def test_a_dangling_lock_symlink_creates_nothing(tmp_path):
    out = tmp_path / "d"
    out.mkdir()
    (out / ".lock").symlink_to(tmp_path / "would_be_created")
    _refused(out, "is a symbolic link")
    assert not (tmp_path / "would_be_created").exists()


def test_a_hard_linked_lock_is_refused(tmp_path):
    precious = tmp_path / "precious"
    precious.write_text("years of notes")
    out = tmp_path / "d"
    out.mkdir()
    os.link(precious, out / ".lock")
    _refused(out, "has other hard links")
    assert precious.read_text() == "years of notes"


def test_a_fifo_lock_is_refused_without_hanging(tmp_path):
    out = tmp_path / "d"
    out.mkdir()
    os.mkfifo(out / ".lock")
    _refused(out, "is not a plain file")


def test_the_lock_still_names_its_holder(tmp_path):
    with rundir.RunLock(tmp_path / "d"):
        _refused(tmp_path / "d", f"in use by pid {os.getpid()}")
    with rundir.RunLock(tmp_path / "d"):
        pass


# --------------------------------------------------------------------------- item 5: what changes results
def test_numeric_environment_holds_what_changes_results():
    env = provenance.numeric_environment()
    assert env["x64"] is False and env["platform"] == "cpu" and env["device_kind"]
    assert env["jax"] == jax.__version__ and env["default_prng_impl"] == "threefry2x32"
    assert json.loads(json.dumps(env)) == env                      # JSON, for a fingerprint and run.json


def test_x64_and_matmul_precision_change_the_numeric_environment():
    before = provenance.numeric_environment()
    try:
        jax.config.update("jax_enable_x64", True)
        jax.config.update("jax_default_matmul_precision", "highest")
        after = provenance.numeric_environment()
    finally:
        jax.config.update("jax_enable_x64", False)
        jax.config.update("jax_default_matmul_precision", None)
    assert rundir.diff_keys(before, after) == ["default_matmul_precision", "x64"]
    assert provenance.numeric_environment() == before


def test_xla_flags_count_unless_known_inert(monkeypatch):
    text = ("--xla_dump_to=/tmp/d --xla_force_host_platform_device_count=4 --xla_cpu_enable_fast_math=true "
            "--xla_backend_optimization_level=0")
    assert provenance.numeric_xla_flags(text) == ["--xla_backend_optimization_level=0", "--xla_cpu_enable_fast_math=true"]
    monkeypatch.setenv("XLA_FLAGS", "--xla_cpu_enable_fast_math=true")
    assert provenance.numeric_environment()["xla_flags"] == ["--xla_cpu_enable_fast_math=true"]


def test_x64_from_the_environment_is_seen_by_a_fresh_process():
    code = "from jaxinit.run import provenance; print(provenance.numeric_environment()['x64'])"
    env = {**os.environ, "JAX_ENABLE_X64": "1"}
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "True"


# --------------------------------------------------------------------------- item 5: provenance per segment
def test_provenance_segments_are_appended_never_replaced(tmp_path):
    path = tmp_path / "run.json"
    path.write_text(json.dumps({"seconds": 3, "provenance": {"git_commit": "old", "host": "a"}}))
    provenance.append_provenance(path, {"git_commit": "new", "epochs": [3, 5]})
    segments = provenance.append_provenance(path, {"git_commit": "newer"})
    data = json.loads(path.read_text())
    assert data["seconds"] == 3 and [s["git_commit"] for s in data["provenance"]] == ["old", "new", "newer"]
    assert segments == data["provenance"] == provenance.read_provenance(path)
    assert provenance.read_provenance(tmp_path / "none.json") == []


def test_an_unreadable_run_json_is_kept_and_one_line(tmp_path):
    path = tmp_path / "run.json"
    path.write_text('{"provenance": [')
    with pytest.raises(ConfigError, match="earlier provenance would be lost") as err:
        provenance.append_provenance(path, {"git_commit": "new"})
    assert "\n" not in str(err.value) and path.read_text() == '{"provenance": ['


def test_provenance_goes_through_the_given_writer(tmp_path):
    out = tmp_path / "run"
    m = manifest.Manifest(out)
    provenance.append_provenance(out / "run.json", provenance.provenance(), write=m.write_json)
    assert "sha256" in m.entries()["run.json"] and rundir.foreign_entries(out) == []


# --------------------------------------------------------------------------- item 11: prompt signals
def test_in_a_prompt_phase_the_first_signal_stops_at_once():
    ran = 0
    with interrupt.handled():
        with pytest.raises(interrupt.Interrupted) as stop:
            with interrupt.prompt():
                os.kill(os.getpid(), signal.SIGTERM)
                for ran in range(10 ** 9):                # a data generator that never calls check()
                    pass
        assert stop.value.status == 143 and ran < 10 ** 9 - 1


def test_a_signal_recorded_earlier_stops_a_prompt_phase_on_entry():
    with interrupt.handled():
        os.kill(os.getpid(), signal.SIGINT)               # deferred: only recorded
        assert interrupt.pending() == signal.SIGINT
        entered = []
        with pytest.raises(interrupt.Interrupted) as stop:
            with interrupt.prompt():
                entered.append(1)
        assert entered == [] and stop.value.status == 130


def test_a_deferred_section_inside_a_prompt_phase_finishes_first():
    done = []
    with interrupt.handled():
        with pytest.raises(interrupt.Interrupted):
            with interrupt.prompt():
                with interrupt.deferred():
                    os.kill(os.getpid(), signal.SIGTERM)
                    done.append("saved")                  # e.g. a checkpoint: not cut short
                interrupt.check()
        assert done == ["saved"]


def test_an_interrupt_is_not_swallowed_by_a_broad_except():
    with interrupt.handled():
        with pytest.raises(interrupt.Interrupted):
            with interrupt.prompt():
                try:
                    os.kill(os.getpid(), signal.SIGTERM)
                except Exception:                         # e.g. a reader turning errors into one line
                    pytest.fail("Interrupted was caught as an Exception")


def test_outside_prompt_phases_the_old_semantics_hold():
    with interrupt.handled():
        os.kill(os.getpid(), signal.SIGTERM)
        assert interrupt.pending() == signal.SIGTERM     # recorded, nothing raised
        with pytest.raises(interrupt.Interrupted):
            interrupt.check()
    assert interrupt.pending() is None


CHILD = """
import os, signal, sys, time
from jaxinit import interrupt
with interrupt.handled():
    try:
        with interrupt.{mode}():
            print("ready", flush=True)
            while True:
                pass                                      # busy: never calls check()
    except interrupt.Interrupted as stop:
        print(f"stopped by {{stop}}", file=sys.stderr)
        sys.exit(stop.status)
"""


def _child(mode, signals):
    proc = subprocess.Popen([sys.executable, "-c", CHILD.format(mode=mode)], cwd=ROOT, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "ready"
        for s in signals:
            proc.send_signal(s)
            if len(signals) > 1:
                import time
                time.sleep(0.5)                           # let the first one be handled before the second
        _, err = proc.communicate(timeout=120)
        return proc.returncode, [line for line in err.splitlines() if line.strip()]
    finally:
        proc.kill()


@pytest.mark.slow
def test_a_real_process_in_a_prompt_phase_stops_on_the_first_sigterm():
    rc, err = _child("prompt", [signal.SIGTERM])
    assert rc == 143 and err == ["stopped by SIGTERM"]


@pytest.mark.slow
def test_a_real_process_in_a_deferred_phase_stops_at_once_on_the_second_signal():
    rc, err = _child("deferred", [signal.SIGINT, signal.SIGINT])
    assert rc == 130 and len(err) == 1 and "SIGINT again: stopping now" in err[0]
