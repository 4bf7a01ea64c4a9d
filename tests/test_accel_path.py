"""The training path an accelerator run takes (issue "The first accelerator run yields numbers"):
precision as a config choice, run.json timings that survive a stop, progress lines without a terminal,
train-set metrics on a subset, asynchronous checkpoints, and training without the optional packages."""
import io
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import replace
from pathlib import Path

import jax
import numpy as np
import pytest

from experiments import forgetting as F
from jaxinit import forgetting, interrupt, precision, progress
from jaxinit.run import checkpoint
from jaxinit.config import DataConfig, ModelConfig, OptConfig, SweepConfig, TrainConfig
from jaxinit.errors import ConfigError
from jaxinit.forgetting import loop
from jaxinit.train import engine, evaluate
from jaxinit.train.step import StepData
from stops import interrupt_after

ROOT = Path(__file__).resolve().parents[1]
SMOKE = forgetting.preset("smoke")
# A gaussian set: numpy only (digits and mnist1d need scikit-learn / scipy), 4 steps an epoch.
TINY = replace(SMOKE, data=DataConfig(name="gaussian", n_samples=600, dim=16, n_train=256, n_val=128),
               model=ModelConfig(name="mlp", width=16, depth=1), train=TrainConfig(batch_size=64, epochs=3),
               opt=OptConfig(setting_lr=("sgd=0.05", "adam=1e-3")),
               sweep=SweepConfig(sigma_w=(0.5, 2.0), seeds=1, optimizers=("sgd", "adam")))


def _train(cfg, **kw):
    return replace(cfg, train=replace(cfg.train, **kw))


def _run_json(out: Path) -> dict:
    return json.loads((out / "run.json").read_text())


# --------------------------------------------------------------------------- precision
def test_an_unknown_precision_is_one_line_naming_the_flag_and_the_choices(tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"--train.precision must be one of float32\|tf32\|bf16"):
        forgetting.validate(_train(SMOKE, precision="fp8"))
    assert F.run(["--preset", "smoke", "--train.precision=fp16", "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--train.precision" in err[0] and "bf16" in err[0], err


def test_bf16_computes_in_bfloat16_keeps_float32_state_and_is_recorded(tmp_path):
    cfg = _train(TINY, precision="bf16", epochs=2)
    res = forgetting.fit(cfg, tmp_path / "bf16")
    info = _run_json(tmp_path / "bf16")
    assert info["precision"] == "bf16" and info["compute_dtype"] == "bfloat16"
    state = res.states["adam"]
    dtypes = {x.dtype for x in jax.tree.leaves((state.params, state.model_state, state.opt_state))
              if np.issubdtype(x.dtype, np.floating)}
    assert dtypes == {np.dtype("float32")}                             # parameters, statistics, optimizer
    assert all(np.isfinite(r["train_loss"]) for r in res.rows) and max(r["step"] for r in res.rows) == 8
    chunk = res.sweep.groups["sgd"][0]
    st = engine.init_states(res.sweep)["sgd"][0]
    perm = chunk.fns.order(chunk.args.seed, np.int32(1), 256)
    text = chunk.fns.step.lower(st, chunk.args, perm, StepData(res.sweep.ds.x_train, res.sweep.ds.y_train,
                                                                np.int32(0))).as_text()
    assert "bf16" in text                                               # the forward pass runs in bfloat16


def test_tf32_is_accepted_on_cpu_recorded_and_changes_nothing_there(tmp_path):
    if jax.default_backend() != "cpu":
        pytest.skip("TF32 is a no-op only where XLA ignores the precision (CPU)")
    ref = forgetting.fit(_train(TINY, epochs=2), tmp_path / "f32")
    tf32 = forgetting.fit(_train(TINY, epochs=2, precision="tf32"), tmp_path / "tf32")
    assert _run_json(tmp_path / "tf32")["matmul_precision"] == "tensorfloat32"
    assert _run_json(tmp_path / "f32")["matmul_precision"] == "highest"
    assert tf32.rows == ref.rows


def test_the_precision_is_part_of_the_compile_cache_key():
    sweep = loop.build_sweep(TINY)
    shape = tuple(sweep.ds.input_shape)
    key, model = loop.resolve_model(TINY, shape, int(sweep.ds.n_classes))
    make = lambda p: sweep.compiler.fns(key, model, shape, sweep.settings["sgd"], sweep.steps_per_epoch, 3, 64, False,
                                        True, p)
    fns = {p: make(p) for p in precision.PRECISIONS}
    assert len({id(f.step) for f in fns.values()}) == 3 and len({id(f.eval) for f in fns.values()}) == 3
    assert make("float32") is fns["float32"]


def test_runs_made_before_the_new_fields_keep_their_fingerprint():
    import hashlib
    from jaxinit.run import config_parse, runinfo
    from jaxinit.config import to_dict
    legacy = to_dict(SMOKE)
    legacy["train"] = {k: v for k, v in legacy["train"].items()
                       if k not in ("precision", "eval_train_subset", "async_checkpoint")}
    legacy["sweep"] = {k: v for k, v in legacy["sweep"].items() if k != "lr"}        # added with the engine
    legacy["data"] = {**legacy["data"], "binarize": False}    # moved to the IGB studies' data config since
    assert config_parse.comparable(to_dict(SMOKE)) == legacy == config_parse.comparable(legacy)
    assert runinfo.config_fingerprint(SMOKE) == hashlib.sha256(json.dumps(legacy, sort_keys=True).encode()).hexdigest()
    assert config_parse.comparable(to_dict(_train(SMOKE, precision="bf16")))["train"]["precision"] == "bf16"
    from jaxinit.run.config_parse import from_dict
    from jaxinit.forgetting import ForgettingConfig
    assert from_dict(ForgettingConfig, json.loads(json.dumps(legacy))) == SMOKE   # its config.json still reads
    legacy["data"]["binarize"] = True                                             # never a forgetting value
    with pytest.raises(ConfigError, match="unknown key 'data.binarize'"):
        from_dict(ForgettingConfig, legacy)


# --------------------------------------------------------------------------- run.json
def test_run_json_survives_a_stop_after_the_first_epoch(tmp_path, monkeypatch):
    interrupt_after(monkeypatch, 5)          # 4 steps an epoch, one check per step: stop at epoch 2, step 1
    out = tmp_path / "cut"
    with pytest.raises(interrupt.Interrupted):
        forgetting.fit(TINY, out)
    info = _run_json(out)
    assert info["status"] == "stopped" and info["epochs_run"] == 1 and info["last_epoch"] == 1
    assert info["first_epoch_s"] > 0 and info["precision"] == "float32" and info["evals"] == 2
    assert info["checkpoints"] == 3 and info["checkpoint_saves"][-1]["step"] == 5   # 0, epoch 1, the stop


def test_run_json_is_written_after_every_epoch_before_a_kill(tmp_path, monkeypatch):
    original = engine.train_epoch

    def killed_in_epoch_3(sweep, states, epoch, first_step=0):
        if epoch == 3:
            raise SystemExit("killed")      # nothing of the run answers this: what is on disk stays
        return original(sweep, states, epoch, first_step)
    monkeypatch.setattr(engine, "train_epoch", killed_in_epoch_3)
    with pytest.raises(SystemExit):
        forgetting.fit(TINY, tmp_path / "k")
    info = _run_json(tmp_path / "k")
    assert info["status"] == "training" and info["epochs_run"] == 2 and info["last_epoch"] == 2
    assert info["steady_step_s"] > 0 and info["member_steps_per_s"] == pytest.approx(4 / info["steady_step_s"])
    assert info["compile_s"] is not None and info["eval_s_total"] >= info["eval_s_median"] > 0


def test_a_finished_run_reports_steady_eval_and_checkpoint_costs(tmp_path):
    res = forgetting.fit(TINY, tmp_path / "r")
    t = res.timing
    assert t["status"] == "finished" and t["epochs_run"] == 3 and len(t["eval_s"]) == t["evals"] == 4
    assert t["member_steps_per_s"] == pytest.approx(4 / t["steady_step_s"])     # first epoch excluded
    assert t["checkpoints"] == 4 and t["checkpoint_bytes"] > 0 and t["checkpoint_blocking_s_total"] > 0
    assert forgetting.fit(TINY).timing["checkpoints"] == 0                      # in memory: none


# --------------------------------------------------------------------------- progress
def test_without_a_terminal_each_epoch_is_one_line_on_stderr(monkeypatch, capsys):
    monkeypatch.delenv("JAXINIT_PROGRESS", raising=False)
    forgetting.fit(TINY)
    lines = capsys.readouterr().err.strip().splitlines()
    assert [ln.split()[:2] for ln in lines] == [["epoch", "1/3"], ["epoch", "2/3"], ["epoch", "3/3"]]
    assert all(", ETA " in ln and "  val_acc median/best sgd 0." in ln for ln in lines), lines
    forgetting.fit(TINY, progress=False)
    assert capsys.readouterr().err == ""


class _Terminal(io.StringIO):
    def isatty(self):
        return True


def test_a_terminal_gets_tqdm_and_plain_lines_without_tqdm(monkeypatch):
    monkeypatch.delenv("JAXINIT_PROGRESS", raising=False)
    bar = progress.Progress(2, unit="epoch", stream=_Terminal())
    assert bar.bar is not None
    bar.update(1, "val_acc median/best sgd 0.250/0.250")
    bar.close()
    monkeypatch.setitem(sys.modules, "tqdm", None)          # import tqdm now raises ImportError
    stream = _Terminal()
    plain = progress.Progress(2, unit="epoch", stream=stream, lines=2)
    plain.update(1, "val_acc median/best sgd 0.250/0.250")
    plain.update(1)
    assert plain.bar is None and [ln.split("  ")[0] for ln in stream.getvalue().splitlines()] == ["epoch 1/2", "epoch 2/2"]


# --------------------------------------------------------------------------- train-set subset
def test_train_metrics_on_a_fixed_seeded_subset(tmp_path):
    idx = evaluate.train_subset_indices(256, 100)
    assert len(idx) == len(set(idx)) == 100 and list(idx) == sorted(idx)
    assert np.array_equal(idx, evaluate.train_subset_indices(256, 100))
    res = forgetting.fit(_train(TINY, eval_train_subset=100))
    for r in res.rows:                                           # accuracies over 100 examples
        assert abs(r["train_acc"] * 100 - round(r["train_acc"] * 100)) < 1e-9
    full = forgetting.fit(TINY)
    assert [r["val_acc"] for r in res.rows] == [r["val_acc"] for r in full.rows]      # val, test whole
    assert [r["test_loss"] for r in res.rows] == [r["test_loss"] for r in full.rows]
    assert [r["train_acc"] for r in res.rows] != [r["train_acc"] for r in full.rows]
    split = evaluate.eval_splits(res.sweep.ds, 1000, 100)["train"]
    assert split.n == 100 and np.array_equal(split.x[:100], np.asarray(res.sweep.ds.x_train)[idx])


@pytest.mark.parametrize("n, fragment", [(257, "larger than the training split (256)"), (-1, "must be >= 0")])
def test_a_subset_that_cannot_be_drawn_is_one_line(n, fragment):
    cfg = _train(TINY, eval_train_subset=n)
    with pytest.raises(ConfigError, match="--train.eval_train_subset") as err:
        forgetting.validate(cfg)
        loop.check_setup(cfg)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_the_paper_presets_use_a_subset_and_background_checkpoints():
    for name in ("paper", "paper_b64", "paper_resnet20"):
        train = forgetting.preset(name).train
        assert (train.eval_train_subset, train.checkpoint_every, train.async_checkpoint) == (10000, 10, True)
    assert SMOKE.train.eval_train_subset == 0 and not SMOKE.train.async_checkpoint and SMOKE.train.precision == "float32"


# --------------------------------------------------------------------------- asynchronous checkpoints
def test_async_checkpoints_give_the_same_files_and_an_exact_resume(tmp_path, monkeypatch):
    ref = forgetting.fit(TINY, tmp_path / "sync")
    cfg = _train(TINY, async_checkpoint=True)
    interrupt_after(monkeypatch, 6)
    out = tmp_path / "async"
    with pytest.raises(interrupt.Interrupted):
        forgetting.fit(cfg, out)
    monkeypatch.undo()
    assert _run_json(out)["checkpoint_saves"][-1]["step"] == 6      # the stop's save finished before the raise
    res = forgetting.fit(cfg, out, resume=True)
    for name in ("metrics.jsonl", "summary.json"):
        assert (out / name).read_bytes() == (tmp_path / "sync" / name).read_bytes()
    assert res.summary == ref.summary and res.timing["checkpoint_async"] is True


def test_the_digest_is_computed_off_the_training_thread(tmp_path, monkeypatch):
    """Ordering, not timing: the digest waits until the test releases it, so `save` can return before it
    only if the digest runs on another thread (a synchronous save would wait out the 30 s and then fail)."""
    import threading
    original = checkpoint.tree_digest
    release, started_on = threading.Event(), []

    def held_digest(tree):
        started_on.append(threading.get_ident())
        assert release.wait(timeout=30), "the digest was never released: save() waited for it"
        return original(tree)
    monkeypatch.setattr(checkpoint, "tree_digest", held_digest)
    state = {"w": jax.numpy.arange(1000.0)}
    meta = {"epoch": 0, "step_in_epoch": 0, "n_members": 1, "config_fingerprint": "f"}
    ckpt = checkpoint.Checkpointer(tmp_path / "a", asynchronous=True)
    ckpt.save(0, state, meta)
    returned_before_digest = not release.is_set()
    release.set()
    ckpt.close()
    assert returned_before_digest and started_on and started_on[0] != threading.get_ident()
    assert ckpt.saves[0]["write_s"] > 0
    again = checkpoint.Checkpointer(tmp_path / "a")
    restored, meta = again.restore(0, checkpoint.abstract_like(state))
    again.close()
    assert np.array_equal(restored["w"], state["w"]) and meta["state_sha256"] == original(state)


def test_an_async_write_that_fails_is_one_line(tmp_path, monkeypatch):
    import errno
    import orbax.checkpoint as ocp

    def no_space(self, *args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(ocp.CheckpointManager, "save", no_space)
    with pytest.raises(ConfigError, match="no space left on the device") as err:
        forgetting.fit(_train(TINY, async_checkpoint=True), tmp_path / "full")
    assert "\n" not in str(err.value)


# --------------------------------------------------------------------------- optional packages
_BLOCKER = """
import sys
BLOCKED = {"orbax", "matplotlib", "tqdm", "scipy", "tyro"}
class Blocker:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{name} is blocked for this test")
sys.meta_path.insert(0, Blocker())
"""


def _blocked(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "JAXINIT_PROGRESS": ""}
    return subprocess.run([sys.executable, "-c", _BLOCKER + textwrap.dedent(code)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)


@pytest.mark.slow
def test_training_in_memory_needs_none_of_the_optional_packages():
    proc = _blocked("""
        from dataclasses import replace
        from jaxinit import forgetting
        from jaxinit.config import DataConfig
        cfg = forgetting.preset("smoke")
        cfg = replace(cfg, data=DataConfig(name="gaussian", n_samples=600, dim=16, n_train=256, n_val=128),
                      train=replace(cfg.train, checkpoint_every=0, precision="bf16"))
        forgetting.validate(cfg)
        res = forgetting.fit(cfg)
        import jaxinit.run.checkpoint, jaxinit.run.sink      # importable; orbax only when saving
        loaded = sorted(m for m in sys.modules if m.split(".")[0] in BLOCKED)
        print("members", len(res.summary["members"]), "loaded", loaded)
    """)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "members 4 loaded []" in proc.stdout
    assert "epoch 2/2" in proc.stderr                            # plain progress lines, no tqdm


def test_the_cli_without_tyro_is_one_line_naming_it(tmp_path):
    proc = _blocked(f"""
        from experiments import forgetting
        sys.exit(forgetting.run(["--preset", "smoke", "--train.epochs=1", "--out", {str(tmp_path / 'o')!r}]))
    """)
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1 and "tyro" in err[0] and "pip install tyro" in err[0], err
