"""Several hosts: joining a multi-process run, gathering sharded results, one writer.

A sweep runs the same program on every process (JAX's multi-controller model). The member axis is
laid over a 1-D mesh named 'members' that spans the devices of *all* processes (`jaxinit.forgetting.members.member_mesh`),
so each host trains its own slice of the members. Three rules keep that correct:

1. every process joins before any JAX computation (`initialize_from_env`, called by the CLI);
2. every array a jitted step sees is a global array: member-stacked states are sharded over the mesh,
   data (identical on every host: it is loaded from the same seed) is replicated (`replicate`);
3. only process 0 writes results (`is_writer`); the others compute and take part in the collectives
   (`to_host` gathers the members another host holds; orbax saves checkpoints cooperatively).

Launch (one command per host; the coordinator is process 0's address, any free port):

    JAX_COORDINATOR_ADDRESS=10.0.0.1:1234 JAX_NUM_PROCESSES=2 JAX_PROCESS_ID=0 \\
        python -m experiments.forgetting --preset paper --out /shared/runs/p      # on host 0
    JAX_COORDINATOR_ADDRESS=10.0.0.1:1234 JAX_NUM_PROCESSES=2 JAX_PROCESS_ID=1 \\
        python -m experiments.forgetting --preset paper --out /shared/runs/p      # on host 1

`--out` must be a directory every host can reach (orbax writes each host's shards there). Without the
three variables a run is single-process, on however many local devices there are. Processes other
than 0 wait for process 0 up to `JAX_INIT_TIMEOUT` seconds (default 300).
"""
from __future__ import annotations

import os
import socket
import time
from typing import Any, Mapping

import jax
import numpy as np

from jaxinit.config import ConfigError

ENV_VARS = ("JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID")


def launch_settings(environ: Mapping[str, str]) -> tuple[str, int, int] | None:
    """(coordinator address, number of processes, this process's id) from the environment, or None.

    All three variables or none; anything else is a ConfigError (one line, exit status 2).
    """
    given = {k: environ.get(k) for k in ENV_VARS if environ.get(k) not in (None, "")}
    if not given:
        return None
    missing = [k for k in ENV_VARS if k not in given]
    if missing:
        raise ConfigError(f"multi-host launch needs {', '.join(ENV_VARS)}; missing {', '.join(missing)}")
    address = given["JAX_COORDINATOR_ADDRESS"]
    host, port = _split_address(address)
    if not host or not port.isdigit():
        raise ConfigError(f"JAX_COORDINATOR_ADDRESS={address!r}: expected HOST:PORT")
    try:
        n, pid = int(given["JAX_NUM_PROCESSES"]), int(given["JAX_PROCESS_ID"])
    except ValueError:
        raise ConfigError("JAX_NUM_PROCESSES and JAX_PROCESS_ID must be integers, got "
                          f"{given['JAX_NUM_PROCESSES']!r} and {given['JAX_PROCESS_ID']!r}") from None
    if n < 1 or not 0 <= pid < n:
        raise ConfigError(f"JAX_PROCESS_ID={pid} must lie in [0, JAX_NUM_PROCESSES={n})")
    return address, n, pid


def initialize_from_env(environ: Mapping[str, str] | None = None) -> bool:
    """Join the multi-process run the environment describes; True if one was joined.

    Must run before anything touches a device: `jax.distributed.initialize` fixes the global device
    list. The wait for the other processes is `JAX_INIT_TIMEOUT` seconds (default 300).
    """
    environ = os.environ if environ is None else environ
    settings = launch_settings(environ)
    if settings is None or jax.distributed.is_initialized():
        return settings is not None
    address, n, pid = settings
    timeout = environ.get("JAX_INIT_TIMEOUT", "300")
    if not timeout.isdigit() or int(timeout) < 1:
        raise ConfigError(f"JAX_INIT_TIMEOUT={timeout!r}: expected a whole number of seconds >= 1")
    # jax's coordination client aborts the whole process (a C++ fatal error, no Python exception) when it
    # cannot register, so the usual launch mistakes are caught here first, as one line.
    if pid == 0:
        check_port_free(address)
    else:
        wait_for_coordinator(address, float(timeout))
    try:
        jax.distributed.initialize(address, num_processes=n, process_id=pid, initialization_timeout=int(timeout))
    except Exception as e:  # jax raises RuntimeError / XlaRuntimeError subclasses for an unreachable peer
        first = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
        raise ConfigError(f"cannot join the run at {address} as process {pid} of {n}: {first}") from None
    return True


def _split_address(address: str) -> tuple[str, str]:
    """HOST:PORT -> (host without IPv6 brackets, port text); validated by `launch_settings`."""
    host, _, port = address.rpartition(":")
    return host.strip("[]"), port


def _host_port(address: str) -> tuple[str, int]:
    host, port = _split_address(address)
    return host, int(port)


def check_port_free(address: str) -> None:
    """Process 0 serves the coordination service on the address's port: it must be free here."""
    _, port = _host_port(address)
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        # Like gRPC's server: a port left in TIME_WAIT by an earlier run counts as free, a listener does not.
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("", port))
        except OSError as e:
            raise ConfigError(f"JAX_COORDINATOR_ADDRESS={address}: port {port} is not free on this host "
                              f"({e.strerror or e}); process 0 serves the run there") from None


def wait_for_coordinator(address: str, timeout: float, poll: float = 0.25) -> None:
    """Processes other than 0: wait until process 0's coordinator accepts connections, or fail in one line."""
    host, port = _host_port(address)
    deadline = time.monotonic() + timeout
    while True:
        try:
            with socket.create_connection((host, port), timeout=max(poll, 0.1)):
                return
        except OSError as e:
            if time.monotonic() >= deadline:
                raise ConfigError(f"cannot reach the coordinator at {address} within {timeout:g} s "
                                  f"({e.strerror or e}): is process 0 running there?") from None
            time.sleep(poll)


def is_multiprocess() -> bool:
    return jax.process_count() > 1


def is_writer() -> bool:
    """Process 0 writes every result file; the others only compute."""
    return jax.process_index() == 0


def barrier(name: str) -> None:
    """All processes reach this point before any goes on (no-op on one process)."""
    if is_multiprocess():
        from jax.experimental import multihost_utils
        multihost_utils.sync_global_devices(name)


def to_host(tree: Any) -> Any:
    """numpy copy of a pytree, gathering the shards other processes hold.

    A collective when some leaf spans several processes: every process must call it, in the same
    order (they do, since every process runs the same sweep).
    """
    def one(x):
        if isinstance(x, jax.Array) and not x.is_fully_addressable:
            from jax.experimental import multihost_utils
            return np.asarray(multihost_utils.process_allgather(x, tiled=True))
        return np.asarray(jax.device_get(x))
    return jax.tree.map(one, tree)


def replicate(tree: Any, mesh) -> Any:
    """A global, fully replicated copy over `mesh` of host-identical arrays (no-op on one process).

    On one process jit moves arrays between local devices itself; across processes every argument
    of a step over the mesh must already be a global array.
    """
    if mesh is None or not is_multiprocess():
        return tree
    return place(tree, jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec()))


def place(tree: Any, sharding) -> Any:
    """Global arrays laid out by `sharding`, built from the (host-identical) values of `tree`.

    Each process fills only its own devices' shards (`make_array_from_callback`), so the same call
    places a tree on one host or many.
    """
    host = to_host(tree)
    return jax.tree.map(lambda x: jax.make_array_from_callback(x.shape, sharding, lambda idx: x[idx]), host)
