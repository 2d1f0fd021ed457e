"""The deployment pages' commands: each is run by a test, or named here as not runnable here, with the reason.

docs/deploy.md and docs/distributed.md are followed by operators who have not read the code: every
command in their shell blocks must work as written. This fast test holds the pages to a catalogue:
each command line matches one entry, which names the test that runs it (that test must exist) or
says why it cannot run on this project's machines. A command added to a page without either fails
here. Every `dnsstudy` command in the blocks is also parsed by the CLI itself, so a misspelt option
or subcommand fails at once, image or lab or not.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import click
import pytest

from harness.cli import main
from tests.conftest import ROOT

PAGES = [ROOT / "docs" / "deploy.md", ROOT / "docs" / "distributed.md"]
COMPOSE_TEST = "tests/test_compose.py::test_compose_runs_a_small_lab_study_to_its_end_under_podman"
ONE_HOST_TEST = "tests/test_distributed.py::test_the_one_host_block_of_distributed_md_runs_as_written"
FIREFOX_IMAGE_TEST = "tests/test_image.py::test_the_firefox_image_visits_with_firefox_and_names_chromium_missing"
NO_DOCKER = "not here: no Docker engine on this project's machines (podman only); the podman line beside it runs"
#: (pattern matched at the start of a command line, the test that runs it or why it cannot run here)
CATALOGUE: list[tuple[str, str]] = [
    (r"bash docker/build\.sh$", COMPOSE_TEST + " (the session's image fixture, tests/test_image.py)"),
    (r"bash docker/build\.sh --browsers firefox$", FIREFOX_IMAGE_TEST + " (its fixture)"),
    (r"docker build ", NO_DOCKER),
    (r"docker compose ", NO_DOCKER),
    (r"bash docker/host-modules\.sh", "tests/test_deploy_docs.py::test_host_modules_runs_here"),
    (r"cd docker$", COMPOSE_TEST + " (every podman-compose.sh command runs in docker/)"),
    (r"bash podman-compose\.sh (up -d|ps|logs coordinator|stop|down)", COMPOSE_TEST),
    (r"CONTAINERS_CONF=containers\.conf podman run --rm .* export ", COMPOSE_TEST),
    (r"(CONTAINERS_CONF=containers\.conf )?podman (cp|exec|volume export) ", COMPOSE_TEST),
    (r"git pull && bash build\.sh", "not here: a pull needs the project's remote; build.sh as in the lines above"),
    (r"source \.venv/bin/activate$", ONE_HOST_TEST),
    (r"dnsstudy (lab up|broker up|worker|coordinate|broker down|lab down)", ONE_HOST_TEST),
    (r'export DNSSTUDY_BROKER="\$\(dnsstudy broker url\)"', ONE_HOST_TEST),
    (r"kill %1 %2 && wait$", ONE_HOST_TEST),
]


def command_lines(page: Path) -> list[str]:
    """The command lines of a page's `sh` blocks, without their comments."""
    blocks = re.findall(r"```sh\n(.*?)```", page.read_text(), re.S)
    lines = [line.split("  #")[0].split(" # ")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def entry_of(line: str) -> list[str]:
    return [where for pattern, where in CATALOGUE if re.match(pattern, line)]


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_command_is_run_by_a_test_or_named_as_not_runnable_here(page: Path) -> None:
    lines = command_lines(page)
    assert lines, f"{page.name} has no shell block"
    for line in lines:
        found = entry_of(line)
        assert len(found) == 1, f"{page.name}: `{line}` matches {len(found)} entries of the catalogue (one needed)"


def test_the_tests_the_catalogue_names_exist() -> None:
    for _pattern, where in CATALOGUE:
        if where.startswith("not here"):
            assert ": " in where, "a command not runnable here says why"
            continue
        path, name = where.split(" ")[0].split("::")
        assert f"def {name}(" in (ROOT / path).read_text(), where


def dnsstudy_invocations(line: str) -> list[list[str]]:
    """The argument lists of the `dnsstudy` commands a line runs (split at `&&`, `;` and `&`)."""
    tokens = shlex.split(line.replace("&&", " ; ").replace(" &", " ; "))
    segments: list[list[str]] = [[]]
    for token in tokens:
        if token == ";":
            segments.append([])
        else:
            segments[-1].append(token)
    return [segment[1:] for segment in segments if segment[:1] == ["dnsstudy"]]


def parse(args: list[str]) -> None:
    """Parse ``args`` as `dnsstudy ARGS` down to its last subcommand, without running it (the pages give no
    group an option of its own: a group's first argument is its subcommand)."""
    command: click.Command = main
    name = "dnsstudy"
    while isinstance(command, click.Group):
        assert args, f"`{name}` needs a subcommand"
        name, *args = args
        sub = command.get_command(click.Context(command), name)
        assert sub is not None, f"`{name}` is no subcommand of {command.name}"
        command = sub
    command.make_context(name, list(args), resilient_parsing=False)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.name)
def test_every_dnsstudy_command_of_the_pages_parses(page: Path) -> None:
    invocations = [args for line in command_lines(page) for args in dnsstudy_invocations(line)]
    if page.name == "distributed.md":
        assert len(invocations) >= 8
    for args in invocations:
        try:
            parse(args)
        except click.ClickException as exc:
            raise AssertionError(f"{page.name}: `dnsstudy {' '.join(args)}`: {exc.format_message()}") from exc


def test_a_misspelt_option_fails_the_parse() -> None:
    """The parse above is a check: an option the CLI does not have is refused."""
    with pytest.raises(click.ClickException, match="--prefx"):
        parse(["lab", "up", "--prefx", "vpa"])


def test_host_modules_runs_here() -> None:
    import subprocess

    done = subprocess.run(["bash", str(ROOT / "docker" / "host-modules.sh")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("host-modules: "), done.stdout
