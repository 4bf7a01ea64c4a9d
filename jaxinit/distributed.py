"""Several hosts: joining a multi-process run, gathering sharded results, one writer.

A sweep runs the same program on every process (JAX's multi-controller model). The member axis is
laid over a 1-D mesh named 'members' that spans the devices of *all* processes (`jaxinit.train.members.member_mesh`),
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
three variables a run is single-process, on however many local devices there are.

Joining is checked before jax is asked to: jax's coordination client aborts the whole process (SIGABRT,
a page of C++ log, after `JAX_INIT_TIMEOUT`) when a peer never registers. So process 0 first listens
on the coordinator's port itself and waits for a hello from every other process (`gather_peers`),
each peer connects and says hello (`join_coordinator`), and only when all are there does process 0
answer "go", every peer acknowledge it, and all call `jax.distributed.initialize`. A missing peer,
a peer started with another `JAX_NUM_PROCESSES`, two peers with one `JAX_PROCESS_ID` or an
unreachable process 0 is one line and exit status 2 on every process, within `JAX_INIT_TIMEOUT`
seconds (default 300) of its start. (A peer that dies between its acknowledgement and jax's
registration is still jax's to report.)
"""
from __future__ import annotations

import contextlib
import os
import re
import selectors
import socket
import time
from typing import Any, Mapping

import jax
import numpy as np

from jaxinit.errors import ConfigError

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
    if not host or not re.fullmatch(r"[0-9]+", port):
        raise ConfigError(f"JAX_COORDINATOR_ADDRESS={address!r}: expected HOST:PORT")
    if not 1 <= int(port) <= 65535:
        raise ConfigError(f"JAX_COORDINATOR_ADDRESS={address!r}: port {int(port)} out of range (1 to 65535)")
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
    if not re.fullmatch(r"[0-9]+", timeout) or int(timeout) < 1:
        raise ConfigError(f"JAX_INIT_TIMEOUT={timeout!r}: expected a whole number of seconds >= 1")
    # jax's coordination client aborts the whole process (a C++ fatal error, no Python exception) when it
    # cannot register, so the usual launch mistakes are caught here first, as one line.
    if pid == 0:
        gather_peers(address, n, float(timeout))
    else:
        join_coordinator(address, n, pid, float(timeout))
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
    """Process 0 serves the coordination service on the address's port: it must be free here
    (`gather_peers` checks the same by listening there first)."""
    _listen(address).close()


# --------------------------------------------------------------------------- the pre-flight handshake
_HELLO = "jaxinit-join 1"


def _hello(n: int, pid: int) -> bytes:
    return f"{_HELLO} n={n} id={pid}\n".encode()


def _parse_hello(line: bytes) -> tuple[int, int] | None:
    """(n, id) of a peer's hello line, or None for anything else (a port scanner, an old client)."""
    parts = line.decode("ascii", "replace").split()
    if len(parts) != 4 or " ".join(parts[:2]) != _HELLO or not parts[2].startswith("n=") or not parts[3].startswith("id="):
        return None
    try:
        return int(parts[2][2:]), int(parts[3][3:])
    except ValueError:
        return None


def _listen(address: str) -> socket.socket:
    """Process 0's listener on the coordinator's port (all interfaces, like jax's service)."""
    _, port = _host_port(address)
    dual = socket.has_dualstack_ipv6()
    try:
        # create_server sets SO_REUSEADDR, like gRPC: a port in TIME_WAIT counts as free, a listener does not.
        return socket.create_server(("", port), family=socket.AF_INET6 if dual else socket.AF_INET,
                                    dualstack_ipv6=dual, backlog=64)
    except OSError as e:
        raise ConfigError(f"JAX_COORDINATOR_ADDRESS={address}: port {port} is not free on this host "
                          f"({e.strerror or e}); process 0 serves the run there") from None


def gather_peers(address: str, n: int, timeout: float) -> None:
    """Process 0: wait up to ``timeout`` s until processes 1..n-1 said hello, tell them to go and collect
    their acknowledgements; otherwise refuse every connected peer and raise one line."""
    deadline = time.monotonic() + timeout
    server = _listen(address)
    sel = selectors.DefaultSelector()
    sel.register(server, selectors.EVENT_READ)
    lines: dict[socket.socket, bytearray] = {}
    joined: dict[int, socket.socket] = {}

    def fail(why: str) -> None:
        for conn in list(lines):
            try:
                conn.sendall(f"refuse {why}\n".encode())
            except OSError:
                pass
            conn.close()
        sel.close()
        server.close()
        raise ConfigError(f"cannot start the run at {address} as process 0 of {n}: {why}")

    while len(joined) < n - 1:
        if time.monotonic() >= deadline:
            missing = ", ".join(str(k) for k in range(1, n) if k not in joined)
            fail(f"process(es) {missing} did not join within JAX_INIT_TIMEOUT={timeout:g} s; start one process per "
                 f"JAX_PROCESS_ID with the same JAX_COORDINATOR_ADDRESS and JAX_NUM_PROCESSES")
        for key, _ in sel.select(timeout=min(0.5, max(0.0, deadline - time.monotonic()))):
            if key.fileobj is server:
                conn, _ = server.accept()
                conn.setblocking(False)
                lines[conn] = bytearray()
                sel.register(conn, selectors.EVENT_READ)
                continue
            conn = key.fileobj
            try:
                data = conn.recv(256)
            except OSError:
                data = b""
            if not data:                       # gone (a peer that gave up leaves the list again)
                sel.unregister(conn)
                lines.pop(conn).clear()
                joined = {k: c for k, c in joined.items() if c is not conn}
                conn.close()
                continue
            lines[conn] += data
            if b"\n" not in lines[conn] or conn in joined.values():
                if len(lines[conn]) > 256:
                    sel.unregister(conn)
                    lines.pop(conn)
                    conn.close()
                continue
            hello = _parse_hello(bytes(lines[conn]).split(b"\n")[0])
            if hello is None:                  # not one of ours: ignore it
                sel.unregister(conn)
                lines.pop(conn)
                conn.close()
                continue
            peer_n, peer = hello
            if peer_n != n:
                fail(f"process {peer} was started with JAX_NUM_PROCESSES={peer_n}, process 0 with {n}")
            if peer in joined:
                fail(f"two processes were started with JAX_PROCESS_ID={peer}")
            joined[peer] = conn
    _go(joined, deadline, fail)
    sel.close()
    server.close()


def _go(joined: dict[int, socket.socket], deadline: float, fail) -> None:
    """Send "go" to every peer, read each one's "ack", then send "start": a peer that gave up in the
    meantime (its own deadline passed as the last one joined) fails the start for all, in one line."""
    for peer, conn in sorted(joined.items()):
        try:
            conn.setblocking(True)
            conn.settimeout(max(0.1, deadline - time.monotonic()))
            conn.sendall(b"go\n")
        except OSError:
            fail(f"process {peer} left before the run started (it timed out or was stopped)")
    for peer, conn in sorted(joined.items()):
        try:
            if _read_line(conn) != b"ack":
                raise OSError("no acknowledgement")
        except OSError:
            fail(f"process {peer} left before the run started (it timed out or was stopped)")
    for conn in joined.values():
        with contextlib.suppress(OSError):
            conn.sendall(b"start\n")
    for conn in joined.values():
        with contextlib.suppress(OSError):
            conn.settimeout(1.0)
            conn.recv(1)                       # let the peer close first (its side keeps the TIME_WAIT)
        conn.close()


def _read_line(conn: socket.socket) -> bytes:
    """One line from a blocking socket (timeouts and a closed peer raise OSError)."""
    data = bytearray()
    while b"\n" not in data:
        chunk = conn.recv(256)
        if not chunk:
            raise ConnectionResetError("closed")
        data += chunk
        if len(data) > 4096:
            raise OSError("line too long")
    return bytes(data).split(b"\n")[0].strip()


def join_coordinator(address: str, n: int, pid: int, timeout: float, poll: float = 0.25,
                     grace: float = 30.0) -> None:
    """Processes other than 0: say hello to process 0 and wait up to ``timeout`` s for its "go",
    acknowledge it and wait for "start" (process 0 is collecting the others' acknowledgements: up to
    ``grace`` s more); a refusal, a process 0 that never answers or one that cannot be reached is one line."""
    deadline = time.monotonic() + timeout
    host, port = _host_port(address)
    why, reached = "no answer", False
    while time.monotonic() < deadline:
        try:
            conn = socket.create_connection((host, port), timeout=max(poll, 0.1))
        except OSError as e:
            why = e.strerror or str(e) or type(e).__name__
            time.sleep(poll)
            continue
        reached = True
        with conn:
            try:
                conn.settimeout(max(0.1, deadline - time.monotonic()))
                conn.sendall(_hello(n, pid))
                line = _read_line(conn)
            except TimeoutError:
                why = "process 0 is there but not every process joined"
                break
            except OSError as e:        # process 0 went away, or something else listens there
                why = e.strerror or str(e) or type(e).__name__
                time.sleep(poll)
                continue
            if line == b"go":
                try:
                    conn.sendall(b"ack\n")
                    conn.settimeout(max(0.1, deadline - time.monotonic()) + grace)
                    line = _read_line(conn)
                except OSError as e:
                    raise ConfigError(f"cannot join the run at {address} as process {pid} of {n}: process 0 "
                                      f"went away before the start ({e.strerror or e or type(e).__name__})") from None
                if line == b"start":
                    return
            if line.startswith(b"refuse "):
                reason = line[len(b"refuse "):].decode("utf-8", "replace")
                raise ConfigError(f"process 0 at {address} did not start the run: {reason}")
            why = "an answer that is not a jaxinit process 0"
        time.sleep(poll)
    if not reached:
        raise ConfigError(f"cannot reach the coordinator at {address} within JAX_INIT_TIMEOUT={timeout:g} s "
                          f"({why}): is process 0 running there?")
    raise ConfigError(f"cannot join the run at {address} as process {pid} of {n} within JAX_INIT_TIMEOUT="
                      f"{timeout:g} s ({why}); start one process per JAX_PROCESS_ID with the same "
                      f"JAX_NUM_PROCESSES")


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
