"""What a killed crawl left in the client namespace, told apart from programs someone runs there on purpose.

A crawl starts the browser, its driver, stubs, timers and captures in the
client namespace, each in a session of its own (so that a Ctrl-C reaches
only the crawl). When the crawl is killed they keep running as orphans:
followed up through their parents, they leave the namespace at init (or at
the user's systemd, which adopts the orphans of a desktop session). A
program someone runs there on purpose (a shell from `ip netns exec`, a
benchmark, a `dnsstudy visit`) has a living parent outside the namespace.
Only the orphans are a killed crawl's leftovers; the others are named and
left alone, since stopping them would break someone's work and calling them
leftovers would be wrong.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from harness import netns
from harness.daemons import terminate

#: Parents an orphan is handed to: init, or none at all (the kernel's own threads).
_ORPHANED = (0, 1)
#: Processes that adopt orphans besides init (a child subreaper such as `systemd --user`): the kernel does not say
#: which process is one, so they are known by name. Nobody runs a program in the client namespace from them.
_REAPERS = {"systemd", "init"}


@dataclass(frozen=True)
class NamespaceProcess:
    """A process found in a namespace, and the living process outside it that runs it (None: orphaned)."""

    pid: int
    name: str  # the kernel's short name (comm)
    command: str  # the command line, shortened
    owner: int | None  # the first ancestor outside the namespace, unless that adopts orphans (init)

    @property
    def orphaned(self) -> bool:
        return self.owner is None


def _stat(pid: int) -> tuple[str, int] | None:
    """(comm, parent pid) of a running process; None if it is gone or a zombie."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # comm may hold spaces and parentheses: it ends at the last ')'.
    comm = raw[raw.index("(") + 1 : raw.rindex(")")]
    fields = raw[raw.rindex(")") + 2 :].split()
    if fields[0] == "Z":
        return None
    return comm, int(fields[1])


def command_line(pid: int, limit: int = 80) -> str:
    """The process's arguments joined by spaces, at most ``limit`` characters ('' if unreadable)."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return ""
    text = raw.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace")
    return text if len(text) <= limit else text[: limit - 3] + "..."


def survey(namespace: str) -> list[NamespaceProcess]:
    """Every running process in ``namespace`` (except this one), with the living process outside it that runs it."""
    inside = set(netns.pids_in(namespace)) - {os.getpid()}
    found = []
    for pid in sorted(inside):
        own = _stat(pid)
        if own is None:
            continue
        ancestor, seen = own[1], {pid}
        # Up through parents inside the namespace (Firefox's content processes, a shell's children) to the first
        # outside it; a loop or a vanished parent ends the walk as if orphaned.
        while ancestor in inside and ancestor not in seen:
            seen.add(ancestor)
            parent = _stat(ancestor)
            ancestor = parent[1] if parent else 0
        outside = _stat(ancestor) if ancestor not in _ORPHANED else None
        owner = None if outside is None or outside[0] in _REAPERS else ancestor
        found.append(NamespaceProcess(pid, own[0], command_line(pid), owner))
    return found


def describe(processes: list[NamespaceProcess]) -> str:
    """'firefox-esr (pids 815, 820), stubby (pid 801)': names in the order met, with their pids."""
    pids: dict[str, list[int]] = {}
    for p in processes:
        pids.setdefault(p.name, []).append(p.pid)
    return ", ".join(f"{name} (pid{'s' if len(ps) > 1 else ''} {', '.join(map(str, ps))})" for name, ps in pids.items())


def stop_leftovers(namespace: str, grace: float = 0.5) -> list[str]:
    """Stop the orphans a killed crawl left in ``namespace``; lines saying what was stopped and what was left alone.

    No line at all when the namespace holds nothing: a crawl that starts after a clean stop says nothing.
    """
    processes = survey(namespace)
    leftovers = [p for p in processes if p.orphaned]
    terminate([p.pid for p in leftovers], grace)
    lines = []
    if leftovers:
        lines.append(
            f"stopped {len(leftovers)} process{'es' if len(leftovers) > 1 else ''} an interrupted crawl "
            f"left in {namespace}: {describe(leftovers)}"
        )
    for p in processes:
        if not p.orphaned:
            owner = _stat(p.owner) if p.owner else None
            lines.append(
                f"left running in {namespace}, not a crawl's leftover: pid {p.pid} {p.command or p.name} "
                f"(run by pid {p.owner} {owner[0] if owner else '?'}); it shares the crawl's link"
            )
    return lines
