"""experiments.accel_check: the staged accelerator check in its tiny mode end to end, its guards (an injected
failure, the deadline between stages and inside them), its imports (no tyro, matplotlib, tqdm or scipy),
the paper table's cost model, the MNIST stand-in it loads, and the benchmark's compile clock.

Speed is the check's output, never a test's condition: nothing here bounds a measured time.
"""
import contextlib
import io
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments import accel_check
from jaxinit.tools import bench, projection, standin
from jaxinit.tools.accel import FAIL_ENV, STAGES, TINY, Check
from jaxinit.tools.timing import Deadline, Lane, OutOfTime, time_steps

ROOT = Path(__file__).resolve().parents[1]
BLOCKED = ("tyro", "matplotlib", "tqdm", "scipy")


def run_main(argv):
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        status = accel_check.main(argv)
    return status, buf.getvalue()


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """One in-process tiny check; the tests below read it (and later runs here reuse its compiles)."""
    out = tmp_path_factory.mktemp("accel") / "check"
    status, stdout = run_main(["--tiny", "--out", str(out), "--deadline", "1200"])   # a loaded CI machine
    return status, out, json.loads((out / "accel.json").read_text()), stdout


# --------------------------------------------------------------------------- tiny mode end to end
def test_tiny_check_runs_every_stage_and_writes_accel_json_alone(tiny):
    status, out, report, _ = tiny
    assert status == 0
    assert sorted(p.name for p in out.iterdir()) == ["accel.json"]      # no checkpoint, stand-in or temp file
    assert list(report["stages"]) == list(STAGES)
    assert {n: r["status"] for n, r in report["stages"].items()} == {n: "ok" for n in STAGES}
    assert report["finished"] and report["mode"] == "tiny"
    assert report["scratch_removed"] and not Path(report["scratch"]).exists()
    assert all(r["seconds"] >= 0 for r in report["stages"].values())


def test_tiny_check_measures_the_training_path(tiny):
    _, _, report, _ = tiny
    stages = report["stages"]
    train = stages["train"]["measurements"][0]
    assert (train["optimizer"], train["strategy"], train["conv_impl"]) == ("sgd", "vmap", "lax")
    assert train["members"] == TINY.members == 4 and train["steps"] == TINY.steps and train["cut"] is None
    assert train["step_s"] > 0 and train["compile_s"] > 0 and train["flops_per_step"] > 0
    assert train["member_steps_per_s"] == pytest.approx(4 / train["step_s"])
    assert train["program_memory"]["total_bytes"] > 0
    timed = {(m["strategy"], m["conv_impl"]) for m in stages["strategy"]["measurements"]}
    assert timed == {("sequential", "lax"), ("vmap", "im2col"), ("lax_map", "lax")}
    chosen = report["chosen_strategy"]
    assert chosen == stages["strategy"]["chosen"] and chosen["strategy"] in ("vmap", "sequential")
    best = min(m["step_s"] for m in stages["strategy"]["measurements"] + [train] if m["strategy"] != "lax_map")
    assert chosen["step_s"] == best
    assert [m["optimizer"] for m in stages["optimizers"]["measurements"]] == ["adam", "muon"]
    assert stages["optimizers"]["strategy"] == f"{chosen['strategy']}/{chosen['conv_impl']}"
    ev = stages["eval"]["measurements"][0]
    assert ev["examples"] == 8 and ev["s_per_example"] > 0               # the stand-in's whole val split
    assert stages["eval"]["standins"]["cifar10"]["train"] == [32, 32, 32, 3]
    assert stages["eval"]["standins"]["mnist"]["test"] == [8, 28, 28, 1]
    saves = stages["checkpoint"]["measurements"]
    assert len(saves) >= 2 and all(m["bytes"] > 0 and m["seconds"] > 0 for m in saves)
    assert [r["members"] for r in stages["benchmark"]["measurements"]] == [1, 2, 2]


def test_tiny_check_projects_the_paper_table_from_its_rates(tiny):
    _, _, report, stdout = tiny
    p = report["projection"]
    assert p == {k: v for k, v in report["stages"]["projection"].items() if k not in ("status", "seconds",
                                                                                       "started_at_s")}
    assert p["complete"] and p["assumed"] == [] and p["hours"] > 0
    table = projection.paper_table()
    steps = p["rates"]["step_s"]
    want_train = sum(steps[projection.RATE_CLASS[s]] for s in table.settings) * 351 * 200 / 3600
    assert p["train_h"] == pytest.approx(want_train)
    assert p["eval_h"] == pytest.approx(7 * table.evaluations * table.eval_examples
                                        * p["rates"]["eval_s_per_example"] / 3600)
    assert p["hours"] == pytest.approx(p["train_h"] + p["eval_h"] + p["checkpoint_h"] + p["compile_h"])
    assert "not the paper's ResNet-9" in p["note"]
    lines = stdout.strip().splitlines()
    assert lines[-4].startswith("projection of the paper table") and lines[-1].startswith("  note:")
    assert f"{p['hours']:.2f} h" in lines[-3]


def test_tiny_check_prints_one_line_per_measurement(tiny):
    _, _, report, stdout = tiny
    lines = stdout.splitlines()
    for name in ("train", "strategy", "optimizers", "eval", "checkpoint", "benchmark"):
        measured = [ln for ln in lines if ln.startswith(f"[{name}] ") and ": " in ln
                    and not ln.startswith((f"[{name}] ok", f"[{name}] chosen", f"[{name}] compiled"))
                    and "stand-in:" not in ln]
        assert len(measured) == len(report["stages"][name]["measurements"]), (name, measured)


# --------------------------------------------------------------------------- guards
def test_a_failing_stage_is_recorded_in_one_line_and_the_others_run(tiny, tmp_path, monkeypatch):
    monkeypatch.setenv(FAIL_ENV, "train,checkpoint")
    out = tmp_path / "failing"
    status, stdout = run_main(["--tiny", "--out", str(out), "--deadline", "1200",
                               "--stages", "preflight,train,strategy,eval,checkpoint"])
    assert status == 0
    report = json.loads((out / "accel.json").read_text())
    stages = report["stages"]
    for name in ("train", "checkpoint"):
        assert stages[name]["status"] == "failed"
        assert stages[name]["error"] == (f"InjectedFailure: injected failure in stage {name} ({FAIL_ENV} or "
                                         f"Check(fail=...))")
        assert stages[name]["where"].startswith("accel.py:")
        assert f"[{name}] failed" in stdout
    for name in ("preflight", "strategy", "eval"):
        assert stages[name]["status"] == "ok", stages[name]
    assert stages["optimizers"]["status"] == stages["benchmark"]["status"] == "skipped"
    assert "not selected" in stages["optimizers"]["reason"]
    assert report["injected_failures"] == ["checkpoint", "train"]
    p = report["projection"]                  # sgd from the strategy stage; no checkpoint rate
    assert p["hours"] > 0 and p["checkpoint_h"] is None and not p["complete"]


def test_a_real_error_a_deadline_and_a_cut_are_told_apart(tmp_path):
    ck = Check(TINY, tmp_path, stages=("train",), log=lambda line: None)

    def broken(ck, rec):
        raise ValueError("first line\nsecond line")

    def late(ck, rec):
        raise OutOfTime("nothing left")

    def cut(ck, rec):
        rec["measurements"] = [{"step_s": 1.0}]
        raise OutOfTime("cut after one")

    for name, body, status in (("train", broken, "failed"), ("strategy", late, "skipped"), ("eval", cut, "partial")):
        ck._run_guarded(name, body, ck.report.stage(name))
        assert ck.report.stage(name)["status"] == status
    assert ck.report.stage("train")["error"] == "ValueError: first line"
    assert "test_accel_check.py" in ck.report.stage("train")["where"]
    assert ck.report.stage("strategy")["reason"] == "nothing left"
    assert ck.report.stage("eval")["measurements"] == [{"step_s": 1.0}]


def test_check_fail_argument_and_unselected_stages(tmp_path):
    report = Check(TINY, tmp_path, fail=("preflight",), stages=("preflight",), log=lambda line: None).run()
    assert report["stages"]["preflight"]["status"] == "failed"
    assert report["stages"]["preflight"]["error"].startswith("InjectedFailure: injected failure in stage preflight")
    assert all(report["stages"][s]["reason"] == "not selected (--stages)" for s in STAGES[1:-1])
    assert report["stages"]["projection"]["status"] == "skipped"          # nothing measured to project from
    assert json.loads((tmp_path / "accel.json").read_text())["finished"]


def test_a_tiny_deadline_skips_every_stage_and_still_exits_0(tmp_path):
    out = tmp_path / "late"
    done = subprocess.run([sys.executable, "-m", "experiments.accel_check", "--tiny", "--deadline", "0.001",
                           "--out", str(out)], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    report = json.loads((out / "accel.json").read_text())
    assert {r["status"] for r in report["stages"].values()} == {"skipped"}
    assert "deadline" in report["stages"]["train"]["reason"] and report["finished"]
    assert report["projection"]["hours"] is None
    assert done.stdout.strip().splitlines()[-1].startswith("projection: none")


def test_the_deadline_is_checked_between_timed_blocks():
    clock = [0.0]
    deadline = Deadline(10.0, t0=0.0, now=lambda: clock[0])

    def step(state, args, perm, data):     # each step costs one second of the fake clock
        clock[0] += 1.0
        return state + 1, None

    lane = Lane(step, 0, None, None)
    r = time_steps([lane], None, None, 20, 2, 100, deadline, "fake")
    assert r["cut"] is not None and "fake: timed steps" in r["cut"]
    assert r["steps"] == 10 and lane.state == 11 and clock[0] == 11.0    # warm-up + five blocks, not twenty steps
    with pytest.raises(OutOfTime):
        time_steps([lane], None, None, 20, 2, 100, deadline, "fake")   # not one block fits: nothing to keep


# --------------------------------------------------------------------------- imports
SITECUSTOMIZE = textwrap.dedent(f"""
    import importlib.abc, sys
    class _Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            if name.partition(".")[0] in {BLOCKED!r}:
                raise ImportError(f"{{name}} is blocked by the test")
            return None
    sys.meta_path.insert(0, _Block())
""")


def _blocked_run(tmp_path, *argv):
    (tmp_path / "block").mkdir()
    (tmp_path / "block" / "sitecustomize.py").write_text(SITECUSTOMIZE)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path / "block"), str(ROOT)])}
    out = tmp_path / "blocked"
    done = subprocess.run([sys.executable, "-m", "experiments.accel_check", "--tiny", "--out", str(out),
                           "--deadline", "1200", *argv],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    report = json.loads((out / "accel.json").read_text())
    assert {k: v for k, v in report["stages"]["preflight"]["optional_packages"].items() if k in BLOCKED} == \
        {k: False for k in BLOCKED}                 # the blocker was in force (they are installed here)
    return report


def test_the_check_needs_no_tyro_matplotlib_tqdm_or_scipy_preflight_eval_checkpoint(tmp_path):
    report = _blocked_run(tmp_path, "--stages", "preflight,eval,checkpoint")
    assert [report["stages"][s]["status"] for s in ("preflight", "eval", "checkpoint")] == ["ok"] * 3


@pytest.mark.slow
def test_the_whole_check_needs_no_tyro_matplotlib_tqdm_or_scipy(tmp_path):
    report = _blocked_run(tmp_path)
    assert {n: r["status"] for n, r in report["stages"].items()} == {n: "ok" for n in STAGES}


# --------------------------------------------------------------------------- command line
@pytest.mark.parametrize("argv, fragment", [
    (["--deadline", "0"], "--deadline"),
    (["--deadline", "soon"], "--deadline"),
    (["--stages", "train,bogus"], "--stages"),
    (["--bogus"], "--bogus"),
])
def test_bad_command_line_is_one_line_and_exit_2(argv, fragment, capsys, tmp_path):
    assert accel_check.main(argv + ["--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:") and fragment in err[0], err
    assert not (tmp_path / "x").exists()


def test_full_check_refuses_a_cpu_in_one_line(capsys, tmp_path):
    assert jax.default_backend() == "cpu"
    assert accel_check.main(["--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--tiny" in err[0] and not (tmp_path / "x").exists()


def test_make_accel_check_runs_the_check_alone_under_runs():
    # Under `make test` the parent make's MAKELEVEL / MAKEFLAGS would make this one print "Entering directory".
    env = {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}
    done = subprocess.run(["make", "--no-print-directory", "-n", "accel-check", "RUNS=somewhere", "ACCEL_PY=py"],
                          cwd=ROOT, capture_output=True, text=True, env={**env, "OUT": "exported"})
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip().splitlines() == ["py -m experiments.accel_check --out somewhere/accel_check"]


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
