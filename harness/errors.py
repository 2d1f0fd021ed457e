"""Errors a user can act on, printed as one line without a traceback."""

from __future__ import annotations

import shutil


class HarnessError(Exception):
    """A failure whose message alone tells the user what to fix."""


CAP_NET_ADMIN = 12
CAP_SYS_ADMIN = 21


def effective_capabilities(status: str | None = None) -> int:
    """The CapEff bit mask of this process (from /proc/self/status)."""
    if status is None:
        with open("/proc/self/status") as f:
            status = f.read()
    for line in status.splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def require_root(action: str, capabilities: int | None = None) -> None:
    """Refuse early when the process cannot manage network namespaces.

    Being uid 0 is not enough (a container may drop capabilities): creating
    namespaces needs CAP_SYS_ADMIN, configuring them CAP_NET_ADMIN.
    """
    caps = effective_capabilities() if capabilities is None else capabilities
    missing = [
        name
        for name, bit in (("CAP_NET_ADMIN", CAP_NET_ADMIN), ("CAP_SYS_ADMIN", CAP_SYS_ADMIN))
        if not caps & (1 << bit)
    ]
    if not missing:
        return
    raise HarnessError(
        f"{action} needs root with CAP_NET_ADMIN and CAP_SYS_ADMIN (to create network namespaces); "
        f"this process lacks {' and '.join(missing)}: run it as root (e.g. with sudo)"
    )


def require_program(program: str, package: str) -> str:
    """Return the path of ``program`` or say which Debian package provides it."""
    path = shutil.which(program)
    if path is None:
        raise HarnessError(
            f"program '{program}' not found: install the Debian package '{package}' "
            "(scripts/setup.sh installs everything)"
        )
    return path
