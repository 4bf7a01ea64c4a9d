"""Issue 35 ("Never lose a run, round three") on real runs, as the hostile user met it: finished smoke runs of the new
studies replaced by failing ``--overwrite``s, kill -9 during the first checkpoint, SIGINT of memory_phases at its
default ``checkpoint_every=0``, a full disk, a pretraining that diverged. Subprocesses, minutes: the slow tier."""
import os
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from processes import start_until_epoch
from jaxinit.run import manifest

from test_load_run import smoke    # noqa: F401  (a fixture: each experiment's smoke run, once per module)

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parents[1]


def cli(name: str, *argv, env: dict | None = None, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", f"experiments.{name}", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=1800, env={**os.environ, **(env or {})}, **kwargs)


def snapshot(d: Path) -> dict[str, bytes]:
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*"))
            if p.is_file() and not p.is_symlink() and p.name != manifest.LOCK}


def one_line(proc: subprocess.CompletedProcess, code: int, fragment: str) -> str:
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == code and len(err) == 1 and fragment in err[0], proc.stderr[-3000:]
    return err[0]


# --------------------------------------------------------------------------- item 1 on finished runs
@pytest.mark.parametrize("name, argv, fragment", [
    ("memory_phases", ["--train.batch_size=100000"], "exceeds the"),
    ("memory_phases", ["--train.strategy=chunked", "--train.chunk=0"], "chunk must be >= 1"),
    ("memory_phases", ["--phases.line=1e300"], "overflows float32"),
    ("igb_train", ["--train.batch_size=100000"], "exceeds the"),
    ("igb_train", ["--train.strategy=chunked", "--train.chunk=0"], "chunk must be >= 1"),
    ("igb_rescale", ["--rescale.targets=1e30"], "the earlier run in"),      # fails after pretraining, set aside
])
def test_a_failing_overwrite_leaves_a_finished_run_byte_identical(smoke, name, argv, fragment):
    out = smoke(name)
    before = snapshot(out)
    one_line(cli(name, "--preset", "smoke", "--out", str(out), "--overwrite", *argv), 2, fragment)
    assert snapshot(out) == before
    assert not [p for p in out.parent.iterdir() if "jaxinit-" in p.name]


def test_a_leftover_manifest_temp_file_costs_no_finished_run(smoke, tmp_path):
    out = tmp_path / "run"
    proc = subprocess.run(["cp", "-a", str(smoke("memory_phases")), str(out)], capture_output=True)
    assert proc.returncode == 0
    (out / "..manifest.json.a1b2c3.tmp").write_text('{"format": ')
    before = snapshot(out)
    one_line(cli("memory_phases", "--preset", "smoke", "--out", str(out), "--overwrite", "--phases.line=1e-46"),
             2, "underflows float32")
    assert snapshot(out) == before


# --------------------------------------------------------------------------- item 8: the first checkpoint
KILLED_IN_FIRST_SAVE = """
import os, signal, sys
from jaxinit.run.checkpoint import Checkpointer
from jaxinit.run.manifest import ORBAX_TMP
def write(self, step, state, meta):     # orbax has begun the save: its temporary folder exists, then kill -9
    partial = self._dir / f"{step}{ORBAX_TMP}" / f"state{ORBAX_TMP}"
    partial.mkdir(parents=True)
    (partial / "d").write_bytes(b"0" * 100)
    os.kill(os.getpid(), signal.SIGKILL)
Checkpointer._write = write
from experiments import forgetting
sys.exit(forgetting.run(sys.argv[1:]))
"""


def test_kill_9_during_the_first_checkpoint_then_resume_starts_again(tmp_path):
    out, fresh = tmp_path / "run", tmp_path / "fresh"
    proc = subprocess.run([sys.executable, "-c", KILLED_IN_FIRST_SAVE, "--preset", "smoke", "--out", str(out)],
                          cwd=ROOT, capture_output=True, text=True, timeout=1800)
    assert proc.returncode == -signal.SIGKILL
    assert (out / "checkpoints" / "0.orbax-checkpoint-tmp").is_dir()
    assert cli("forgetting", "--out", str(out), "--resume").returncode == 0
    assert cli("forgetting", "--preset", "smoke", "--out", str(fresh)).returncode == 0
    for name in ("metrics.jsonl", "summary.json"):
        assert (out / name).read_bytes() == (fresh / name).read_bytes(), name


# --------------------------------------------------------------------------- item 8: what SIGINT says
def test_sigint_of_memory_phases_without_checkpoints_tells_the_truth(tmp_path):
    out = tmp_path / "run"
    argv = [sys.executable, "-m", "experiments.memory_phases", "--preset", "smoke", "--out", str(out),
            "--train.steps=3000", "--train.eval_every=1000", "--opt.sgd_lr=0.05", "--opt.adam_lr=0.001",
            "--opt.sgd_l2_lr=0.1"]     # one rate each: no selection stage before the reported run
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 1200
    while not (out / "metrics.jsonl").exists() and proc.poll() is None and time.time() < deadline:
        time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    err = proc.communicate(timeout=600)[1].strip().splitlines()
    assert proc.returncode == 130 and len(err) == 1, err
    assert "no checkpoint was saved" in err[0] and f"--out {out} --overwrite" in err[0]
    # Only step 0's rows were written: nothing to lose, so --resume starts the run again (item 8) and finishes.
    done = cli("memory_phases", "--out", str(out), "--resume")
    assert done.returncode == 0 and (out / "summary.json").is_file(), done.stderr[-2000:]


# --------------------------------------------------------------------------- a full disk
def _file_limit(limit: int):
    def apply():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)     # a write past the limit fails (EFBIG) like a full disk
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))
    return apply


def test_a_disk_that_fills_during_a_checkpoint_is_one_line(tmp_path):
    proc = cli("forgetting", "--preset", "smoke", "--out", str(tmp_path / "run"), preexec_fn=_file_limit(40_000))
    line = one_line(proc, 2, "checkpoint 0: cannot write")
    assert "Traceback" not in proc.stderr and "File too large" in line


# --------------------------------------------------------------------------- igb_rescale's message
@pytest.mark.parametrize("argv", [["--model.sigma_b2=1e30"], ["--pretrain.lr=1000"]])
def test_a_diverged_pretraining_is_blamed_not_the_targets(tmp_path, argv):
    proc = cli("igb_rescale", "--preset", "smoke", "--out", str(tmp_path / "run"), *argv)
    line = proc.stderr.strip().splitlines()[-1]
    assert proc.returncode == 2 and "--rescale.targets" not in line, proc.stderr[-2000:]
    assert "pretraining" in line and not (tmp_path / "run" / "config.json").exists()


# --------------------------------------------------------------------------- what held must keep holding
@pytest.mark.parametrize("name, argv", [
    ("memory_phases", ["--preset", "smoke", "--train.steps=60", "--train.eval_every=5",
                       "--train.checkpoint_every=10"]),
    ("igb_rescale", ["--preset", "smoke", "--finetune.steps=60", "--finetune.eval_every=5",
                     "--finetune.checkpoint_every=10"]),
])
def test_kill_9_in_the_reported_run_then_resume_is_byte_identical(tmp_path, name, argv):
    ref, out = tmp_path / "ref", tmp_path / "killed"
    assert cli(name, *argv, "--out", str(ref)).returncode == 0
    proc = start_until_epoch(name, argv, out, 20, timeout=900)        # kill once step 20's rows are on disk
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert not (out / "summary.json").exists()
    done = cli(name, "--out", str(out), "--resume")
    assert done.returncode == 0, done.stderr[-2000:]
    for file in ("summary.json", "metrics.jsonl"):
        assert (out / file).read_bytes() == (ref / file).read_bytes(), file
