"""Tools around the studies: `bench` (the member-strategy benchmark's measuring core, behind
`python -m experiments.benchmark`) and `standin` (random CIFAR-10 in its real on-disk format, for
timing runs on machines that cannot download it: `python -m jaxinit.tools.standin cifar10 DIR`).

Nothing is imported here, so `standin` loads without jax.
"""
