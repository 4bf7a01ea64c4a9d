"""Issue 35 ("Never lose a run, round three"): continuing runs -- damaged metrics rows, a first checkpoint cut short,
what a stop says, a full disk, the device count in the fingerprint -- and a pretraining that left nothing to rescale.
"""
import json
import os
import signal
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import phase_diagram
from jaxinit import interrupt
from jaxinit.errors import ConfigError
from jaxinit.forgetting import loop
from jaxinit.run import cli, provenance, runinfo, sink
from jaxinit.run.checkpoint import Checkpointer
from jaxinit.run.manifest import ORBAX_TMP, Manifest

from test_writer import TINY

ROOT = Path(__file__).resolve().parents[1]


# --------------------------------------------------------------------------- damaged metrics rows
@pytest.mark.parametrize("line", ['{"member": 0, "epoch": null}', '{"member": "a", "epoch": 1}',
                                  '{"member": 0, "epoch": 1e400}', '{"member": true, "epoch": 1}', "[1, 2]"])
def test_a_damaged_row_is_a_damaged_line_not_a_traceback(tmp_path, line):
    path = tmp_path / "metrics.jsonl"
    path.write_text('{"member": 0, "epoch": 0}\n' + line + '\n{"member": 0, "epoch": 2}\n')
    rows, bad = sink.scan(path)
    assert bad == [2] and [r["epoch"] for r in rows] == [0, 2]
    sink.plan_rows(rows, 1, 0, {0}, loop.study(TINY).plan)           # what resume then plans from: no error


def test_a_resume_over_damaged_rows_names_the_file_and_line_and_goes_back_a_checkpoint(tmp_path, capsys):
    out = tmp_path / "run"
    loop.fit(TINY, out, progress=False)
    written = (out / "metrics.jsonl").read_bytes()
    lines = written.decode().splitlines()
    n = next(i for i, ln in enumerate(lines) if json.loads(ln)["epoch"] == 1)
    lines[n] = lines[n].replace('"epoch": 1', '"epoch": 1e400')       # a row of epoch 1, before the last checkpoint
    (out / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    capsys.readouterr()
    loop.fit(TINY, out, resume=True, progress=False)
    err = capsys.readouterr().err
    assert f"{out / 'metrics.jsonl'}: line(s) [{n + 1}] unreadable or damaged" in err
    assert "skipped; resuming from checkpoint" in err
    assert (out / "metrics.jsonl").read_bytes() == written


# --------------------------------------------------------------------------- item 8: the first checkpoint
class Killed(BaseException):
    """The process dies here (kill -9): nothing after it runs."""


def test_a_run_killed_while_its_first_checkpoint_is_written_starts_again_on_resume(tmp_path, monkeypatch):
    out = tmp_path / "run"
    write = Checkpointer._write

    def killed(self, step, state, meta):
        partial = self._dir / f"{step}{ORBAX_TMP}" / f"state{ORBAX_TMP}"
        partial.mkdir(parents=True)
        (partial / "d").write_bytes(b"\x00" * 10)
        raise Killed
    monkeypatch.setattr(Checkpointer, "_write", killed)
    with pytest.raises(Killed):
        loop.fit(TINY, out, progress=False)
    assert {json.loads(ln)["epoch"] for ln in (out / "metrics.jsonl").read_text().splitlines()} == {0}
    monkeypatch.setattr(Checkpointer, "_write", write)
    resumed = loop.fit(TINY, out, resume=True, progress=False)
    fresh = loop.fit(TINY, tmp_path / "fresh", progress=False)
    assert (out / "metrics.jsonl").read_bytes() == (tmp_path / "fresh" / "metrics.jsonl").read_bytes()
    assert resumed.summary == fresh.summary
    assert not (out / "checkpoints" / f"0{ORBAX_TMP}").exists()


# --------------------------------------------------------------------------- what a stop says
def _stopped_after(tmp_path, capsys, writes) -> str:
    def main(cfg, out, resume):
        writes(out)
        os.kill(os.getpid(), signal.SIGINT)
        interrupt.check()
    exp = replace(phase_diagram.EXPERIMENT, main=main, prepare=None)
    capsys.readouterr()
    assert cli.run(exp, ["--preset", "smoke", "--out", str(tmp_path / "run")]) == 130
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1, err
    return err[0]


def test_a_stop_without_a_checkpoint_says_the_run_cannot_be_continued(tmp_path, capsys):
    def trained_without_checkpoints(out):             # memory_phases at its default checkpoint_every=0
        Manifest(out).write_jsonl(out / "metrics.jsonl", [{"member": 0, "epoch": 0}], digest=False)
        runinfo.write_run_info(out, {"status": "stopped"})
    line = _stopped_after(tmp_path, capsys, trained_without_checkpoints)
    assert "no checkpoint was saved" in line and "cannot be continued" in line and "--overwrite" in line
    assert "--resume" not in line and "checkpoint is kept" not in line


def test_a_stop_with_a_checkpoint_says_continue(tmp_path, capsys):
    def checkpointed(out):
        Manifest(out).write_jsonl(out / "metrics.jsonl", [{"member": 0, "epoch": 0}], digest=False)
        Manifest(out).record(out / "checkpoints" / "3", "checkpoint")
        (out / "checkpoints" / "3").mkdir(parents=True)
        runinfo.write_run_info(out, {"status": "stopped"})
    line = _stopped_after(tmp_path, capsys, checkpointed)
    assert "the last checkpoint is kept; continue with:" in line and line.endswith("--resume")


def test_a_stop_before_training_says_resume_starts_it_again(tmp_path, capsys):
    line = _stopped_after(tmp_path, capsys, lambda out: None)
    assert "continue with:" in line and line.endswith("--resume")


# --------------------------------------------------------------------------- a full disk
FULL_DISK = """
import resource, signal, sys
import jax.numpy as jnp, numpy as np
from jaxinit.errors import ConfigError
from jaxinit.run.checkpoint import Checkpointer
ck = Checkpointer(sys.argv[1])
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)       # writes past the limit fail (EFBIG), as on a full disk
resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
try:
    ck.save(0, {"w": jnp.asarray(np.random.default_rng(0).normal(size=100000), jnp.float32)}, {"epoch": 0})
except ConfigError as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)
"""


def test_a_checkpoint_that_cannot_be_written_is_one_line_without_orbax_tracebacks(tmp_path):
    proc = subprocess.run([sys.executable, "-c", FULL_DISK, str(tmp_path / "checkpoints")], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1, proc.stderr[-3000:]
    assert "checkpoint 0: cannot write" in err[0] and "File too large" in err[0]


# --------------------------------------------------------------------------- item 4: what changes results
def test_the_fingerprint_holds_the_device_and_process_counts():
    env = provenance.numeric_environment()
    assert env["device_count"] == jax.device_count() and env["process_count"] == jax.process_count()


def test_a_continuation_on_another_device_count_is_refused_and_older_runs_continue(tmp_path):
    env = provenance.numeric_environment()
    runinfo.start_fingerprint(tmp_path, {"environment": {**env, "device_count": env["device_count"] + 1}})
    with pytest.raises(ConfigError, match="numeric environment differs.*device_count"):
        runinfo.check_fingerprint(tmp_path, {"environment": env})
    older = tmp_path / "older"
    older.mkdir()
    runinfo.start_fingerprint(older, {"environment": {k: v for k, v in env.items()
                                                      if k not in ("device_count", "process_count")}})
    runinfo.check_fingerprint(older, {"environment": env})          # recorded before the counts were: continues


def test_a_resume_under_forced_host_devices_is_refused(tmp_path):
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "experiments.phase_diagram", "--preset", "smoke", "--timing.enabled=false",
            "--out", str(out)]
    assert subprocess.run(argv, cwd=ROOT, capture_output=True, timeout=600).returncode == 0
    env = {**os.environ, "XLA_FLAGS": os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=2"}
    proc = subprocess.run(argv[:3] + ["--out", str(out), "--resume"], cwd=ROOT, capture_output=True, text=True,
                          timeout=600, env=env)
    assert proc.returncode == 2 and "device_count" in proc.stderr and len(proc.stderr.strip().splitlines()) == 1


# --------------------------------------------------------------------------- igb_rescale's message
def test_a_degenerate_pretrained_net_is_blamed_not_the_targets():
    from jaxinit.igb import rescale
    from jaxinit.shared import nets
    cfg = rescale_smoke()
    net = rescale.make_net(cfg, 2, 16)
    base = jax.tree.map(jnp.zeros_like, nets.scaled_draw(net, jax.random.key(0), 1.0, 0.1))   # saturated: no signal
    x = jax.random.normal(jax.random.key(1), (32, 16))
    y = jnp.arange(32) % 2
    with pytest.raises(ConfigError, match="pretraining left it degenerate") as err:
        rescale.calibrate(net, base, x, y, 1.0, 0.05, 3)
    assert "--rescale.targets" not in str(err.value)


def rescale_smoke():
    from experiments import igb_rescale
    return igb_rescale.EXPERIMENT.presets["smoke"]
