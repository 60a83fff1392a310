"""One writer at a time per warehouse (docs/scheduling.md): a lock that names its holder.

The lock is an advisory `flock` on `<warehouse>/_causal/writer.lock`, so the kernel
releases it when its holder dies, however it dies (SIGKILL included): a dead holder
never blocks the next run. Its holder is described in `_causal/writer.json` (pid,
host, command, since when) so that a refused writer can say who holds it. Readers
take no lock: they read the versions a committed `runs` row names.

`flock` is local to one machine's kernel (and NFS clients emulate it): writers of one
warehouse must run on one machine, or on a filesystem whose locks span machines.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

from causal_spark.io import delta
from causal_spark.io.ledger import WarehouseError

LOCK_FOLDER = "_causal"
POLL_SECONDS = 0.5

# warehouses this process holds (the lock is re-entrant within a process: the CLI takes
# it before starting Spark, and the job it runs asks again)
_HELD: dict[str, int] = {}


class WarehouseBusyError(WarehouseError):
    """Another live process holds the warehouse's writer lock."""


def _holder_text(folder: str) -> str:
    try:
        with open(os.path.join(folder, "writer.json"), encoding="utf-8") as handle:
            holder: dict[str, Any] = json.load(handle)
    except (OSError, ValueError):
        return "another process (no holder recorded yet)"
    return (
        f"{holder.get('command', '?')} (pid {holder.get('pid', '?')} on "
        f"{holder.get('host', '?')}, since {holder.get('since', '?')})"
    )


@contextmanager
def writer_lock(root: str, command: str, wait: float = 0.0) -> Iterator[None]:
    """Hold the writer lock of warehouse `root` for the block.

    Fails at once with `WarehouseBusyError` naming the holder, or after `wait` seconds
    of waiting for it.
    """
    root = os.path.abspath(root)
    problem = delta.unsupported_path(root)
    if problem is not None:
        raise WarehouseError(f"warehouse {problem}")
    if root in _HELD:
        yield
        return
    folder = os.path.join(root, LOCK_FOLDER)
    os.makedirs(folder, exist_ok=True)
    fd = os.open(os.path.join(folder, "writer.lock"), os.O_RDWR | os.O_CREAT, 0o644)
    deadline = time.monotonic() + max(wait, 0.0)
    try:
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    waited = f" after waiting {wait:g} s" if wait > 0 else ""
                    raise WarehouseBusyError(
                        f"warehouse {root} is being written by {_holder_text(folder)}{waited}; "
                        "one writer at a time: retry later, or pass --wait SECONDS"
                    ) from None
                time.sleep(POLL_SECONDS)
        holder = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "command": command,
            "since": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        with open(os.path.join(folder, "writer.json"), "w", encoding="utf-8") as handle:
            json.dump(holder, handle)
        _HELD[root] = fd
        try:
            yield
        finally:
            del _HELD[root]
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
