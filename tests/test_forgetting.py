"""`python -m experiments.forgetting` end to end: outputs, bad input, exact resume after SIGKILL."""
import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from experiments import forgetting
from processes import start_until_epoch
from nested import assert_close
from jaxinit.tools import standin

ROOT = Path(__file__).resolve().parents[1]
FAST = ["--preset", "smoke"]


def _run(argv):
    return forgetting.run(argv)


def test_smoke_writes_every_output_with_the_schema(tmp_path):
    out = tmp_path / "run"
    assert _run(FAST + ["--out", str(out)]) == 0
    for name in ("config.json", "metrics.jsonl", "summary.json", "run.json"):
        assert (out / name).stat().st_size > 0
    assert list((out / "figures").glob("*.png"))
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert len(rows) == 4 * 3                     # 4 members x (init + 2 epochs)
    assert {r["epoch"] for r in rows} == {0, 1, 2}
    summary = json.loads((out / "summary.json").read_text())
    assert [m["optimizer"] for m in summary["members"]] == ["sgd", "sgd", "adam", "adam"]
    keys = {"optimizer", "sigma_w", "seed", "best_epoch", "test_acc_at_best", "train_acc_at_best", "tau_interp",
            "repair_gap", "param_norm_init", "param_norm_final", "clocks", "diverged"}
    for m in summary["members"]:
        assert keys <= set(m) and set(m["clocks"]) >= {"T_SGD", "T_L2", "T_adapt"}
        assert 0.0 <= m["test_acc_at_best"] <= 1.0
    # clocks of the schedule actually used: sgd constant lr 0.05, b = 64, 600 / 64 -> 9 steps x 2 epochs
    assert summary["members"][0]["clocks"]["T_adapt"] == pytest.approx(0.05 * 18, rel=1e-6)
    assert summary["members"][0]["clocks"]["T_SGD"] == pytest.approx(0.05 ** 2 * 18 / 64, rel=1e-6)
    assert set(summary["spread"]) == {"sgd", "adam"}
    run = json.loads((out / "run.json").read_text())
    assert "total_s" in run and "total_s" not in json.dumps(summary)
    # equal runs give equal files
    out2 = tmp_path / "again"
    assert _run(FAST + ["--out", str(out2)]) == 0
    assert (out2 / "summary.json").read_text() == (out / "summary.json").read_text()


def _one_error_line(capsys):
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error:"), err
    return err[0]


@pytest.mark.parametrize("args, fragment", [
    (["--preset", "nope"], "unknown preset"),
    (["--data.name=imagenet"], "imagenet"),
    (["--model.name=transformer9000"], "transformer9000"),
    (["--sweep.optimizers=sgd,lion"], "lion"),
    (["--train.colour=red"], "Unrecognized options"),
    (["--sweep.sigma_w=0,1"], "sigma_w"),
    (["--sweep.sigma_w=abc"], "sigma_w"),
    (["--train.batch_size=0"], "batch_size"),
    (["--train.batch_size=100000"], "larger than the training split"),
    (["--train.epochs=-2"], "epochs"),
    (["--sweep.seeds=-1"], "seeds"),
    (["--opt.weight_decay=-0.1"], "weight_decay"),
    (["--opt.lr=nan"], "NaN"),
    (["--data.dir=/no/such/dir"], "/no/such/dir"),
    (["--analysis.selection=best_test"], "invalid choice 'best_test' for argument '--analysis.selection'"),
    (["--sweep.optimizers=sgd,sgd"], "distinct"),
])
def test_bad_input_one_line_exit_2_nothing_written(tmp_path, capsys, args, fragment):
    out = tmp_path / "o"
    assert _run(FAST + ["--out", str(out)] + args) == 2
    assert re.search(fragment, _one_error_line(capsys))
    assert not (out / "config.json").exists() and not (out / "summary.json").exists()


def test_resume_with_nothing_to_resume(tmp_path, capsys):
    assert _run(FAST + ["--out", str(tmp_path / "empty"), "--resume"]) == 2
    assert "resume" in _one_error_line(capsys)


def test_unwritable_out_dir(tmp_path, capsys):
    (tmp_path / "f").write_text("")
    assert _run(FAST + ["--out", str(tmp_path / "f" / "x")]) == 2
    assert "cannot write" in _one_error_line(capsys)


def test_corrupt_checkpoint_is_a_clear_error(tmp_path, capsys):
    out = tmp_path / "run"
    assert _run(FAST + ["--out", str(out)]) == 0
    before = (out / "summary.json").read_text()
    for f in (out / "checkpoints").rglob("*"):
        if f.is_file() and f.stat().st_size > 0:
            f.write_bytes(b"garbage")
    capsys.readouterr()
    assert _run(["--out", str(out), "--resume"]) == 2
    assert "checkpoint" in _one_error_line(capsys)
    assert (out / "summary.json").read_text() == before        # nothing lost


@pytest.mark.slow
def test_sigkill_mid_run_then_resume_matches_uninterrupted(tmp_path):
    args = FAST + ["--train.epochs=40", "--train.checkpoint_every=3", "--sweep.sigma_w=0.5,1,2"]
    ref = tmp_path / "ref"
    assert _run(args + ["--out", str(ref)]) == 0
    out = tmp_path / "killed"
    proc = start_until_epoch("forgetting", args, out, 7)
    proc.send_signal(signal.SIGKILL)
    proc.communicate()
    assert proc.returncode == -signal.SIGKILL, "the run finished before it could be killed"
    assert not (out / "summary.json").exists()
    assert _run(["--out", str(out), "--resume"]) == 0
    assert (out / "summary.json").read_text() == (ref / "summary.json").read_text()
    assert (out / "metrics.jsonl").read_text() == (ref / "metrics.jsonl").read_text()


def test_paper_preset_starts_on_a_tiny_stand_in(tmp_path):
    standin.write_cifar10_standin(tmp_path / "data", 8)
    out = tmp_path / "paper"
    code = _run(["--preset", "paper", "--out", str(out), f"--data.dir={tmp_path / 'data'}",
                 "--data.n_val=8", "--model.width_mult=0.0625", "--train.epochs=1", "--train.batch_size=8",
                 "--sweep.sigma_w=0.5,2", "--sweep.seeds=1", "--sweep.optimizers=muon",
                 "--train.eval_train_subset=0"])   # the preset's 10,000 exceed the stand-in's 32 examples
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert len(summary["members"]) == 2 and summary["members"][0]["clocks"]["T_adapt"] > 0
    cfg = json.loads((out / "config.json").read_text())
    assert cfg["model"]["name"] == "resnet9" and cfg["data"]["augment"] is True


@pytest.mark.slow
def test_members_sharded_over_four_devices_give_the_one_device_summary(tmp_path):
    # Not bit for bit: XLA fuses Adam's elementwise update differently in the partitioned program (one ulp
    # of the update; gradients and moments are bit-equal), so floats get a tolerance and the study's
    # outputs must match exactly. Gaussian inputs: digits' constant border pixels make Adam + BatchNorm amplify
    # such ulps into lr-sized steps (see tests/test_train.py). Several hosts: tests/test_distributed.py.
    args = FAST + ["--sweep.sigma_w=0.5,1,1.5,2", "--data.name=gaussian", "--data.n_samples=1000", "--data.dim=32"]
    one = tmp_path / "one"
    assert _run(args + ["--out", str(one)]) == 0
    env = {**os.environ, "XLA_FLAGS": (os.environ.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=4").strip()}
    four = tmp_path / "four"
    subprocess.run([sys.executable, "-m", "experiments.forgetting", *args, "--out", str(four)], cwd=ROOT, env=env,
                   check=True, capture_output=True)
    assert json.loads((four / "run.json").read_text())["devices"] == 4
    s1, s4 = (json.loads((d / "summary.json").read_text()) for d in (one, four))
    assert_close(s4, s1)
    for m1, m4 in zip(s1["members"], s4["members"]):     # what the study reports is exactly the same
        for key in ("best_epoch", "test_acc_at_best", "train_acc_at_best", "tau_interp"):
            assert m1[key] == m4[key]


def test_resume_without_a_checkpoint_starts_over_without_duplicate_rows(tmp_path):
    out = tmp_path / "run"
    assert _run(FAST + ["--train.checkpoint_every=0", "--out", str(out)]) == 0
    first = (out / "metrics.jsonl").read_bytes()
    assert not [p for p in (out / "checkpoints").glob("*") if p.name.isdigit()]
    assert _run(["--resume", "--out", str(out)]) == 0
    assert (out / "metrics.jsonl").read_bytes() == first


@pytest.mark.slow
@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_stops_at_a_step_boundary_with_one_line_and_resume_matches(tmp_path, sig, status):
    args = FAST + ["--train.epochs=40", "--train.checkpoint_every=5", "--sweep.sigma_w=0.5,1,2"]
    ref = tmp_path / "ref"
    assert _run(args + ["--out", str(ref)]) == 0
    out = tmp_path / "stopped"
    proc = start_until_epoch("forgetting", args, out, 7)
    proc.send_signal(sig)
    err = proc.communicate(timeout=120)[1].strip().splitlines()
    assert proc.returncode == status, err
    assert len(err) == 1 and "--resume" in err[0] and "Traceback" not in err[0], err
    assert not (out / "summary.json").exists()
    assert _run(["--out", str(out), "--resume"]) == 0
    assert (out / "summary.json").read_text() == (ref / "summary.json").read_text()
    assert (out / "metrics.jsonl").read_text() == (ref / "metrics.jsonl").read_text()
