"""Files written durably: a crash or a power cut leaves either the whole file under its name or none."""

from __future__ import annotations

import os
from pathlib import Path


def write_durably(data: bytes, path: Path, sync_directory: bool = True) -> None:
    """Write ``data`` to ``path`` through a fsynced .part, renamed, the directory fsynced.

    ``sync_directory`` False: the caller fsyncs the directory once after several files, before relying on them.
    """
    tmp = path.with_name(path.name + ".part")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            os.fsync(fd)  # the data, before the name: a rename of an unsynced file can leave an empty HAR
        finally:
            os.close(fd)
        tmp.replace(path)
    except OSError as exc:
        tmp.unlink(missing_ok=True)
        if exc.filename is None:  # os.write and os.fsync do not say which file; a "disk full at" message must
            raise OSError(exc.errno, exc.strerror, str(tmp)) from exc
        raise
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    if sync_directory:
        fsync_directory(path.parent)  # the rename itself


def fsync_directory(path: Path) -> None:
    """Make the directory's entries (a rename, a new file) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
