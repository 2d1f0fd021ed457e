"""Where the project's files live: the checkout, its build outputs, run-time state."""

from __future__ import annotations

import os
from pathlib import Path

#: The checkout (profiles/, tranco/, build/ live here). Overridable for installs
#: outside a checkout.
PROJECT_ROOT = Path(os.environ.get("DNSSTUDY_ROOT", Path(__file__).resolve().parent.parent))

#: Programs built by scripts/setup.sh (the NFQUEUE delayer, geckodriver, the timer).
BUILD_BIN = PROJECT_ROOT / "build" / "bin"

#: Debian's Firefox ESR, by absolute path (never looked up on PATH).
FIREFOX = "/usr/lib/firefox-esr/firefox-esr"

#: Run-time state of labs: one directory per lab prefix, on tmpfs so a reboot clears it.
RUN_ROOT = Path(os.environ.get("DNSSTUDY_RUN", "/run/dnsstudy"))


def built_program(name: str) -> str:
    """A program scripts/setup.sh builds into build/bin, by absolute path; a one-line error if it is missing."""
    from harness.errors import HarnessError

    path = BUILD_BIN / name
    if not path.exists():
        raise HarnessError(f"{path} is missing: run 'bash scripts/setup.sh' (it builds {name})")
    return str(path)


def project_path(value: str | Path) -> Path:
    """Resolve a path from a profile: absolute as is, else relative to the checkout."""
    path = Path(value)
    return path if path.is_absolute() else PROJECT_ROOT / path
