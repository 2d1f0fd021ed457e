"""The store's one way to write (`Transaction`: all of it or none of it), and telling a full disk from other failures.

Every write to a store goes through a `Transaction`: BEGIN IMMEDIATE takes
the write lock at once (no reader-turned-writer deadlock), COMMIT makes it
durable (the connection runs `synchronous=FULL`), and any exception,
including a commit a full disk failed, rolls all of it back, so the store
is exactly as it was before.
"""

from __future__ import annotations

import errno
import shutil
import sqlite3
from pathlib import Path
from types import TracebackType

#: SQLite's primary result code for "database or disk is full".
SQLITE_FULL = 13
#: Below this much free space an SQLite I/O error is taken for a full disk (its errno is not reported).
NEARLY_FULL_BYTES = 1 << 20


class Transaction:
    """BEGIN IMMEDIATE ... COMMIT, or ROLLBACK on any exception (which then goes on)."""

    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None) -> None:
        if kind is None:
            try:
                self.db.execute("COMMIT")  # a full disk can fail the commit itself
            except BaseException:
                self._roll_back()
                raise
        else:
            self._roll_back()

    def _roll_back(self) -> None:
        """Undo the transaction if it is still open (SQLite rolls back by itself after some errors, a full
        disk among them); a failing ROLLBACK must not hide the error that caused it."""
        if self.db.in_transaction:
            try:
                self.db.execute("ROLLBACK")
            except sqlite3.Error:
                pass


def disk_full(exc: BaseException, path: Path) -> bool:
    """Whether ``exc`` says the file system holding ``path`` is full (ENOSPC, EDQUOT, or SQLite's full disk)."""
    if isinstance(exc, OSError):
        return exc.errno in (errno.ENOSPC, errno.EDQUOT)
    if not isinstance(exc, sqlite3.Error):
        return False
    code = (getattr(exc, "sqlite_errorcode", None) or 0) & 0xFF
    if code == SQLITE_FULL:
        return True
    # SQLite reports a failed write or fsync as an I/O error without its errno: ask the file system.
    if code == sqlite3.SQLITE_IOERR:
        try:
            return shutil.disk_usage(path.parent).free < NEARLY_FULL_BYTES
        except OSError:
            return False
    return False
