"""TensorBoard event files of a run's metrics rows: ``DIR/tensorboard/<member>/events.out.tfevents.jaxinit``.

`write_rows(run_dir, rows)` is called after every metrics append with the new rows: each row becomes one
event (its step: the row's ``epoch`` or ``step``) in its member's folder, holding the row's scalar
metrics as tags (``val_loss`` -> ``val/loss``, ``train_acc`` -> ``train/acc``, ``param_norm``, ``lr``).
Nested values (per-layer norms, per-class lists), labels and the member's coordinates are left out: they
are in metrics.jsonl, and TensorBoard is for looking at curves.

Appending. A member has one event file, appended to by every call and by a resumed run, so no process
ever needs to keep a writer open. A run killed mid-write can leave a partial record at the end; the next
call cuts it off first (TensorBoard stops reading a file at a damaged record). Rows a resumed run writes
again (the epochs after its checkpoint) start at a step no later than the file's last one: a restart event
(``SessionLog.START``, what TensorFlow writes when a job restarts) goes first, and TensorBoard's reader then
drops the file's earlier events from that step on, so the curves show what metrics.jsonl holds.

Files. Every event file is recorded in the run's manifest (`jaxinit.run.manifest.Manifest`, without a digest:
it grows) before it is created, so ``--overwrite`` deletes it and nothing else, and it is never written
through a symbolic link out of the run. Records are framed as TFRecords (length, masked CRC-32C, data,
masked CRC-32C) around tensorboardX's protocol buffers; tensorboardX is imported on the first write only.
"""
from __future__ import annotations

import math
import numbers
import os
import re
import struct
import time
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from jaxinit.errors import ConfigError
from jaxinit.run import files
from jaxinit.run.manifest import Manifest

FOLDER = "tensorboard"
EVENTS = "events.out.tfevents.jaxinit"   # TensorBoard reads every file whose name holds "tfevents"
SPLITS = ("train", "val", "test")
# A member's coordinates and the row's place in training (epoch, step): not curves.
NOT_TAGS = frozenset({"member", "seed", "epoch", "step", "diverged_step", "sigma_w", "sigma_w2", "sigma_b2",
                      "depth", "width"})
_IGB_RUN = frozenset({"act", "depth", "optimizer"})
_UNSAFE = re.compile(r"[^A-Za-z0-9._+=-]")


def tag(key: str, prefix: str = "") -> str:
    """``val_loss`` -> ``val/loss`` (the train / val / test splits become TensorBoard's groups)."""
    split, sep, rest = key.partition("_")
    return prefix + (f"{split}/{rest}" if sep and split in SPLITS and rest else key)


def scalars(row: Mapping[str, Any], step_key: str = "epoch", prefix: str = "") -> dict[str, float]:
    """{tag: value} of a row's finite numbers (not bools, not `NOT_TAGS`, not ``step_key``)."""
    out = {}
    for key, v in row.items():
        if key in NOT_TAGS or key == step_key or isinstance(v, bool) or not isinstance(v, numbers.Real):
            continue
        if math.isfinite(v):
            out[tag(key, prefix)] = float(v)
    return out


def member_dir(row: Mapping[str, Any]) -> str:
    """The row's member folder: ``member_003_sgd_sw2.0_s0`` (forgetting rows); the IGB study's, whose
    member indices restart in every (activation, depth, optimizer) run, under that run's folder:
    ``tanh__d3__sgd/member_000_ordered-deep_s0``."""
    if _IGB_RUN <= row.keys():
        head = _safe(f"{row['act']}__d{int(row['depth'])}__{row['optimizer']}") + "/"
        parts = [row.get("role")]
    else:
        head = ""
        parts = [row.get("optimizer"), f"sw{float(row['sigma_w'])!r}" if "sigma_w" in row else None]
    parts.append(f"s{int(row['seed'])}" if "seed" in row else None)
    return head + _safe("_".join([f"member_{int(row['member']):03d}", *(str(p) for p in parts if p is not None)]))


def _safe(name: str) -> str:
    return _UNSAFE.sub("_", name)


def write_rows(run_dir: Path | str, rows: Iterable[Mapping[str, Any]], *, step_key: str = "epoch",
               tag_prefix: str = "", folder: Callable[[Mapping[str, Any]], str] = member_dir) -> list[Path]:
    """Append ``rows`` (metrics.jsonl rows) to ``run_dir/tensorboard/<folder(row)>/`` as scalar events at
    step ``row[step_key]``; returns the event files written. Call it with each batch of new rows."""
    out = Path(run_dir)
    if not out.is_dir():
        raise ConfigError(f"{files.safe_path(out)} is not a directory: TensorBoard files go into a run directory")
    by_file: dict[Path, list] = {}
    now = time.time()
    for row in rows:
        try:
            path = out / FOLDER / folder(row) / EVENTS
            step = int(row[step_key])
        except (KeyError, TypeError, ValueError) as err:
            raise ValueError(f"a metrics row without a usable {err} for TensorBoard: {sorted(row)[:8]}") from None
        by_file.setdefault(path, []).append((now, step, scalars(row, step_key, tag_prefix)))
    if not by_file:
        return []
    manifest = Manifest(out)
    owned = manifest.entries() if manifest.exists() else {}
    for path, events in by_file.items():
        files.check_inside(out, path)          # never through a link out of the run
        if manifest.rel(path) not in owned:
            manifest.record(path, "file")      # before the file exists: a kill leaves nothing unrecorded
        path.parent.mkdir(parents=True, exist_ok=True)
        _append(path, events)
    return list(by_file)


def _append(path: Path, events: list[tuple[float, int, dict[str, float]]]) -> None:
    """Append one event per (wall time, step, {tag: value}), after the file-version event of a new file and,
    when the steps go back (epochs written again), a restart event at the first of them."""
    from tensorboardX.proto.event_pb2 import Event, SessionLog
    from tensorboardX.proto.summary_pb2 import Summary
    from tensorboardX.summary import scalar
    intact, last_step = _tail(path) if path.exists() else (0, None)
    records = [] if intact else [Event(wall_time=events[0][0], file_version="brain.Event:2")]
    if last_step is not None and events[0][1] <= last_step:
        # TensorBoard's reader drops every event from this step on (SessionLog.START, as TensorFlow writes
        # at a restart): the curves show the rows written again, not both
        records.append(Event(wall_time=events[0][0], step=events[0][1],
                             session_log=SessionLog(status=SessionLog.START)))
    for wall_time, step, values in events:
        summary = Summary(value=[v for name, x in values.items() for v in scalar(name, x).value])
        records.append(Event(wall_time=wall_time, step=step, summary=summary))
    data = b"".join(_record(ev.SerializeToString()) for ev in records)
    try:
        with open(path, "r+b" if path.exists() else "wb") as f:
            f.truncate(intact)             # a partial record of a killed write goes
            f.seek(intact)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except OSError as err:
        raise ConfigError(files.describe_os_error(err, path)) from None


def _record(data: bytes) -> bytes:
    """A TFRecord: length, its masked CRC-32C, the data, its masked CRC-32C (little-endian)."""
    from tensorboardX.record_writer import masked_crc32c
    head = struct.pack("<Q", len(data))
    return head + struct.pack("<I", masked_crc32c(head)) + data + struct.pack("<I", masked_crc32c(data))


def _tail(path: Path) -> tuple[int, int | None]:
    """(bytes of the file's complete records, the step of its last event; None if that is the file-version
    event). A write killed midway leaves a partial last record, which is not counted."""
    from tensorboardX.proto.event_pb2 import Event
    from tensorboardX.record_writer import masked_crc32c
    size, pos, last = path.stat().st_size, 0, None
    with open(path, "rb") as f:
        while pos + 12 <= size:
            f.seek(pos)
            head = f.read(12)
            (length,) = struct.unpack("<Q", head[:8])
            if struct.unpack("<I", head[8:])[0] != masked_crc32c(head[:8]) or pos + 16 + length > size:
                break
            last, pos = (pos, length), pos + 16 + length
        if last is None:
            return pos, None
        f.seek(last[0] + 12)
        event = Event.FromString(f.read(last[1]))
    return pos, None if event.WhichOneof("what") == "file_version" else int(event.step)
