"""The engine's writer (`jaxinit.train.writer`): what the engine hands a run's results to, in order; the run
directory's writer (`jaxinit.run.sink.RunFiles`) is one; the progress lines name the stage and the unit."""
from dataclasses import replace

import jax
import numpy as np

from jaxinit import progress
from jaxinit.config import DataConfig, ModelConfig, OptConfig, SweepConfig, TrainConfig
from jaxinit.forgetting import ForgettingConfig, loop
from jaxinit.run.sink import RunFiles, writer_for
from jaxinit.train import engine
from jaxinit.train.writer import Begun, Memory, Shape, Writer

TINY = ForgettingConfig(
    data=DataConfig(name="gaussian", n_samples=600, dim=32, n_train=256, n_val=128),
    model=ModelConfig(name="mlp", width=16, depth=2, batchnorm=True),
    opt=OptConfig(setting_lr=("sgd=0.1", "adam=0.01")),
    train=TrainConfig(batch_size=64, epochs=2, eval_batch_size=200, strategy="chunked", chunk=2, checkpoint_every=1),
    sweep=SweepConfig(sigma_w=(0.5, 2.0), seeds=1, optimizers=("sgd", "adam")),
)


class Recording(Memory):
    """A writer that keeps what the engine hands it."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def open(self, shape):
        self.shape = shape
        self.calls.append(("open",))

    def start(self, states, evaluate):
        begun = super().start(states, evaluate)
        self.calls.append(("start", sorted({r["epoch"] for r in begun.rows})))
        return begun

    def append(self, rows):
        self.calls.append(("append", sorted({r["epoch"] for r in rows}), len(rows)))

    def save(self, states, epoch, step_in_epoch):
        self.tree = self.shape.to_tree(states)
        self.calls.append(("save", epoch, step_in_epoch))

    def timing(self, report):
        self.calls.append(("timing", report["status"]))

    def finish(self, summary):
        self.calls.append(("finish", sorted(summary)))


def test_the_writers_are_writers(tmp_path):
    assert isinstance(Memory(), Writer) and isinstance(RunFiles(tmp_path), Writer)
    assert isinstance(writer_for(tmp_path, resume=True), RunFiles) and writer_for(None) is None
    assert Memory().start("s", lambda states, epoch: [{"member": 0, "epoch": epoch}]) == \
        Begun(0, 0, "s", [{"member": 0, "epoch": 0}])


def test_the_engine_hands_its_writer_the_run_in_order():
    study = loop.study(TINY)
    writer = Recording()
    res = engine.fit(study, writer, progress=False)
    assert writer.calls == [
        ("open",), ("start", [0]),
        ("append", [1], 4), ("save", 1, 0), ("timing", "training"),
        ("append", [2], 4), ("save", 2, 0), ("timing", "training"),
        ("finish", ["members", "spread"]), ("timing", "finished")]
    shape = writer.shape
    assert isinstance(shape, Shape) and shape.plan == study.plan and shape.n_members == 4
    assert (shape.fingerprint, shape.parts) == (study.fingerprint, study.parts)    # handed on, not read
    assert shape.steps_per_epoch == res.sweep.steps_per_epoch
    for a, b in zip(jax.tree.leaves(writer.tree), jax.tree.leaves(shape.to_tree(shape.from_tree(writer.tree)))):
        np.testing.assert_array_equal(np.asarray(a), np.asarray(b))
    assert res.timing["checkpoints"] == 0          # a writer that keeps no checkpoint reports none


def test_without_a_writer_nothing_is_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = engine.fit(loop.study(replace(TINY, train=replace(TINY.train, epochs=1))), progress=False)
    assert res.summary is not None and [r["epoch"] for r in res.rows] == [0] * 4 + [1] * 4
    assert list(tmp_path.iterdir()) == []


def test_progress_names_the_stage_counts_epochs_and_splits_val_acc_by_group(monkeypatch, capsys):
    monkeypatch.delenv(progress.ENV, raising=False)
    with progress.study("forgetting"):
        engine.fit(loop.study(TINY), stage="tiny")
    lines = capsys.readouterr().err.splitlines()
    assert [ln.split("  ")[0] for ln in lines] == ["forgetting tiny: epoch 1/2", "forgetting tiny: epoch 2/2"]
    assert all(", ETA " in ln and "val_acc median/best sgd " in ln and " adam " in ln for ln in lines)


def test_a_study_that_draws_each_batch_counts_steps():
    ds, groups, plan, options = loop.sweep_parts(TINY)
    assert engine.build(ds, groups, plan, **options).unit == "epoch"
    shared = engine.build(ds, groups, plan, **{**options, "steps_per_epoch": 1, "shared_batches": 0})
    assert shared.unit == "step"
