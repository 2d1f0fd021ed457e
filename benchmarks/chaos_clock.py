"""A wall clock that steps, for the harness's processes only: libfaketime with an offset file changed at run time.

The host's clock is never touched (the machine is shared). The coordinator and the worker (and `dnsstudy broker
up`) run with libfaketime preloaded and read their offset from a file the chaos run rewrites: at a step,
each sees the wall clock jump within a second, as after a step of the host's clock: the times they
record, Celery's and kombu's clocks (the visibility timeout is kombu's, on the worker's side). CLOCK_MONOTONIC is left
alone (`FAKETIME_DONT_FAKE_MONOTONIC`), as a real step leaves it. Debian's libfaketime 0.9.10 then
refuses every absolute monotonic `clock_nanosleep` (EINVAL: Python's `time.sleep` fails), so a small
shim preloaded before it passes `clock_nanosleep` straight to the kernel. Only those Python processes
are stepped: the programs they start do not inherit the preload (a `sitecustomize` removes it from their
environment at start; Firefox hangs with libfaketime loaded), so Firefox, Stubby, unbound and the Go
helpers keep true time; so does redis-server (its allocator recurses into libfaketime at start).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1")

SHIM = r"""
#define _GNU_SOURCE
#include <errno.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
/* libfaketime 0.9.10 with FAKETIME_DONT_FAKE_MONOTONIC fails absolute monotonic sleeps with EINVAL. */
int clock_nanosleep(clockid_t clock, int flags, const struct timespec *req, struct timespec *rem) {
    return syscall(SYS_clock_nanosleep, clock, flags, req, rem) == 0 ? 0 : errno;
}
"""


# Imported by every Python process at start (its directory is put on PYTHONPATH): the process keeps the
# libfaketime it was started with, its children do not inherit it. Firefox hangs at start with libfaketime
# preloaded, even when FAKETIME_ONLY_CMDS skips it.
SITECUSTOMIZE = """import os
os.environ.pop("LD_PRELOAD", None)
"""


class SteppedClock:
    """The offset file and the environment that makes a process read it."""

    def __init__(self, directory: Path):
        if not LIBFAKETIME.exists():
            raise SystemExit(f"{LIBFAKETIME} missing: install the Debian package faketime (scripts/setup.sh)")
        directory.mkdir(parents=True, exist_ok=True)
        self.file, self.shim, self.offset = directory / "clock-offset", directory / "sleep-shim.so", 0
        source = directory / "sleep-shim.c"
        source.write_text(SHIM)
        subprocess.run(["cc", "-shared", "-fPIC", "-O2", "-o", str(self.shim), str(source)], check=True)
        self.site = directory / "site"
        self.site.mkdir(exist_ok=True)
        (self.site / "sitecustomize.py").write_text(SITECUSTOMIZE)
        self.set(0)
        for path in (directory, self.file, self.shim, self.site):  # the broker runs as the redis account
            os.chmod(path, 0o755)

    def set(self, offset: int) -> None:
        """Step every harness process's wall clock to true time + ``offset`` seconds."""
        part = self.file.with_suffix(".part")
        part.write_text(f"{offset:+d}\n")
        os.chmod(part, 0o644)
        part.rename(self.file)  # read whole or not at all
        self.offset = offset

    def environment(self, pythonpath: str) -> dict[str, str]:
        """What a Python process needs to run on this clock (and start its children on true time)."""
        return {
            "PYTHONPATH": f"{pythonpath}:{self.site}",
            "LD_PRELOAD": f"{self.shim} {LIBFAKETIME}",
            "FAKETIME_TIMESTAMP_FILE": str(self.file),
            "FAKETIME_CACHE_DURATION": "1",  # the file is read again at most once a second
            "FAKETIME_DONT_FAKE_MONOTONIC": "1",
            # Only Python (the sitecustomize above keeps it from children; this is the second belt).
            "FAKETIME_ONLY_CMDS": "python,python3,python3.11",
        }
