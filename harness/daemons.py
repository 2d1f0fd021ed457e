"""Long-running processes the harness supervises (lab daemons, stubs, shaping delayers): started inside a
namespace, tracked by pid and start time."""

from __future__ import annotations

import os
import select
import signal
import subprocess
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness import netns


def _stat_fields(pid: int) -> list[str] | None:
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may contain spaces and parentheses; fields follow the last ')'.
    return raw[raw.rindex(")") + 2 :].split()


def start_time(pid: int) -> int | None:
    """Kernel start time of a process (clock ticks since boot), to spot pid reuse."""
    fields = _stat_fields(pid)
    return int(fields[19]) if fields else None


@dataclass
class Daemon:
    """One supervised process, in the namespace it was started in."""

    name: str
    namespace: str
    argv: list[str]
    log: str
    addresses: list[str]
    env: dict[str, str] = field(default_factory=dict)  # added to our environment
    pid: int = 0
    started: int = 0

    def start(self) -> None:
        """Start the process in its namespace, detached from our session."""
        with open(self.log, "ab") as log:
            proc = subprocess.Popen(
                netns.command(self.namespace, self.argv),
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                close_fds=True,
                env={**os.environ, **self.env},
            )
        self.pid = proc.pid
        # `ip netns exec` replaces itself with the program, so this pid is the daemon's.
        self.started = start_time(proc.pid) or 0

    def alive(self) -> bool:
        """True while the very process we started runs (not a zombie, not a reused pid)."""
        fields = _stat_fields(self.pid) if self.pid else None
        if not fields or int(fields[19]) != self.started:
            return False
        if fields[0] == "Z":
            _reap(self.pid)
            return False
        return True

    def to_dict(self) -> dict:
        return asdict(self)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child: init reaps it


def running(pid: int) -> bool:
    """True if the process exists and has not ended: a zombie (killed, not yet reaped) is not running."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] != "Z"


def stopped(pid: int) -> bool:
    """True if the process is stopped (SIGSTOP, a debugger): alive in /proc, yet it answers nothing."""
    fields = _stat_fields(pid)
    return fields is not None and fields[0] in ("T", "t")


#: How long a SIGKILLed process may take to end (the kernel's work: milliseconds), before `terminate` returns anyway.
KILLED_WITHIN_S = 1.0


def terminate(pids: list[int], grace: float) -> None:
    """SIGTERM the processes, then SIGKILL whatever still runs after ``grace`` seconds; return once they ended.

    Each is held by a pidfd from before the first signal, so a pid reused meanwhile is never signalled, and the
    wait ends the moment the last one exits (a stub's stop inside a visit's window: 1-2 ms, against the 20 ms
    of a polling step before).
    """
    held = _pidfds(pids)
    try:
        for fd in held.values():
            _signal(fd, signal.SIGTERM)
        _wait_ended(list(held.values()), grace)
        for fd in held.values():
            _signal(fd, signal.SIGKILL)
        _wait_ended(list(held.values()), KILLED_WITHIN_S)  # at once for those that had ended
    finally:
        for fd in held.values():
            os.close(fd)
    for pid in held:
        _reap(pid)


def _pidfds(pids: list[int]) -> dict[int, int]:
    """A pidfd for each process that still exists, by pid."""
    held = {}
    for pid in pids:
        try:
            held[pid] = os.pidfd_open(pid)
        except ProcessLookupError:
            pass
    return held


def _signal(pidfd: int, sig: int) -> None:
    try:
        signal.pidfd_send_signal(pidfd, sig)
    except ProcessLookupError:  # it has ended (a zombie not yet reaped takes no signal either)
        pass


def _wait_ended(pidfds: list[int], timeout: float) -> None:
    """Wait until every process has ended (its pidfd readable: a zombie has), at most ``timeout`` seconds."""
    poller = select.poll()
    for fd in pidfds:
        poller.register(fd, select.POLLIN)
    left, deadline = len(pidfds), time.monotonic() + timeout
    while left and (remaining := deadline - time.monotonic()) > 0:
        for fd, _ in poller.poll(remaining * 1000):
            poller.unregister(fd)
            left -= 1


def stop_all(daemons: list[Daemon], grace: float = 1.0) -> None:
    """Stop the daemons we started (only those whose pid still names them)."""
    terminate([d.pid for d in daemons if d.alive()], grace)


def kill_namespace_processes(namespaces: list[str], grace: float = 0.5) -> list[int]:
    """Kill every process still inside the namespaces, whoever started it."""
    pids = [pid for ns in namespaces for pid in netns.pids_in(ns)]
    terminate(pids, grace)
    return pids
