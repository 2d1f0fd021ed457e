"""How many workers this host runs without their page loads slowing each other: measured, then checked.

`benchmarks/contamination.py` runs the same visits with one worker and with
several, compares their onLoad distributions, and writes the largest number
whose onLoad it could not tell from one worker's into `CAPACITY_FILE`. A
worker counts the workers running on its host when it starts (each holds its
place's lock, saying so) and warns when there are more than that number, or
when this host was never measured.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path

from harness.lock import LOCK_DIR

CAPACITY_FILE = Path("/var/lib/dnsstudy/capacity.json")
WORKER_DOING = "worked for vantage point"  # how a worker's place lock names what it does


def record_capacity(safe_workers: int, evidence: dict, path: Path = CAPACITY_FILE) -> None:
    """Keep the measured safe number of workers for this host, with what it rests on."""
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {"host": socket.gethostname(), "safe_workers": safe_workers, "measured_at": time.time(), **evidence}
    path.write_text(json.dumps(record, indent=2) + "\n")


def safe_workers(path: Path = CAPACITY_FILE) -> int | None:
    """The measured safe number of workers on this host, or None if it was never measured here."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    return int(record["safe_workers"]) if record.get("host") == socket.gethostname() else None


def running_workers(lock_dir: Path = LOCK_DIR) -> int:
    """Workers running on this host: place locks held (flock taken) by a worker."""
    count = 0
    for path in lock_dir.glob("*.lock"):
        try:
            holder = json.loads(path.read_text() or "{}")
        except (OSError, ValueError):
            continue
        if not str(holder.get("doing", "")).startswith(WORKER_DOING):
            continue
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)  # taken: nobody holds it, the record is stale
        except OSError:
            count += 1
        finally:
            os.close(fd)
    return count


def capacity_warning(lock_dir: Path = LOCK_DIR, path: Path = CAPACITY_FILE) -> str | None:
    """A warning when this host runs more workers than measured safe (or was never measured), else None."""
    running, safe = running_workers(lock_dir), safe_workers(path)
    if safe is None:
        if running > 1:
            return (
                f"{running} workers run on this host, whose safe number was never measured: their page loads may "
                "slow each other (run benchmarks/contamination.py, docs/distributed.md)"
            )
        return None
    if running > safe:
        return (
            f"{running} workers run on this host, more than the {safe} measured safe ({path}): "
            "their page loads slow each other measurably"
        )
    return None
