"""experiments.accel_check: every variant in a process of its own, under its own limit, the parent without jax.

The tiny check runs end to end on a CPU (one subprocess per variant, an injected hang killed with its
process group at its limit and an injected abort, while the others still record); the records, the table,
PyTorch's ratios and the projection are read from what it wrote. Speed is the check's output, never a
test's condition: nothing here bounds a measured time.
"""
import json
import os
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import accel_check
from jaxinit.tools import accel_plan, accel_report, bench, projection, standin

ROOT = Path(__file__).resolve().parents[1]
# What the GPU machine lacks (its Python has jax, flax, optax, orbax, numpy, scipy, matplotlib, tqdm, torch):
BLOCKER = """
import importlib.abc, sys
class _Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in {"tyro", "mnist1d", "tensorflow_datasets"}:
            raise ImportError(f"{name} is blocked by the test")
sys.meta_path.insert(0, _Block())
"""
RUN = """
import sys
from experiments import accel_check
code = accel_check.main(sys.argv[1:])
print("JAX_IN_PARENT", "jax" in sys.modules, "TORCH_IN_PARENT", "torch" in sys.modules)
sys.exit(code)
"""


def _check(out: Path, *argv: str) -> subprocess.CompletedProcess:
    """The check in a process of its own, every process of it without tyro, mnist1d or tfds."""
    block = out.parent / "block"
    block.mkdir(parents=True, exist_ok=True)
    (block / "sitecustomize.py").write_text(BLOCKER)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(block), str(ROOT)])}
    return subprocess.run([sys.executable, "-c", RUN, "--out", str(out), *argv], cwd=ROOT, capture_output=True,
                          text=True, timeout=1500, env=env)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    out = tmp_path_factory.mktemp("accel") / "check"
    done = _check(out, "--tiny", "--deadline", "1200")                 # a loaded CI machine
    records = [json.loads(line) for line in (out / "accel.jsonl").read_text().splitlines()]
    return done, out, records, accel_report.by_variant(records)


def _plan_names() -> list[str]:
    first = accel_plan.first_variants(accel_plan.TINY)
    return [v.name for v in first]


# --------------------------------------------------------------------------- the tiny check end to end
def test_tiny_check_runs_every_variant_in_its_own_process_and_the_parent_imports_no_jax(tiny):
    done, out, records, groups = tiny
    assert done.returncode == 0, done.stderr[-3000:]
    assert "JAX_IN_PARENT False TORCH_IN_PARENT False" in done.stdout
    assert sorted(p.name for p in out.iterdir()) == ["accel.jsonl", "accel.log", "table.md"]
    names = list(groups)
    assert names[:len(_plan_names())] == _plan_names()
    winner = accel_plan.winner(accel_plan.first_variants(accel_plan.TINY),
                               {n: g["timed"]["step_s"] for n, g in groups.items() if "timed" in g})
    later = [v.name for v in accel_plan.later_variants(accel_plan.TINY, winner)]
    assert names[len(_plan_names()):] == later and later[-1] == "vmapgrad-lax-bf16"
    pids = {g["started"]["pid"] for g in groups.values() if "started" in g}
    assert len(pids) == len(names) and os.getpid() not in pids          # one process each
    for name, g in groups.items():
        assert "end" in g and records.index(g["end"]) > records.index(g["started"]), name


def test_a_hanging_and_a_crashing_variant_are_recorded_and_the_others_still_run(tiny):
    _, _, records, groups = tiny
    hang, crash = groups["hang"]["end"], groups["crash"]["end"]
    assert hang["status"] == "timeout" and hang["limit_s"] == 3.0 and "process group" in hang["error"]
    assert crash["status"] == "crashed" and crash["rc"] < 0 and "SIGABRT" in crash["error"]
    helper = groups["hang"]["started"]["helper_pid"]
    assert not Path(f"/proc/{helper}").exists() or "zombie" in Path(f"/proc/{helper}/status").read_text().lower()
    after = [n for n in groups if records.index(groups[n]["end"]) > records.index(crash)]
    assert after and all(groups[n]["end"]["status"] == "ok" for n in after if n not in ("hang", "crash"))


def test_each_training_variant_records_compile_timing_memory_flops_and_its_convolutions(tiny):
    _, _, _, groups = tiny
    for name, g in groups.items():
        if name in ("preflight", "torch", "hang", "crash"):
            continue
        c, t = g["compiled"], g["timed"]
        assert g["end"]["status"] == "ok" and c["compile_s"] > 0 and c["member_step_flop"] > 0, name
        assert t["steps"] == t["steps_asked"] == 20 and 0 < t["step_s_min"] <= t["step_s"], name
        assert t["member_steps_per_s"] == pytest.approx(3 / t["step_s"])
        dtype = "bf16" if name.endswith("bf16") else "f32"
        if "im2col" not in name:
            assert c["lowered"]["conv_dtypes"] == {dtype: 23} and c["lowered"]["weight_gradient"] == 8, name
        assert c["calls"] == {}                                            # a CPU: no library calls
    assert groups["batched-lax-bf16"]["compiled"]["lowered"]["weight_gradient_batch_grouped"] == 8
    assert groups["batched-lax-bf16"]["compiled"]["lowered"]["weight_gradient_feature_grouped"] == 0
    assert groups["vmapgrad-lax-bf16"]["compiled"]["lowered"]["weight_gradient_feature_grouped"] == 8
    assert groups["sequential-lax-bf16"]["compiled"]["chunks"] == 3
    assert groups["batched-lax-bf16"]["eval"]["s_per_example"] > 0


def test_preflight_and_the_pytorch_reference(tiny):
    _, _, _, groups = tiny
    pre = groups["preflight"]
    assert pre["preflight"]["backend"] == "cpu" and pre["preflight"]["versions"]["jax"] == jax.__version__
    assert set(pre["matmul"]["measured_flops"]) == {"bf16", "tf32", "float32"}
    torch = groups["torch"]
    try:
        import torch as _  # noqa: F401
    except ImportError:
        assert "torch does not import" in torch["skipped"]["reason"]
        return
    batches = [r["batch"] for r in tiny[2] if r["variant"] == "torch" and r["record"] == "torch"]
    assert torch["end"]["status"] == "ok" and batches == [8, 24] and torch["torch"]["step_s"] > 0


def test_the_table_ratios_and_projection_are_printed_last(tiny):
    done, out, records, groups = tiny
    text = (out / "table.md").read_text()
    assert text.strip() in done.stdout
    rows = [ln for ln in text.splitlines() if ln.startswith("| ") and not ln.startswith("| variant")]
    assert [r.split(" | ")[0][2:] for r in rows] == [n for n in groups if n not in ("preflight", "torch")]
    assert any(ln.startswith("projection of the paper table at ") for ln in text.splitlines())
    try:
        import torch as _  # noqa: F401
        assert "PyTorch single-member steps:" in text
    except ImportError:
        assert "PyTorch reference: none" in text
    printed = [ln for ln in done.stdout.splitlines() if ln.startswith("[")]
    assert len(printed) == len([r for r in records if accel_report.line(r)])


def test_a_deadline_too_short_runs_nothing_and_still_writes_the_table(tmp_path):
    done = _check(tmp_path / "late", "--tiny", "--deadline", "0.5")
    assert done.returncode == 0, done.stderr
    records = [json.loads(ln) for ln in (tmp_path / "late" / "accel.jsonl").read_text().splitlines()]
    ends = {r["variant"]: r["status"] for r in records if r["record"] == "end"}
    assert {s for n, s in ends.items() if n not in ("hang", "crash")} == {"not run"}
    assert "projection: none" in done.stdout


FAKE_PYTHON = """#!{python}
import json, os, sys
if "autotune" in os.environ.get("XLA_FLAGS", ""):
    print("F external/xla/debug_options_flags.cc] Unknown flags in XLA_FLAGS: --xla_gpu_dump_autotune", file=sys.stderr)
    sys.exit(1)
print("@accel " + json.dumps({{"record": "started", "pid": os.getpid()}}), flush=True)
"""


def test_an_xla_without_the_autotune_flags_reruns_the_preflight_without_them(tmp_path):
    from jaxinit.tools.accel_runner import Check
    fake = tmp_path / "python"
    fake.write_text(FAKE_PYTHON.format(python=sys.executable))
    fake.chmod(0o755)
    out = tmp_path / "out"
    out.mkdir()
    check = Check(accel_plan.TINY, out, 60.0, t0=__import__("time").monotonic(), python=str(fake),
                  only=("preflight",), say=lambda *a, **k: None)
    records = check.run()
    ends = [r for r in records if r["record"] == "end"]
    assert [e["status"] for e in ends] == ["crashed", "ok"] and "Unknown flags" in ends[0]["error"]
    assert check.autotune is False and "XLA_FLAGS" not in {k for k, v in check.env().items() if "autotune" in v}


def test_merge_autotune_keeps_one_version_and_every_result_once():
    a = 'version: 3\nresults {\n  device: "sm_90"\n  hlo: "{x} \\"q{\\" "\n  result { gemm { algorithm: 1 } }\n}\n'
    b = ('version: 3\nresults {\n  device: "sm_90"\n  hlo: "{x} \\"q{\\" "\n  result { gemm { algorithm: 1 } }\n}\n'
         'results {\n  device: "sm_90"\n  hlo: "y"\n  result { gemm { algorithm: 2 } }\n}\n')
    merged = accel_report.merge_autotune(a, b)
    assert merged.count("version: 3") == 1 and merged.count("results {") == 2 and 'hlo: "y"' in merged
    assert accel_report.merge_autotune("", a).count("results {") == 1
    assert accel_report.merge_autotune(merged, b) == merged


# --------------------------------------------------------------------------- command line
@pytest.mark.parametrize("argv, fragment", [
    (["--deadline", "0"], "--deadline"),
    (["--deadline", "soon"], "--deadline"),
    (["--deadline", "1e30"], "< 1000000"),          # names the bound it broke, not "> 0"
    (["--bogus"], "--bogus"),
])
def test_bad_command_line_is_one_line_and_exit_2(argv, fragment, capsys, tmp_path):
    assert accel_check.main(argv + ["--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and fragment in err[0], err
    assert not (tmp_path / "x").exists()


def test_full_check_without_an_accelerator_is_one_line(capsys, tmp_path, monkeypatch):
    monkeypatch.setattr(accel_check, "accelerator_visible", lambda: False)
    assert accel_check.main(["--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--tiny" in err[0] and not (tmp_path / "x").exists()


def test_make_accel_check_is_the_one_call():
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    done = subprocess.run(["make", "--no-print-directory", "-n", "accel-check", "RUNS=somewhere", "ACCEL_PY=py"],
                          cwd=ROOT, capture_output=True, text=True, env={**env, "OUT": "exported"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines() == ["PYTHONUNBUFFERED=1 py -m experiments.accel_check --out "
                                                "somewhere/accel_check --deadline 290"]


# --------------------------------------------------------------------------- the cost model
def test_paper_table_shape_and_flops_match_the_stated_numbers():
    from jaxinit.forgetting.config import PAPER
    whole = replace(PAPER, train=replace(PAPER.train, checkpoint_every=5,
                                         **({"eval_train_subset": 0} if hasattr(PAPER.train, "eval_train_subset")
                                            else {})))
    t = projection.paper_table(whole)
    assert (len(t.settings), t.members, t.epochs, t.steps_per_epoch) == (7, 24, 200, 351)
    assert (t.eval_examples, t.evaluations, t.checkpoint_saves) == (60_000, 201, 40)
    flops = projection.table_flops(t)
    assert flops["total_flop"] == pytest.approx(4.44e18, rel=2e-3)
    assert flops["train_flop"] == pytest.approx(24 * 351 * 200 * (6 * 253.8e9 + 321.0e9))
    if getattr(PAPER.train, "eval_train_subset", 0):
        assert projection.paper_table().eval_examples == PAPER.train.eval_train_subset + 15_000


def test_project_sums_the_parts_and_names_what_it_assumed():
    t = projection.paper_table()
    rates = {"step_s": {"sgd": 1.0, "muon": 3.0}, "eval_s_per_example": 1e-3, "checkpoint_s": 10.0,
             "checkpoint_bytes": 100, "achieved_flops": 1e15}
    p = projection.project(t, rates)
    assert p["train_h"] == pytest.approx((6 * 1.0 + 3.0) * t.steps_per_epoch * t.epochs / 3600)
    assert p["eval_h"] == pytest.approx(7 * t.evaluations * t.eval_examples * 1e-3 / 3600)
    assert p["checkpoint_h"] == pytest.approx(7 * t.checkpoint_saves * 10.0 / 3600)
    assert p["assumed"] == ["adam at sgd's step time (no adam measurement)",
                            "adamw at sgd's step time (no adam measurement)"] and not p["complete"]
    assert p["hours_at_train_flop_rate"] == pytest.approx(p["total_flop"] / 1e15 / 3600)
    assert projection.project(t, {"step_s": {"adam": 1.0}})["hours"] is None


def test_resnet9_parameter_count_is_the_stated_one():
    from jaxinit.config import ModelConfig
    from jaxinit.models import make_model
    params, _ = jax.eval_shape(make_model(ModelConfig(name="resnet9"), (32, 32, 3), 10).init, jax.random.key(0), 1.0)
    assert sum(int(np.prod(x.shape)) for x in jax.tree.leaves(params)) == projection.RESNET9_PARAMS


# --------------------------------------------------------------------------- the MNIST stand-in
def test_mnist_standin_loads_as_the_igb_paper_preset_reads_it(tmp_path):
    from jaxinit.data import load_dataset, read_idx
    from jaxinit.igb.config_train import PAPER
    folder = standin.write_mnist_standin(tmp_path, n_train=12, n_test=6, seed=1)
    assert sorted(p.name for p in folder.iterdir()) == ["t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte",
                                                         "train-images-idx3-ubyte", "train-labels-idx1-ubyte"]
    assert read_idx(folder / "train-images-idx3-ubyte").shape == (12, 28, 28)
    ds = load_dataset(replace(PAPER.data, dir=str(tmp_path), n_val=2))
    assert ds.x_train.shape[0] == 10
    assert ds.x_test.shape[0] == 6 and set(np.unique(np.asarray(ds.y_train))) <= {0, 1}


def test_mnist_standin_command_line(tmp_path, capsys):
    assert standin.main(["mnist", str(tmp_path / "m"), "--n", "3"]) == 0
    folder = tmp_path / "m" / standin.MNIST_FOLDER
    assert capsys.readouterr().out.strip() == str(folder)
    assert (folder / "t10k-labels-idx1-ubyte").stat().st_size == 8 + 3


# --------------------------------------------------------------------------- the compile clock
def test_compile_clock_needs_no_unregister_function(monkeypatch):
    monkeypatch.delattr(jax.monitoring, "unregister_event_duration_listener", raising=False)
    with bench.CompileClock() as clock:
        with clock.measure() as took:
            jax.jit(lambda x: jnp.sin(x) * 3.0 + 1.0)(jnp.ones(5)).block_until_ready()
    assert took["seconds"] > 0 and clock.seconds == took["seconds"]
    jax.jit(lambda x: jnp.cos(x) * 2.0 - 1.0)(jnp.ones(7)).block_until_ready()   # after exit: not heard
    assert clock.seconds == took["seconds"]
    with bench.CompileClock() as second:                                         # one listener, not two
        with second.measure() as again:
            jax.jit(lambda x: jnp.tan(x) + 4.0)(jnp.ones(3)).block_until_ready()
    assert 0 < again["seconds"] and second.seconds == again["seconds"]


def test_an_out_that_is_a_run_or_inside_one_is_refused_and_the_run_untouched(tmp_path, capsys):
    from test_never_lose_round3 import make_finished, snapshot
    run = tmp_path / "run"
    before = make_finished("phase_diagram", run)
    for out in (run / "checkpoints" / "6", run, run / "figures"):
        capsys.readouterr()
        assert accel_check.main(["--tiny", "--only", "none", "--out", str(out)]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("error:") and "run" in err[0], err
    assert snapshot(run) == before
    assert accel_check.main(["--tiny", "--only", "none", "--out", str(tmp_path / "beside")]) == 0


@pytest.mark.parametrize("name", accel_check.OUTPUTS)
def test_an_output_file_that_is_a_directory_is_one_line(tmp_path, capsys, name):
    (tmp_path / "o" / name).mkdir(parents=True)
    assert accel_check.main(["--tiny", "--only", "none", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and name in err[0] and err[0].startswith("error:"), err
