"""Several hosts (jaxinit.distributed): launch variables, bad launches, and a real two-process sweep.

The two-process tests (marked `slow`: `make test-slow`) run two `python -m experiments.forgetting`
processes on this machine, each with two forced host devices, joined by `jax.distributed` over
localhost (gloo collectives on CPU): the same global mesh of four devices as one process with four
devices, so the files must be byte-equal.
"""
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import jax
import numpy as np
import pytest

from experiments import forgetting, igb_init
from jaxinit import distributed
from jaxinit.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
ARGS = ["--preset", "smoke", "--sweep.sigma_w=0.5,1,1.5,2", "--data.name=gaussian", "--data.n_samples=1000",
        "--data.dim=32"]


def _env(**kw):
    return {"JAX_COORDINATOR_ADDRESS": "127.0.0.1:1234", "JAX_NUM_PROCESSES": "2", "JAX_PROCESS_ID": "0", **kw}


def test_no_variables_means_one_process():
    assert distributed.launch_settings({}) is None
    assert distributed.launch_settings({"JAX_PROCESS_ID": ""}) is None
    assert distributed.launch_settings(_env()) == ("127.0.0.1:1234", 2, 0)


@pytest.mark.parametrize("env, fragment", [
    ({"JAX_NUM_PROCESSES": "2"}, "missing JAX_COORDINATOR_ADDRESS, JAX_PROCESS_ID"),
    (_env(JAX_COORDINATOR_ADDRESS="localhost"), "HOST:PORT"),
    (_env(JAX_NUM_PROCESSES="two"), "integers"),
    (_env(JAX_PROCESS_ID="2"), r"\[0, JAX_NUM_PROCESSES=2\)"),
    (_env(JAX_PROCESS_ID="-1"), r"\[0, JAX_NUM_PROCESSES=2\)"),
])
def test_bad_launch_variables_are_config_errors(env, fragment):
    with pytest.raises(ConfigError, match=fragment):
        distributed.launch_settings(env)


def _refused_in_one_line(monkeypatch, capsys, tmp_path, env: dict, fragment: str) -> None:
    """The forgetting CLI under `env`: exit 2, one stderr line holding `fragment`, no output directory."""
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    out = tmp_path / "run"
    assert forgetting.run(ARGS + ["--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and fragment in err[0], err
    assert not out.exists()


def test_bad_launch_is_one_line_and_exit_2_before_anything_is_written(tmp_path, monkeypatch, capsys):
    _refused_in_one_line(monkeypatch, capsys, tmp_path, _env(JAX_PROCESS_ID="5"), "JAX_PROCESS_ID=5")


def test_unreachable_coordinator_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    # jax's own client would abort the process (a C++ fatal error) instead: the wait is ours.
    env = _env(JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{_free_port()}", JAX_PROCESS_ID="1", JAX_INIT_TIMEOUT="1")
    _refused_in_one_line(monkeypatch, capsys, tmp_path, env, "cannot reach the coordinator")


def test_busy_coordinator_port_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        env = _env(JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{busy.getsockname()[1]}")
        _refused_in_one_line(monkeypatch, capsys, tmp_path, env, "is not free")


def test_single_host_experiments_refuse_a_multi_host_launch(tmp_path, monkeypatch, capsys):
    for k, v in _env().items():
        monkeypatch.setenv(k, v)
    rc = igb_init.run(["--preset", "smoke", "--out", str(tmp_path / "igb")])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "runs on one host" in err[0]
    assert not (tmp_path / "igb").exists()


def test_to_host_and_replicate_on_one_process():
    tree = {"a": jax.numpy.arange(3.0), "b": (np.int32(4),)}
    host = distributed.to_host(tree)
    assert isinstance(host["a"], np.ndarray) and host["a"].tolist() == [0.0, 1.0, 2.0]
    assert distributed.replicate(tree, None) is tree
    assert distributed.is_writer() and not distributed.is_multiprocess()


# --------------------------------------------------------------------------- two real processes
def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _base_env(devices: int) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in distributed.ENV_VARS}
    env["XLA_FLAGS"] = (os.environ.get("XLA_FLAGS", "") + f" --xla_force_host_platform_device_count={devices}").strip()
    return env


# Not a speed bound: only a guard against a process left waiting forever in a collective by its peer.
HANG_GUARD_S = 3600


def _two_processes(argv, timeout=HANG_GUARD_S):
    """Run the forgetting CLI as processes 0 and 1 of one run; return their (rc, stderr)."""
    port = _free_port()
    procs = []
    for pid in range(2):
        env = {**_base_env(2), "JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_NUM_PROCESSES": "2",
               "JAX_PROCESS_ID": str(pid), "JAX_INIT_TIMEOUT": "120"}
        procs.append(subprocess.Popen([sys.executable, "-m", "experiments.forgetting", *argv], cwd=ROOT, env=env,
                                      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True))
    results = []
    try:
        for p in procs:
            _, err = p.communicate(timeout=timeout)
            results.append((p.returncode, err))
    finally:
        for p in procs:   # one process failing leaves the other waiting in a collective
            p.kill()
    return results


def _one_process(argv, out, devices: int) -> None:
    subprocess.run([sys.executable, "-m", "experiments.forgetting", *argv, "--out", str(out)], cwd=ROOT,
                   env=_base_env(devices), check=True, capture_output=True)


def _assert_two_processes_write(argv, out, reference) -> None:
    """Processes 0 and 1 both succeed, and their files are byte-equal to `reference`'s."""
    results = _two_processes(argv + ["--out", str(out)])
    assert [rc for rc, _ in results] == [0, 0], results[0][1][-2000:] + results[1][1][-2000:]
    for name in ("summary.json", "metrics.jsonl"):
        assert (out / name).read_bytes() == (reference / name).read_bytes(), name


@pytest.mark.slow
def test_two_processes_write_the_four_device_files_byte_for_byte_and_resume(tmp_path):
    four, two = tmp_path / "four", tmp_path / "two"
    _one_process(ARGS, four, devices=4)
    _assert_two_processes_write(ARGS, two, four)
    run = json.loads((two / "run.json").read_text())
    assert run["processes"] == 2 and run["devices"] == 4

    # Resume on two processes from the epoch-1 checkpoint they wrote together: the same files again.
    # Checkpoints are named by global step (jaxinit.run.checkpoint); metrics rows carry it per epoch.
    # (A diverged member's step counter freezes, hence the max over members.)
    rows = [json.loads(line) for line in (two / "metrics.jsonl").read_text().splitlines()]
    end_of = {e: max(r["step"] for r in rows if r["epoch"] == e) for e in (1, 2)}
    saved = sorted(int(p.name) for p in (two / "checkpoints").iterdir() if p.name.isdigit())
    assert saved[-2:] == [end_of[1], end_of[2]] and end_of[2] == 2 * end_of[1], (saved, end_of)
    shutil.rmtree(two / "checkpoints" / str(saved[-1]))
    (two / "summary.json").unlink()
    _assert_two_processes_write(["--resume"], two, four)


@pytest.mark.slow
def test_members_the_mesh_does_not_divide_are_replicated_and_match_one_device_exactly(tmp_path):
    # 3 members, sequential: no chunk can be laid over 4 devices, so every host trains every member on a
    # replicated global array; the arithmetic is then the one-device program's, bit for bit.
    args = ARGS[:2] + ["--sweep.sigma_w=0.5,1,2", "--train.strategy=sequential"] + ARGS[3:]
    _one_process(args, tmp_path / "one", devices=1)
    _assert_two_processes_write(args, tmp_path / "two", tmp_path / "one")


# --------------------------------------------------------------------------- issue 20 item 12: the handshake
@pytest.mark.parametrize("address", ["localhost:99999", "localhost:0", "localhost:²"])
def test_a_port_out_of_range_is_one_line(address):
    with pytest.raises(ConfigError, match="out of range|HOST:PORT") as err:
        distributed.launch_settings(_env(JAX_COORDINATOR_ADDRESS=address))
    assert "\n" not in str(err.value)


def test_the_cli_refuses_a_port_out_of_range_in_one_line(tmp_path, monkeypatch, capsys):
    _refused_in_one_line(monkeypatch, capsys, tmp_path, _env(JAX_COORDINATOR_ADDRESS="localhost:99999"),
                         "port 99999 out of range")


def test_process_0_without_its_peer_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys):
    # The most common launch mistake: jax's own client would abort with SIGABRT after the timeout.
    env = _env(JAX_COORDINATOR_ADDRESS=f"127.0.0.1:{_free_port()}", JAX_INIT_TIMEOUT="1")
    _refused_in_one_line(monkeypatch, capsys, tmp_path, env, "process(es) 1 did not join within JAX_INIT_TIMEOUT=1 s")
    assert not jax.distributed.is_initialized()


def _peer(port, line, read_after=False):
    """A fake process talking the handshake: sends `line`, then optionally reads one answer; returns it."""
    answer = []

    def run():
        deadline = time.monotonic() + 10
        while True:
            try:
                conn = socket.create_connection(("127.0.0.1", port), timeout=0.2)
                break
            except OSError:
                if time.monotonic() > deadline:
                    return
        with conn:
            conn.settimeout(10)
            conn.sendall(line)
            if read_after:
                try:
                    answer.append(conn.recv(256))
                except OSError:
                    pass
    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, answer


@pytest.mark.parametrize("hellos, fragment", [
    ([b"jaxinit-join 1 n=3 id=1\n"], "process 1 was started with JAX_NUM_PROCESSES=3, process 0 with 2"),
    ([b"jaxinit-join 1 n=3 id=1\n", b"jaxinit-join 1 n=3 id=1\n"], "two processes were started with JAX_PROCESS_ID=1"),
])
def test_process_0_refuses_mismatched_peers_in_one_line_and_tells_them(hellos, fragment):
    port = _free_port()
    n = 3 if len(hellos) == 2 else 2
    peers = [_peer(port, h, read_after=True) for h in hellos]
    with pytest.raises(ConfigError, match=fragment) as err:
        distributed.gather_peers(f"127.0.0.1:{port}", n, timeout=10)
    assert "\n" not in str(err.value)
    for t, answer in peers:
        t.join(10)
    assert any(a and a[0].startswith(b"refuse " + fragment.encode()[:20]) for _, a in peers)


def test_a_peer_that_leaves_after_its_hello_is_not_counted(tmp_path):
    port = _free_port()
    t, _ = _peer(port, b"jaxinit-join 1 n=2 id=1\n")        # says hello, then closes at once
    with pytest.raises(ConfigError, match="did not join|left before the run started"):
        distributed.gather_peers(f"127.0.0.1:{port}", 2, timeout=2)
    t.join(10)


def test_a_stranger_on_the_port_does_not_disturb_the_join():
    port = _free_port()
    stranger, _ = _peer(port, b"GET / HTTP/1.0\r\n\r\n")
    joined = []
    peer = threading.Thread(target=lambda: joined.append(
        distributed.join_coordinator(f"127.0.0.1:{port}", 2, 1, timeout=10)), daemon=True)
    peer.start()
    distributed.gather_peers(f"127.0.0.1:{port}", 2, timeout=10)   # returns: every peer acknowledged
    peer.join(10)
    stranger.join(10)
    assert joined == [None]


def _fake_process_0(port, reply):
    """A listener that reads one hello and answers `reply` (None: never answers)."""
    server = socket.create_server(("127.0.0.1", port))

    def run():
        conn, _ = server.accept()
        with conn:
            conn.recv(256)
            if reply is not None:
                conn.sendall(reply)
            else:
                time.sleep(3)
        server.close()
    threading.Thread(target=run, daemon=True).start()


@pytest.mark.parametrize("reply, fragment", [
    (b"refuse process 2 did not join\n", "did not start the run: process 2 did not join"),
    (None, "process 0 is there but not every process joined"),
])
def test_a_peer_turned_away_by_process_0_is_one_line(reply, fragment):
    port = _free_port()
    _fake_process_0(port, reply)
    with pytest.raises(ConfigError, match=fragment) as err:
        distributed.join_coordinator(f"127.0.0.1:{port}", 3, 1, timeout=1)
    assert "\n" not in str(err.value)


def _script_env(port, pid, n, timeout="20"):
    return {**_base_env(1), "JAX_COORDINATOR_ADDRESS": f"127.0.0.1:{port}", "JAX_NUM_PROCESSES": str(n),
            "JAX_PROCESS_ID": str(pid), "JAX_INIT_TIMEOUT": timeout}


JOIN_SCRIPT = """
import sys
from jaxinit import distributed
from jaxinit.errors import ConfigError
try:
    distributed.initialize_from_env()
except ConfigError as e:
    print(f"error: {e}", file=sys.stderr)
    sys.exit(2)
import jax, numpy as np
from jax.experimental import multihost_utils
print(multihost_utils.process_allgather(np.array([jax.process_index()])).ravel().tolist())
"""


def _join(envs):
    procs = [subprocess.Popen([sys.executable, "-c", JOIN_SCRIPT], cwd=ROOT, env=e, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for e in envs]
    try:
        return [(p.wait(timeout=HANG_GUARD_S), p.stdout.read(), p.stderr.read()) for p in procs]
    finally:
        for p in procs:
            p.kill()


def _errors(stderr):
    return [line for line in stderr.splitlines() if line.strip()]


@pytest.mark.slow
def test_two_real_processes_handshake_then_join_jax():
    port = _free_port()
    results = _join([_script_env(port, 0, 2), _script_env(port, 1, 2)])
    assert [rc for rc, _, _ in results] == [0, 0], results
    assert all(out.strip().endswith("[0, 1]") for _, out, _ in results)


@pytest.mark.slow
def test_a_real_process_0_alone_exits_2_with_one_line_not_sigabrt():
    (rc, _, err), = _join([_script_env(_free_port(), 0, 2, timeout="2")])
    assert rc == 2 and len(_errors(err)) == 1 and "did not join within JAX_INIT_TIMEOUT=2 s" in err, err


@pytest.mark.slow
def test_real_processes_with_different_process_counts_both_exit_2_in_one_line():
    port = _free_port()
    results = _join([_script_env(port, 0, 2), _script_env(port, 1, 3)])
    assert [rc for rc, _, _ in results] == [2, 2], results
    for _, _, err in results:
        assert len(_errors(err)) == 1 and "JAX_NUM_PROCESSES=3, process 0 with 2" in err, err


@pytest.mark.slow
def test_the_forgetting_cli_as_process_0_alone_is_one_line_and_exit_2(tmp_path):
    env = _script_env(_free_port(), 0, 2, timeout="2")
    proc = subprocess.run([sys.executable, "-m", "experiments.forgetting", *ARGS, "--out", str(tmp_path / "r")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=HANG_GUARD_S)
    assert proc.returncode == 2 and len(_errors(proc.stderr)) == 1 and "did not join" in proc.stderr, proc.stderr
    assert not (tmp_path / "r").exists()
