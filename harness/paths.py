"""Where the project's files live: the checkout, its build outputs, run-time state."""

from __future__ import annotations

import os
from pathlib import Path


def is_checkout(path: Path) -> bool:
    """Whether ``path`` is a dnsstudy checkout: its profiles and its pyproject.toml."""
    return (path / "profiles").is_dir() and (path / "pyproject.toml").is_file()


def project_root(named: str | None, package_parent: Path, cwd: Path) -> Path:
    """The checkout: ``named`` ($DNSSTUDY_ROOT); else the one the package lies in (run from it, or installed
    with `pip install -e`); else, for a copy `pip install .` put elsewhere, the checkout the command is run in;
    else the package's parent, and `checkout_hint` says what is wrong."""
    if named:
        return Path(named)
    if is_checkout(package_parent):
        return package_parent
    return cwd if is_checkout(cwd) else package_parent


#: The checkout (profiles/, tranco/, build/ live here).
PROJECT_ROOT = project_root(os.environ.get("DNSSTUDY_ROOT"), Path(__file__).resolve().parent.parent, Path.cwd())

#: Programs built by scripts/setup.sh (the NFQUEUE delayer, geckodriver, the timer).
BUILD_BIN = PROJECT_ROOT / "build" / "bin"

#: Debian's Firefox ESR, by absolute path (never looked up on PATH).
FIREFOX = "/usr/lib/firefox-esr/firefox-esr"

#: Run-time state of labs: one directory per lab prefix, on tmpfs so a reboot clears it.
RUN_ROOT = Path(os.environ.get("DNSSTUDY_RUN", "/run/dnsstudy"))


def checkout_hint() -> str:
    """'' where PROJECT_ROOT is a checkout; else what to do, for the end of an error about a missing profile."""
    if is_checkout(PROJECT_ROOT):
        return ""
    return f" ({PROJECT_ROOT} is no dnsstudy checkout: run dnsstudy in its checkout, or set DNSSTUDY_ROOT to it)"


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
