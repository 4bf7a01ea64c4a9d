"""Tools around the studies:

- `bench`: the member-strategy benchmark's measuring core (behind `python -m experiments.benchmark`);
- `accel_plan`, `accel_runner`, `accel_report` (no jax) and `accel_variant`, `accel_torch` (one process per
  variant): the device check (`python -m experiments.accel_check`);
- `flops`: FLOPs of a program from its jaxpr, the same on every backend; `hlo`: what a lowered or compiled
  program's text says about its convolutions; `projection`: the paper table's cost model;
- `standin`: random CIFAR-10 and MNIST in their real on-disk formats, for timing runs on machines that
  cannot download them (`python -m jaxinit.tools.standin cifar10|mnist DIR`);
- `machine`: the machine a measurement ran on and its nominal peak FLOP/s per precision.

Nothing is imported here, so `standin` and the device check's parent load without jax.
"""
