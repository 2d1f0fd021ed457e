"""One crawl per store and one user per place at a time: `fcntl.flock` on a lock file.

A crawl holds two locks for its whole run: its store's (`<store>.lock`, next
to the store) and its place's (`/run/dnsstudy/locks/<prefix>.lock`: the
lab's, or the Internet side's). `visit`, `timer` and `net` hold the place's
lock while they run, so none of them can kill a crawl's browser or reshape
its link. A refused lock is one line naming the holder's pid and command.

The kernel releases a flock when its holder dies, however it dies, so a
stale lock file is simply taken over. The place locks live outside the
place's run directory because `lab down` removes that directory: a lock file
removed under its holder would let a second process lock a new file of the
same name.
"""

from __future__ import annotations

import errno
import fcntl
import json
import os
import shlex
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import HarnessError
from harness.paths import RUN_ROOT

if TYPE_CHECKING:
    from harness.place import Place

#: Place locks, one file per place prefix (a lab and an Internet side of one prefix share namespaces).
LOCK_DIR = RUN_ROOT / "locks"


class Busy(HarnessError):
    """Another live process holds the lock."""


def command_line() -> str:
    """This process's command as a user typed it: `dnsstudy crawl ...`."""
    return shlex.join(["dnsstudy", *sys.argv[1:]])


class FileLock:
    """An exclusive, non-blocking flock on ``path``; the file says who holds it (pid, command, what it does)."""

    def __init__(self, path: Path, label: str, doing: str):
        self.path, self.label, self.doing = path, label, doing
        self.fd: int | None = None

    def acquire(self) -> None:
        """Take the lock now or raise Busy naming the holder."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # No O_TRUNC: the holder's record must survive a refused open. Not inherited by helpers we start.
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
                raise
            raise Busy(self._refusal()) from None
        record = json.dumps({"pid": os.getpid(), "command": command_line(), "doing": self.doing})
        try:
            os.ftruncate(fd, 0)
            os.pwrite(fd, record.encode(), 0)
        except OSError as exc:
            os.close(fd)  # the flock goes with it
            if exc.errno != errno.ENOSPC:
                raise
            raise HarnessError(f"disk full at {self.path}: free space and run the same command") from None
        self.fd = fd

    def release(self) -> None:
        """Give the lock up (the file stays: removing it would race with a process about to lock it)."""
        if self.fd is not None:
            os.ftruncate(self.fd, 0)
            os.close(self.fd)  # closing the last descriptor releases the flock
            self.fd = None

    def _refusal(self) -> str:
        """One line: who holds the lock, and what to do."""
        holder = _read_holder(self.path)
        if holder is None:
            return f"{self.label} is in use by another process; wait for it or stop it"
        return (
            f"{self.label} is being {holder.get('doing', 'used')} by pid {holder.get('pid', '?')} "
            f"({holder.get('command', '?')}); wait for it or stop it"
        )


def _read_holder(path: Path) -> dict | None:
    """The holder's record; it is written just after the lock is taken, so a fresh holder gets a moment."""
    for _ in range(25):
        try:
            return json.loads(path.read_text())
        except (OSError, ValueError):
            time.sleep(0.02)
    return None


@dataclass
class _Held:
    lock: FileLock
    count: int


#: Locks this process holds, by path: taking one again (the CLI, then the crawl it runs) is a no-op.
_held: dict[Path, _Held] = {}


def _forget_in_child() -> None:
    """A forked child (pyroute2's namespace workers, our own helpers) shares our lock: closing its copy
    keeps the lock ours alone, so the kernel frees it the moment we die, whatever the child does then."""
    for held in _held.values():
        if held.lock.fd is not None:
            os.close(held.lock.fd)  # the flock stays: our own descriptor still holds it
            held.lock.fd = None
    _held.clear()


os.register_at_fork(after_in_child=_forget_in_child)


@contextmanager
def holding(path: Path, label: str, doing: str) -> Iterator[None]:
    """Hold the lock at ``path`` for the block (re-entrant within this process)."""
    key = path.absolute()
    if key in _held:
        _held[key].count += 1
    else:
        lock = FileLock(key, label, doing)
        lock.acquire()
        _held[key] = _Held(lock, 1)
    try:
        yield
    finally:
        held = _held.get(key)
        if held is not None:  # None in a forked child unwinding this block: the lock was never its own
            held.count -= 1
            if held.count == 0:
                del _held[key]
                held.lock.release()


def store_lock(store: Path) -> Path:
    """The lock file of a store: beside it, so it moves with it."""
    return store.with_name(store.name + ".lock")


def place_lock(place: Place) -> Path:
    """The lock file of a place (by its prefix: one set of namespaces)."""
    return LOCK_DIR / f"{place.name}.lock"


@contextmanager
def using_place(place: Place, doing: str = "used") -> Iterator[None]:
    """Hold the place's lock for the block: refused while a crawl (or any other command) uses it."""
    with holding(place_lock(place), f"{place.kind} {place.name}", doing):
        yield


@contextmanager
def crawling(place: Place, store: Path) -> Iterator[None]:
    """Hold the store's lock and the place's, in that order, for a crawl."""
    with holding(store_lock(store), f"store {store}", "crawled"), using_place(place, "crawled"):
        yield
