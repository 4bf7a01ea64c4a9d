"""Tools around the studies:

- `bench`: the member-strategy benchmark's measuring core (behind `python -m experiments.benchmark`);
- `accel`, `accel_stages`, `timing`, `projection`: the staged accelerator check (`python -m
  experiments.accel_check`): stages and their guards, ahead-of-time compiled and timed training steps
  under a deadline, and the paper table's cost model;
- `standin`: random CIFAR-10 and MNIST in their real on-disk formats, for timing runs on machines that
  cannot download them (`python -m jaxinit.tools.standin cifar10|mnist DIR`);
- `machine`: the machine a measurement ran on and its nominal peak FLOP/s.

Nothing is imported here, so `standin` loads without jax.
"""
