"""Starting an experiment in a subprocess and stopping it at a known point (the kill-and-resume tests)."""
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def start_until_epoch(name: str, args, out: Path, epoch: int, timeout: float = 120, env: dict | None = None):
    """Start ``python -m experiments.<name> *args --out out`` and return it once its metrics.jsonl has a row of
    ``epoch`` (or it ended, or ``timeout`` s passed). stderr is piped so a test can read the process's last words."""
    proc = subprocess.Popen([sys.executable, "-m", f"experiments.{name}", *args, "--out", str(out)], cwd=ROOT,
                            env=env or {**os.environ, "PYTHONUNBUFFERED": "1"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None:
        metrics = out / "metrics.jsonl"
        if metrics.exists() and f'"epoch": {epoch},' in metrics.read_text():
            break
        time.sleep(0.05)
    return proc
