"""Issue 35 ("Never lose a run, round three"): the inputs of the new studies, the environment, empty lists.

Every refusal is one line on stderr and exit status 2, before any file is written: the run directory does not even
exist afterwards, so nothing blocks the corrected rerun.
"""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import forgetting, igb_rescale, igb_train, memory_phases
from jaxinit import budget
from jaxinit.errors import ConfigError
from jaxinit.run.config_parse import parse_overrides

ROOT = Path(__file__).resolve().parents[1]
RUN = {"memory_phases": memory_phases.run, "igb_train": igb_train.run, "igb_rescale": igb_rescale.run,
       "forgetting": forgetting.run}


def refused(capsys, tmp_path, name, argv, fragment) -> str:
    out = tmp_path / "run"
    capsys.readouterr()
    assert RUN[name](["--preset", "smoke", "--out", str(out), *argv]) == 2
    err = [ln for ln in capsys.readouterr().err.strip().splitlines() if ln]
    assert len(err) == 1 and err[0].startswith("error:") and fragment in err[0], err
    assert not out.exists()
    return err[0]


# --------------------------------------------------------------------------- item 5: swept points in float32
@pytest.mark.parametrize("name, argv, fragment", [
    ("memory_phases", ["--phases.line=1.00000001"], "--phases.line has repeated values in float32"),
    ("memory_phases", ["--phases.line=0.5,0.5000000001"], "--phases.line has repeated values in float32"),
    ("memory_phases", ["--phases.line=1e-46"], "--phases.line: the point 1e-46xEOC"),
    ("memory_phases", ["--phases.ordered_factor=1e-300"], "--phases.ordered_factor: the point ordered-deep"),
    ("memory_phases", ["--phases.line=1e300"], "overflows float32"),
    ("memory_phases", ["--phases.neutral_factor=1e300"], "--phases.neutral_factor: the point neutrality"),
    ("igb_train", ["--phases.eoc_factors=0.5,0.5"], "--phases.eoc_factors has repeated values in float32"),
    ("igb_train", ["--phases.eoc_factors=1.0"], "1xEOC (tanh, depth 3) equals EOC (tanh, depth 3)"),
    ("forgetting", ["--sweep.sigma_w=1.0,1.00000001"], "--sweep.sigma_w has repeated values in float32"),
])
def test_swept_points_are_checked_as_trained(tmp_path, capsys, name, argv, fragment):
    refused(capsys, tmp_path, name, argv, fragment)


def test_the_shared_check_reads_points_as_float32():
    from jaxinit import swept
    with pytest.raises(ConfigError, match="underflows"):      # 0 only where allowed
        swept.check_points([swept.Point("a", "p", (1.0, 0.0))])
    swept.check_points([swept.Point("a", "p", (1.0, 0.0)), swept.Point("a", "q", (1.0 + 1e-6, 0.0))],
                       zero_ok=(False, True))
    for points, fragment in [([swept.Point("a", "p", (0.0, 1.0))], "underflows"),
                             ([swept.Point("a", "p", (1e-39, 1.0))], "underflows"),    # subnormal: flushed to 0
                             ([swept.Point("a", "p", (4e38, 1.0))], "overflows"),
                             ([swept.Point("a", "p", (1.0, 1.0)), swept.Point("b", "q", (1.00000001, 1.0))],
                              r"--b has repeated values in float32 \(training.s dtype\): the point q equals p")]:
        with pytest.raises(ConfigError, match=fragment):
            swept.check_points(points, zero_ok=(False, True))


# --------------------------------------------------------------------------- values and sizes before any file
@pytest.mark.parametrize("name, argv, fragment", [
    ("memory_phases", ["--train.strategy=chunked", "--train.chunk=0"], "chunk must be >= 1"),
    ("memory_phases", ["--train.chunk=-1"], "chunk must be >= 1"),
    ("igb_train", ["--train.strategy=chunked", "--train.chunk=0"], "chunk must be >= 1"),
    ("igb_train", ["--train.chunk=-1"], "chunk must be >= 1"),
    ("memory_phases", ["--train.batch_size=100000"], "--train.batch_size=100000 exceeds the 256 training examples"),
    ("igb_train", ["--train.batch_size=100000"], "--train.batch_size=100000 exceeds the"),
])
def test_values_and_batches_are_refused_before_any_file(tmp_path, capsys, name, argv, fragment):
    refused(capsys, tmp_path, name, argv, fragment)


@pytest.mark.parametrize("name, argv, fragment", [
    ("memory_phases", ["--train.n_off=4000"], "on 4,000 inputs (train.n_off)"),     # XLA aborted on 1e9 (exit 134)
    ("memory_phases", ["--phases.seeds=10000"], "training every case's reported members"),   # MemoryError on 1e7
    ("igb_train", ["--phases.seeds=10000"], "training every case's reported members"),
])
def test_sizes_are_estimated_against_this_machine_before_anything_is_allocated(tmp_path, capsys, monkeypatch, name,
                                                                             argv, fragment):
    monkeypatch.setattr(budget, "machine_memory", lambda: 100 * 2**20)      # a 100 MB machine: safe either way
    refused(capsys, tmp_path, name, argv, fragment)


def test_the_evaluations_gram_matrix_is_counted_per_member_at_once():
    assert budget.members_at_once("vmap", 4, 30) == 30 and budget.members_at_once("chunked", 4, 30) == 4
    assert budget.members_at_once("sequential", 4, 30) == 1
    with pytest.raises(ConfigError, match=r"evaluating 1 member\(s\) at once on 1,000,000,000 inputs"):
        budget.check_gram({"train.n_off": 10**9, "test": 100}, 1)


# --------------------------------------------------------------------------- empty lists where --help documents them
def test_empty_lists_where_help_says_what_empty_means():
    cfg = parse_overrides(memory_phases.EXPERIMENT.presets["smoke"], ["--phases.names=", "--train.steps=3"])
    assert cfg.phases.names == () and cfg.train.steps == 3
    assert parse_overrides(memory_phases.EXPERIMENT.presets["smoke"], ["--phases.names", ""]).phases.names == ()
    assert parse_overrides(igb_rescale.EXPERIMENT.presets["smoke"], ["--rescale.targets="]).rescale.targets == ()
    with pytest.raises(ConfigError, match="--model.depths"):           # no meaning for empty: still refused
        parse_overrides(memory_phases.EXPERIMENT.presets["smoke"], ["--model.depths="])


# --------------------------------------------------------------------------- the environment
def _experiment(env: dict, *argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "experiments.phase_diagram", *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=300, env={**os.environ, **env})


def test_a_matmul_precision_jax_refuses_is_one_line(tmp_path):
    proc = _experiment({"JAX_DEFAULT_MATMUL_PRECISION": "bogus"}, "--preset", "smoke", "--out", str(tmp_path / "o"))
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1 and "JAX_DEFAULT_MATMUL_PRECISION=bogus" in err[0], proc.stderr
    assert not (tmp_path / "o").exists()


def test_an_xla_flag_xla_does_not_define_is_one_line_not_an_abort(tmp_path):
    proc = _experiment({"XLA_FLAGS": "--xla_bogus_flag=1"}, "--preset", "smoke", "--out", str(tmp_path / "o"))
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1 and "--xla_bogus_flag=1 names no flag" in err[0], proc.stderr


def test_xla_flags_are_looked_up_in_xla_itself():
    from jaxinit.run import environment
    environment.check_xla_flags("--xla_backend_optimization_level=0 --xla_force_host_platform_device_count=2 "
                                "--xla_cpu_enable_fast_math=false")
    for bad in ("--xla_bogus_flag=1", "--tf_xla_auto_jit=1", "--xla_dump", "xla_cpu_x", "--xla=1"):
        with pytest.raises(ConfigError, match="XLA_FLAGS"):
            environment.check_xla_flags(bad)
