"""The accelerator check's data and checkpoint stages (5 and 6 of `jaxinit.tools.accel_stages`, which
runs them in order and from which they are importable too).

5. eval: CIFAR-10 and MNIST stand-ins written and loaded; one evaluation pass, seconds per example.
6. checkpoint: one setting's state saved twice with `jaxinit.checkpoint` to a temporary folder.
"""
from __future__ import annotations

import time

from jaxinit.tools import timing
from jaxinit.tools.accel import Check


# --------------------------------------------------------------------------- 5. eval
def stage_eval(ck: Check, rec: dict) -> None:
    rec["standins"] = standins(ck, rec)
    import jax
    from jaxinit.train.evaluate import evaluate_all, pad_split
    ds = ck.standin_cifar
    n = min(ck.plan.eval_examples, int(ds.x_val.shape[0]))
    b = min(ck.plan.eval_batch, n)
    strategy, conv = ck.strategy()
    ck.deadline.require(ck.plan.measure_s / 2, "eval: compile and one pass")
    sweep, states, init_s = ck.build("sgd", strategy, conv)
    t = time.perf_counter()
    evaluate_all(sweep.groups, states, {"val": pad_split(ds.x_val[:b], ds.y_val[:b], b)}, 0)
    compile_s = time.perf_counter() - t
    ck.deadline.require(0.0, "eval: timed pass")
    split = pad_split(ds.x_val[:n], ds.y_val[:n], b)
    jax.block_until_ready(split)
    t = time.perf_counter()
    rows = evaluate_all(sweep.groups, states, {"val": split}, 0)
    seconds = time.perf_counter() - t
    from jaxinit.tools.projection import paper_table
    per_epoch = paper_table().eval_examples
    m = {"strategy": f"{strategy}/{conv}", "members": len(rows), "examples": n, "eval_batch": b, "init_s": init_s,
         "first_call_s": compile_s, "pass_s": seconds, "s_per_example": seconds / n,
         "member_images_per_s": n * len(rows) / seconds, "paper_examples_per_eval": per_epoch,
         "paper_eval_s": seconds / n * per_epoch, "device_memory": timing.device_memory()}
    ck.eval_rate = m
    ck.emit(rec, m, f"[eval] {len(rows)} members x {n} stand-in examples (batches of {b}, {strategy}/{conv}): "
                    f"{seconds:.2f} s, {1e6 * m['s_per_example']:.1f} us per example (all members), first call "
                    f"{compile_s:.1f} s; one paper evaluation ({per_epoch:,} examples) {m['paper_eval_s']:.1f} s")


def standins(ck: Check, rec: dict) -> dict:
    """CIFAR-10 and MNIST stand-ins in their real formats, written to the temporary folder and loaded
    by `load_dataset` as the `paper` presets load them (forgetting: CIFAR-10; IGB: MNIST, sphere, binarised)."""
    from dataclasses import replace

    from jaxinit.config import IGBDataConfig
    from jaxinit.data import load_dataset
    from jaxinit.forgetting.config import PAPER
    from jaxinit.tools.standin import write_cifar10_standin, write_mnist_standin
    p, out = ck.plan, {}
    root = ck.tempdir("standins")
    igb = IGBDataConfig(name="mnist", normalize="sphere")   # the IGB paper preset's data

    for name, write, cfg in (("cifar10", lambda: write_cifar10_standin(root, p.cifar_per_batch),
                              replace(PAPER.data, n_val=p.n_val)),
                             ("mnist", lambda: write_mnist_standin(root, *p.mnist_sizes), igb)):
        t = time.perf_counter()
        write()
        written = time.perf_counter() - t
        t = time.perf_counter()
        ds = load_dataset(replace(cfg, dir=str(root)))
        loaded = time.perf_counter() - t
        out[name] = {"write_s": written, "load_s": loaded, "train": list(ds.x_train.shape), "val": list(ds.x_val.shape),
                     "test": list(ds.x_test.shape), "n_classes": int(ds.n_classes)}
        ck.log(f"[eval] {name} stand-in: written in {written:.1f} s, loaded in {loaded:.1f} s, train "
               f"{tuple(ds.x_train.shape)}, val {ds.x_val.shape[0]}, test {ds.x_test.shape[0]}")
        if name == "cifar10":
            ck.standin_cifar = ds
    return out


# --------------------------------------------------------------------------- 6. checkpoint
def stage_checkpoint(ck: Check, rec: dict) -> None:
    """Two synchronous saves (the first also sets orbax up), then, where `Checkpointer` has it and the
    paper preset asks for it, one asynchronous save: the seconds the training thread waits, then the rest."""
    import inspect
    import shutil

    import jax
    from jaxinit.run.checkpoint import Checkpointer
    from jaxinit.forgetting.config import PAPER
    from jaxinit.train.members import stack
    strategy, conv = ck.strategy()
    sweep, states, _ = ck.build("sgd", strategy, conv)
    stacked = jax.block_until_ready(stack(sweep.groups, states))
    del states
    n, state_bytes = len(sweep.members), sum(x.nbytes for x in jax.tree.leaves(stacked))
    meta = {"epoch": 0, "n_members": n, "config_fingerprint": "accel_check"}
    can_async = "asynchronous" in inspect.signature(Checkpointer).parameters
    wants_async = bool(getattr(PAPER.train, "async_checkpoint", False))
    rec.update(state_bytes=state_bytes, members=n, asynchronous_available=can_async, paper_asynchronous=wants_async)
    folder = ck.tempdir("checkpoint") / "checkpoints"
    runs = [(1, False), (2, False)] + ([(3, True)] if can_async and wants_async else [])
    try:
        for step, asynchronous in runs:
            ck.deadline.require(0.0, f"checkpoint: save {step}")
            ckpt = Checkpointer(folder, max_to_keep=1, **({"asynchronous": True} if asynchronous else {}))
            try:
                t = time.perf_counter()
                ckpt.save(step, stacked, {**meta, "step_in_epoch": step})
                blocking = time.perf_counter() - t
                ckpt.wait() if asynchronous else None
                seconds = time.perf_counter() - t
            finally:
                ckpt.close()
            size = sum(f.stat().st_size for f in (folder / str(step)).rglob("*") if f.is_file())
            m = {"save": step, "asynchronous": asynchronous, "seconds": seconds, "blocking_s": blocking,
                 "bytes": size, "mb_per_s": size / seconds / 1e6}
            ck.emit(rec, m, f"[checkpoint] save {step}{' (asynchronous)' if asynchronous else ''}: {n} members, "
                            f"{size / 1e6:.1f} MB on disk ({state_bytes / 1e6:.1f} MB of state) in {seconds:.2f} s "
                            f"({m['mb_per_s']:.0f} MB/s)" + (f", training thread waited {blocking:.2f} s"
                                                            if asynchronous else ""))
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    done = rec["measurements"]
    steady = [m for m in done if not m["asynchronous"]][-1]
    in_run = [m for m in done if m["asynchronous"]]
    ck.checkpoint_rate = {"seconds": in_run[-1]["blocking_s"] if in_run else steady["seconds"],
                          "bytes": steady["bytes"], "asynchronous": bool(in_run)}
