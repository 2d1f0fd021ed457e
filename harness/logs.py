"""Size-bounded daemon logs: the lab's and the stubs' logs live in /run (RAM) and grow with every query.

unbound logs every query and reply (tests read them to see which names reached the lab), nginx every
request, Stubby at `-v 4` every connection. Over a week that fills /run. The crawl calls `bound_logs`
between visits: a log over the limit is copied to `<name>.1` (replacing the last copy) and truncated in
place. Every writer opens its log with O_APPEND (daemons.py; nginx opens its own logs so), so after the
truncation the next write lands at offset 0, not past a hole. The stub arms read a log from the size it
had when the visit began (`begin_visit`), so a truncation between visits never hides a marker.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

# Per log: at most this much in place plus this much in its `.1` copy.
DEFAULT_LIMIT = 4 * 1024 * 1024


def bound_logs(directory: Path, limit: int = DEFAULT_LIMIT) -> list[Path]:
    """Copy-truncate every `*.log` in directory larger than limit bytes; the logs rotated."""
    rotated: list[Path] = []
    if not directory.is_dir():
        return rotated
    for log in sorted(directory.glob("*.log")):
        try:
            if log.stat().st_size <= limit:
                continue
            shutil.copyfile(log, log.with_name(log.name + ".1"))
            os.truncate(log, 0)
        except FileNotFoundError:  # a stub's log removed under us: nothing to bound
            continue
        rotated.append(log)
    return rotated


def used_bytes(directory: Path) -> int:
    """Bytes the files under directory take (what `du` counts, in 512-byte blocks)."""
    total = 0
    for root, _dirs, files in os.walk(directory):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                continue
    return total
