"""The repository keeps its promises: layout, CLI help, README and CI in step."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from harness.cli import main

ROOT = Path(__file__).resolve().parent.parent


def test_layout():
    for path in (
        "harness/lab",
        "timer",
        "tranco/paper-2019-sites.txt",
        "profiles",
        "analysis",
        "notebooks",
        "docker",
        "tests",
        "docs/architecture.md",
        "requirements.txt",
        "requirements-dev.txt",
        "pyproject.toml",
        "delayer/go.sum",
    ):
        assert (ROOT / path).exists(), path
    assert not (ROOT / "tranco" / "__init__.py").exists()  # data, not a package


@pytest.mark.parametrize("lock", ["requirements.txt", "requirements-dev.txt"])
def test_requirements_are_pinned(lock):
    for line in (ROOT / lock).read_text().splitlines():
        line = line.split("#")[0].strip()
        if line and line != "-r requirements.txt":  # the development half includes the run-time half
            assert re.fullmatch(r"[A-Za-z0-9_.\-\[\]]+==[0-9][\w.]*", line), line


def _commands(group, prefix=()):
    yield prefix
    for name, cmd in getattr(group, "commands", {}).items():
        yield from _commands(cmd, prefix + (name,))


@pytest.mark.parametrize("path", list(_commands(main)), ids=lambda p: " ".join(p) or "dnsstudy")
def test_every_subcommand_has_help(path):
    result = CliRunner().invoke(main, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage:" in result.output


def _quick_start():
    text = (ROOT / "README.md").read_text()
    block = re.search(r"## Quick start.*?```(?:sh|bash)?\n(.*?)```", text, re.S)
    assert block, "README has a Quick start code block"
    return [line.strip() for line in block.group(1).splitlines() if line.strip() and not line.strip().startswith("#")]


def test_readme_quick_start_has_exactly_two_commands():
    commands = _quick_start()
    assert len(commands) == 2
    assert all(c.startswith("bash scripts/setup.sh && ") for c in commands)


def test_ci_runs_the_readme_test_command_and_nothing_else():
    test_command = _quick_start()[1]
    ci = [
        line.strip()
        for line in (ROOT / ".ci" / "run").read_text().splitlines()
        if line.strip() and not line.startswith("#") and not line.startswith("set ") and not line.startswith("cd ")
    ]
    assert ci == [test_command]


def test_compact_addresses():
    from harness.cli.lab import compact_addresses

    assert compact_addresses(["198.18.1.100:443", "198.18.1.101:443", "198.18.1.102:443", "198.18.1.62:443"]) == (
        "198.18.1.100-102:443 198.18.1.62:443"
    )
    assert compact_addresses(["198.18.1.61:80", "198.18.1.61:443"]) == "198.18.1.61:80 198.18.1.61:443"
    assert compact_addresses([]) == ""


def test_capability_check_reads_capeff():
    from harness.errors import HarnessError, effective_capabilities, require_root

    assert effective_capabilities("Name:\tx\nCapEff:\t000001ffffffffff\n") == 0x1FFFFFFFFFF
    require_root("x", capabilities=(1 << 12) | (1 << 21))
    with pytest.raises(HarnessError, match="lacks CAP_SYS_ADMIN$|lacks CAP_SYS_ADMIN:"):
        require_root("lab up", capabilities=1 << 12)
    with pytest.raises(HarnessError, match="lacks CAP_NET_ADMIN and CAP_SYS_ADMIN"):
        require_root("lab up", capabilities=0)


def test_no_environment_or_build_output_can_be_tracked():
    """`.venv` and `build` are ignored as names, not only as directories (`.venv/`): a worktree's symlinks to them
    were committed once, and a merge then replaced the checkout's real environment and build outputs."""
    patterns = (ROOT / ".gitignore").read_text().split()
    assert ".venv" in patterns and "build" in patterns
    assert ".venv/" not in patterns and "build/" not in patterns
