"""Issue 20 ("Never lose a run, round two") end to end: each numbered case as the user met it.

Most cases start from one finished smoke run (module-scoped, copied per test: compiles cost seconds)
and run the experiment's CLI in-process (`experiments.forgetting.run`), asserting the documented
one-line refusal or recovery and that nothing a user had is lost.
"""
import json
import os
import shutil
import signal
import subprocess
import sys
from dataclasses import dataclass, replace
from pathlib import Path

import flax.linen as nn
import jax
import pytest

from experiments import forgetting as F
from experiments import phase_diagram as P
from jaxinit.train import engine
from jaxinit import forgetting
from jaxinit.run import cli, manifest, rundir, runinfo
from jaxinit.config import DataConfig, ModelConfig, Preset, Presets, SweepConfig, TrainConfig
from jaxinit.errors import ConfigError
from jaxinit.forgetting import loop

ROOT = Path(__file__).resolve().parent.parent
SMOKE = ["--preset", "smoke"]


def _one_line(capsys, fragment: str, continued: bool = False) -> str:
    """The one line on stderr (``continued``: after the note that a same-config rerun continues the run)."""
    err = [ln for ln in capsys.readouterr().err.strip().splitlines()
           if ln and not (continued and ln.startswith("continuing the run"))]
    assert len(err) == 1 and fragment in err[0] and "Traceback" not in err[0], err
    return err[0]


def _snapshot(d: Path) -> dict[str, bytes]:
    """Every file under ``d`` (the lock aside: its holder line changes) by relative path."""
    return {p.relative_to(d).as_posix(): p.read_bytes() for p in sorted(d.rglob("*"))
            if p.is_file() and not p.is_symlink() and p.name != manifest.LOCK}


@pytest.fixture(scope="module")
def finished(tmp_path_factory):
    out = tmp_path_factory.mktemp("finished") / "run"
    assert F.run(SMOKE + ["--out", str(out)]) == 0
    return out


@pytest.fixture
def run_copy(finished, tmp_path):
    out = tmp_path / "run"
    shutil.copytree(finished, out, symlinks=True)
    return out


# --------------------------------------------------------------------------- 1: resume keeps a user's files
def test_resume_and_a_same_config_rerun_keep_a_users_files_in_figures(run_copy, capsys):
    out = run_copy
    (out / "figures" / "my.pdf").write_text("x")
    (out / "figures" / "drafts").mkdir()
    (out / "figures" / "drafts" / "d.txt").write_text("draft")
    assert F.run(["--out", str(out), "--resume"]) == 0
    assert F.run(SMOKE + ["--out", str(out)]) == 0
    assert (out / "figures" / "my.pdf").read_text() == "x"
    assert (out / "figures" / "drafts" / "d.txt").read_text() == "draft"
    assert (out / "figures" / "acc_vs_sigma.png").exists()          # the run's own figures were redrawn
    # Item 5: provenance gains a segment per part of the run, never replaced.
    segments = json.loads((out / "run.json").read_text())["provenance"]
    assert [s["resumed"] for s in segments] == [False, True, True]
    assert "figures/my.pdf" in capsys.readouterr().err             # said so, once per part


# --------------------------------------------------------------------------- 2: --overwrite validates first
@pytest.mark.parametrize("bad", [["--train.batch_size=100000"], ["--data.n_val=5000"]])
def test_an_overwrite_that_cannot_start_leaves_the_finished_run_byte_identical(run_copy, capsys, bad):
    before = _snapshot(run_copy)
    capsys.readouterr()
    assert F.run(SMOKE + ["--out", str(run_copy), "--overwrite"] + bad) == 2
    _one_line(capsys, "error:")
    assert _snapshot(run_copy) == before


def test_overwrite_and_resume_delete_only_the_runs_own_files(run_copy):
    out = run_copy
    (out / "clocks.jsonl").write_text("| mine |")    # a run file's name (not one this study writes), but a user's
    (out / "checkpoints" / "999").mkdir()
    (out / "checkpoints" / "999" / "README.txt").write_text("keep")  # item 9: a foreign folder in checkpoints/
    (out / "checkpoints" / "90.pt").write_bytes(b"weights")
    assert F.run(["--out", str(out), "--resume"]) == 0
    assert F.run(SMOKE + ["--out", str(out), "--overwrite", "--train.epochs=1"]) == 0
    assert (out / "clocks.jsonl").read_text() == "| mine |"
    assert (out / "checkpoints" / "999" / "README.txt").read_text() == "keep"
    assert (out / "checkpoints" / "90.pt").read_bytes() == b"weights"
    assert json.loads((out / "config.json").read_text())["train"]["epochs"] == 1
    assert not (out / "checkpoints" / "18").exists()                  # the old run's own checkpoint went


# --------------------------------------------------------------------------- 3: checkpoint metadata
def test_an_edited_epoch_in_checkpoint_metadata_is_not_trained_on(run_copy, capsys):
    out = run_copy
    newest = max((p for p in (out / "checkpoints").iterdir() if p.name.isdigit()), key=lambda p: int(p.name))
    meta = newest / "meta" / "metadata"
    text = meta.read_text()
    assert '"epoch": 2' in text
    meta.write_text(text.replace('"epoch": 2', '"epoch": 1'))
    summary, metrics = (out / "summary.json").read_bytes(), (out / "metrics.jsonl").read_bytes()
    capsys.readouterr()
    assert F.run(SMOKE + ["--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"checkpoint {newest.name} (its metadata do not match" in err and "resuming from checkpoint" in err
    assert (out / "summary.json").read_bytes() == summary and (out / "metrics.jsonl").read_bytes() == metrics


# --------------------------------------------------------------------------- 4: no checkpoints
def test_a_finished_run_without_checkpoints_is_resummarised_not_retrained(run_copy, capsys, monkeypatch):
    out = run_copy
    shutil.rmtree(out / "checkpoints")
    summary, metrics = (out / "summary.json").read_bytes(), (out / "metrics.jsonl").read_bytes()

    def no_training(*a, **k):
        raise AssertionError("a finished run was trained again")
    monkeypatch.setattr(engine, "train_epoch", no_training)
    capsys.readouterr()
    assert F.run(SMOKE + ["--out", str(out)]) == 0
    assert "re-summarised from metrics.jsonl" in capsys.readouterr().err
    assert (out / "summary.json").read_bytes() == summary and (out / "metrics.jsonl").read_bytes() == metrics


def test_an_unfinished_run_without_checkpoints_is_refused_and_keeps_its_rows(run_copy, capsys):
    out = run_copy
    shutil.rmtree(out / "checkpoints")
    rows = (out / "metrics.jsonl").read_text().splitlines(keepends=True)
    kept = "".join(r for r in rows if json.loads(r)["epoch"] < 2)       # killed before the last evaluation
    (out / "metrics.jsonl").write_text(kept)
    capsys.readouterr()
    assert F.run(SMOKE + ["--out", str(out)]) == 2
    _one_line(capsys, "no checkpoint to continue from", continued=True)
    assert (out / "metrics.jsonl").read_text() == kept


# --------------------------------------------------------------------------- 5: the numeric environment
def test_a_rerun_under_x64_is_refused_naming_it(run_copy, capsys):
    before = _snapshot(run_copy)
    capsys.readouterr()
    jax.config.update("jax_enable_x64", True)
    try:
        code = F.run(SMOKE + ["--out", str(run_copy)])
    finally:
        jax.config.update("jax_enable_x64", False)
    assert code == 2
    assert "with: x64 " in _one_line(capsys, "numeric environment differs from the one the run started with")
    assert _snapshot(run_copy) == before


def test_a_run_made_before_fingerprints_adopts_one_on_its_first_resume(tmp_path):
    out = tmp_path / "o"
    assert _tiny(["--out", str(out)]) == 0
    (out / runinfo.FINGERPRINT).unlink()
    assert _tiny(["--out", str(out), "--resume"]) == 0
    assert set(json.loads((out / runinfo.FINGERPRINT).read_text())) == {"config", "environment"}


# --------------------------------------------------------------------------- 6: an edited config.json
@pytest.fixture(scope="module")
def phase_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("phase") / "run"
    assert P.run(["--preset", "smoke", "--timing.enabled=false", "--out", str(out)]) == 0
    return out


def test_resume_with_an_edited_config_json_is_refused(phase_run, tmp_path, capsys):
    out = tmp_path / "run"
    shutil.copytree(phase_run, out)
    cfg = json.loads((out / "config.json").read_text())
    cfg["grid"]["depth"] += 1
    (out / "config.json").write_text(json.dumps(cfg))
    npz = (out / "phase_diagram.npz").read_bytes()
    capsys.readouterr()
    assert P.run(["--out", str(out), "--resume"]) == 2
    assert "grid.depth" in _one_line(capsys, "config.json differs from the one the run started with")
    assert (out / "phase_diagram.npz").read_bytes() == npz


def test_igb_init_resume_with_an_edited_config_json_never_reuses_cached_results(tmp_path, capsys):
    # The edit: grid 3 -> 4 values and probe.seed 0 -> 7. The refusal comes before any probe runs,
    # so the run directory is made by the CLI with a main that only saves one cached result.
    import numpy as np
    from experiments import igb_init
    from jaxinit.shared import sink

    def igb(main, argv):
        return cli.run(replace(igb_init.EXPERIMENT, default="smoke", main=main, replot=None),
                       argv)
    out = tmp_path / "run"
    assert igb(lambda cfg, o, r: sink.saver(o)("gaussian__mlp_tanh", {"a": np.arange(3)}), ["--out", str(out)]) == 0
    cfg = json.loads((out / "config.json").read_text())
    cfg["grid"]["sigma_w2"] = [1.0, 2.0, 3.0, 4.0]
    cfg["probe"]["seed"] = 7
    (out / "config.json").write_text(json.dumps(cfg))
    cached = (out / "results" / "gaussian__mlp_tanh.npz").read_bytes()
    capsys.readouterr()
    assert igb(igb_init.main, ["--out", str(out), "--resume"]) == 2
    assert "grid.sigma_w2, probe.seed" in _one_line(capsys, "config.json differs from the one the run started with")
    assert (out / "results" / "gaussian__mlp_tanh.npz").read_bytes() == cached and not (out / "summary.json").exists()


# --------------------------------------------------------------------------- 15: phase_diagram --replot
def test_phase_diagram_replot_redraws_from_the_saved_arrays(phase_run, tmp_path, capsys):
    out = tmp_path / "run"
    shutil.copytree(phase_run, out)
    shutil.rmtree(out / "figures")
    assert P.run(["--replot", str(out)]) == 0
    assert sorted(p.name for p in (out / "figures").iterdir()) == ["c_gamma_layers.png", "phase_diagram.png"]
    assert rundir.foreign_entries(out) == []                            # recorded as the run's own


# --------------------------------------------------------------------------- 7: the user's model
TINY = replace(forgetting.preset("smoke"),
               data=DataConfig(name="gaussian", n_samples=600, dim=16, n_train=256, n_val=128),
               model=ModelConfig(name="mlp", width=16, depth=1), train=TrainConfig(batch_size=64, epochs=1),
               sweep=SweepConfig(sigma_w=(0.5, 2.0), seeds=1, optimizers=("sgd",)))


class TinyRelu(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool = False):
        return nn.Dense(10)(nn.relu(nn.Dense(16)(x.reshape(x.shape[0], -1))))


class TinyTanh(nn.Module):
    @nn.compact
    def __call__(self, x, train: bool = False):
        return nn.Dense(10)(nn.tanh(nn.Dense(16)(x.reshape(x.shape[0], -1))))


def test_resuming_with_another_model_is_refused(tmp_path):
    out = tmp_path / "fit"
    forgetting.fit(TINY, out, model=TinyRelu(), progress=False)
    metrics = (out / "metrics.jsonl").read_bytes()
    with pytest.raises(ConfigError, match="model differs from the one the run started with: class ") as err:
        forgetting.fit(TINY, out, model=TinyTanh(), resume=True, progress=False)
    assert "\n" not in str(err.value) and (out / "metrics.jsonl").read_bytes() == metrics
    with pytest.raises(ConfigError, match="model differs"):         # the registry's model is another one too
        forgetting.fit(TINY, out, resume=True, progress=False)
    (out / "figures").mkdir(exist_ok=True)
    (out / "figures" / "my.pdf").write_text("x")                                # item 1 through the library
    forgetting.fit(TINY, out, model=TinyRelu(), resume=True, progress=False)   # the same model continues
    assert (out / "figures" / "my.pdf").read_text() == "x"


# --------------------------------------------------------------------------- 9, 10: nesting, links
def test_an_out_inside_a_runs_checkpoints_is_refused(finished, capsys):
    nested = finished / "checkpoints" / "999"
    assert F.run(SMOKE + ["--out", str(nested)]) == 2
    _one_line(capsys, "lies inside the run")
    assert not nested.exists()


def test_a_symlinked_figures_folder_is_never_written_through_or_emptied(run_copy, tmp_path, capsys):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "keep.png").write_bytes(b"mine")
    shutil.copy(run_copy / "figures" / "acc_vs_sigma.png", elsewhere / "acc_vs_sigma.png")   # same bytes as the run's
    shutil.rmtree(run_copy / "figures")
    (run_copy / "figures").symlink_to(elsewhere)
    before = _snapshot(elsewhere)
    capsys.readouterr()
    assert F.run(["--out", str(run_copy), "--resume"]) == 2
    _one_line(capsys, "is a symbolic link to")
    assert _snapshot(elsewhere) == before


def test_a_symlinked_lock_is_refused_and_its_target_kept(tmp_path, capsys):
    precious = tmp_path / "precious"
    precious.write_text("precious")
    out = tmp_path / "o"
    out.mkdir()
    (out / manifest.LOCK).symlink_to(precious)
    assert _tiny(["--out", str(out)]) == 2
    _one_line(capsys, "is a symbolic link")
    assert precious.read_text() == "precious" and not (out / "config.json").exists()


# --------------------------------------------------------------------------- 11: signals in every phase
def _signal_from(monkeypatch, owner, name):
    original = getattr(owner, name)

    def send(*args, **kwargs):
        os.kill(os.getpid(), signal.SIGTERM)
        return original(*args, **kwargs)
    monkeypatch.setattr(owner, name, send)


@pytest.mark.parametrize("phase", ["set-up", "end of training", "figures"])
def test_sigterm_in_any_phase_stops_with_143_and_one_line(run_copy, capsys, monkeypatch, phase):
    from jaxinit.forgetting import plotting
    from jaxinit.run import sink
    owner, name = {"set-up": (loop, "study"), "end of training": (sink.RunFiles, "finish"),
                   "figures": (plotting, "make_all")}[phase]
    _signal_from(monkeypatch, owner, name)
    capsys.readouterr()
    assert F.run(SMOKE + ["--out", str(run_copy)]) == 143
    _one_line(capsys, "stopped by SIGTERM", continued=True)
    assert json.loads((run_copy / "run.json").read_text())["provenance"][-1]["status"] == "stopped by SIGTERM"


# --------------------------------------------------------------------------- 14: environment, damaged files
def test_garbage_xla_flags_is_one_line_and_exit_2(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XLA_FLAGS", os.environ.get("XLA_FLAGS", "") + " garbage")
    assert _tiny(["--out", str(tmp_path / "o")]) == 2
    _one_line(capsys, "XLA_FLAGS")
    assert not (tmp_path / "o").exists()


def test_a_platform_this_machine_lacks_is_one_line_and_exit_2(tmp_path):
    env = {**os.environ, "JAX_PLATFORMS": "gpu" if jax.default_backend() == "cpu" else "tpu"}
    proc = subprocess.run([sys.executable, "-m", "experiments.forgetting", "--preset", "smoke", "--out",
                           str(tmp_path / "o")], cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1 and "JAX_PLATFORMS" in err[0], err
    assert not (tmp_path / "o" / "config.json").exists()


def test_metrics_damaged_during_the_run_end_in_one_line_not_a_traceback(run_copy, capsys, monkeypatch):
    original = F.fit

    def fit_then_damage(*args, **kwargs):
        res = original(*args, **kwargs)
        lines = (run_copy / "metrics.jsonl").read_text().splitlines(keepends=True)
        lines[3] = lines[3][: len(lines[3]) // 2] + "\n"             # another process cut a line
        (run_copy / "metrics.jsonl").write_text("".join(lines))
        return res
    monkeypatch.setattr(F, "fit", fit_then_damage)
    capsys.readouterr()
    assert F.run(SMOKE + ["--out", str(run_copy)]) == 2
    _one_line(capsys, "figures not drawn", continued=True)
    assert json.loads((run_copy / "summary.json").read_text())["members"]           # the results are written


# --------------------------------------------------------------------------- a tiny experiment for the CLI-only cases
@dataclass(frozen=True)
class _Cfg:
    train: TrainConfig = TrainConfig()
    """training"""


def _tiny_main(cfg, out, resume):
    manifest.Manifest(out).write_json(out / "summary.json", {"epochs": cfg.train.epochs})


_TINY = cli.Experiment(name="x", doc="doc", presets=Presets({"a": Preset(_Cfg(), "the defaults")}), default="a",
                       main=_tiny_main)


def _tiny(argv):
    return cli.run(_TINY, argv)
