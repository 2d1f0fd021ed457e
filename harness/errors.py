"""Errors a user can act on, printed as one line without a traceback."""

from __future__ import annotations

import os
import shutil


class HarnessError(Exception):
    """A failure whose message alone tells the user what to fix."""


def require_root(action: str) -> None:
    """Refuse early when the process cannot manage network namespaces."""
    if os.geteuid() == 0:
        return
    raise HarnessError(
        f"{action} needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN to create network "
        "namespaces): run it with sudo"
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
