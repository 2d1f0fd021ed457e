"""Long-running lab processes: started inside a namespace, tracked by pid and start time."""

from __future__ import annotations

import os
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
    """One supervised process of the lab."""

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
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                start_new_session=True, close_fds=True, env={**os.environ, **self.env},
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

    def signal(self, sig: int) -> None:
        if self.alive():
            try:
                os.kill(self.pid, sig)
            except ProcessLookupError:
                pass

    def to_dict(self) -> dict:
        return asdict(self)


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass  # not our child: init reaps it


def stop_all(daemons: list[Daemon], grace: float = 1.0) -> None:
    """SIGTERM every daemon, then SIGKILL whatever is left after ``grace`` seconds."""
    for d in daemons:
        d.signal(signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(d.alive() for d in daemons):
        time.sleep(0.02)
    for d in daemons:
        d.signal(signal.SIGKILL)
        _reap(d.pid)


def kill_namespace_processes(namespaces: list[str], grace: float = 0.5) -> list[int]:
    """Kill every process still inside the namespaces, whoever started it."""
    pids = [pid for ns in namespaces for pid in netns.pids_in(ns)]
    for pid in pids:
        try:
            os.kill(pid, signal.SIGTERM)
        except ProcessLookupError:
            pass
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and any(Path(f"/proc/{p}").exists() and (_stat_fields(p) or ["Z"])[0] != "Z" for p in pids):
        time.sleep(0.02)
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        _reap(pid)
    return pids
