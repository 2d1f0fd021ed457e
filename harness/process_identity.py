"""A process told apart from any later one with its pid: what the store's `crawler` table holds of the
process running a study (a crawl or a coordinator), and whether it still runs.

A pid alone does not say whether a crawl runs: after the crawl dies (or the
machine reboots) the pid may name another process. So the crawl records,
with its pid, the process's start time in clock ticks since boot (field 22
of /proc/PID/stat), the boot's ID and the host's name. The crawl is alive
when, on that host and in that boot, the pid still names a process started
at that tick.
"""

from __future__ import annotations

import socket
from dataclasses import asdict, dataclass
from pathlib import Path

from harness.daemons import start_time

BOOT_ID = Path("/proc/sys/kernel/random/boot_id")


@dataclass(frozen=True)
class Identity:
    """A process as it is told apart from any later process with its pid."""

    pid: int
    pid_started: int  # clock ticks since boot
    boot_id: str
    hostname: str

    def to_dict(self) -> dict:
        return asdict(self)


def boot_id() -> str:
    """This boot's ID ('' where the kernel does not say)."""
    try:
        return BOOT_ID.read_text().strip()
    except OSError:
        return ""


def identity(pid: int) -> Identity | None:
    """``pid`` as it runs now on this host; None if no such process runs."""
    started = start_time(pid)
    if started is None:
        return None
    return Identity(pid, started, boot_id(), socket.gethostname())


def liveness(recorded: Identity) -> str:
    """'alive', 'dead', or 'elsewhere' (recorded on another host: it cannot be checked from here)."""
    if recorded.hostname != socket.gethostname():
        return "elsewhere"
    if recorded.boot_id and recorded.boot_id != boot_id():
        return "dead"  # the machine rebooted since
    now = identity(recorded.pid)
    return "alive" if now is not None and now.pid_started == recorded.pid_started else "dead"
