"""Shared fixtures. Integration tests (marker `lab`) run real daemons in real namespaces.

Every lab a test starts comes from here: the session's shared lab (`lab`)
and private labs (`private_lab`), each with a prefix and a /23 handed out
by `LabAddresses`, so no test picks its own subnet and every lab is brought
down when its test ends. `DNSSTUDY_TEST_PREFIX` and `DNSSTUDY_TEST_POOL`
move all of them, so two test runs (or a developer's default lab, prefix
"dsl" on 198.18.0.0/23) never meet.
"""

from __future__ import annotations

import ipaddress
import os
import signal
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from harness.lab.config import LabConfig, load_lab_config
from harness.lab.lab import UP_WAIT

ROOT = Path(__file__).resolve().parent.parent

TEST_PREFIX = os.environ.get("DNSSTUDY_TEST_PREFIX", "dstest")
#: /23s for test labs: the first is the session lab's, the rest go to private labs in turn.
TEST_POOL = ipaddress.ip_network(os.environ.get("DNSSTUDY_TEST_POOL", "198.18.32.0/19"))
TEST_SUBNET = str(next(TEST_POOL.subnets(new_prefix=23)))
#: How long a test lab may take to listen: the lab's own wait (nginx took 23 s on a loaded 2-core machine).
LAB_UP_WAIT = UP_WAIT


class LabAddresses:
    """Hands out a fresh (prefix, /23) for each private lab of the session."""

    def __init__(self, base: str, pool: ipaddress.IPv4Network | ipaddress.IPv6Network):
        self.base = base[:8]  # room for a three-digit counter within the 12-character limit
        self.subnets = list(pool.subnets(new_prefix=23))[1:]  # the first is the session lab's
        self.count = 0

    def next(self) -> tuple[str, str]:
        """A new prefix, and the pool's /23s in turn: a test's labs are down when it ends, so after the last
        /23 the first is free again (a test needs fewer labs at once than the pool has)."""
        if not self.subnets:
            raise RuntimeError(f"DNSSTUDY_TEST_POOL {TEST_POOL} has no /23 for a private lab")
        subnet = self.subnets[self.count % len(self.subnets)]
        self.count += 1
        return f"{self.base}p{self.count}", str(subnet)


_ADDRESSES = LabAddresses(TEST_PREFIX, TEST_POOL)


_PYTEST_PID = os.getpid()


def _interrupted(signum: int, frame: object) -> None:
    if os.getpid() != _PYTEST_PID:  # a forked helper (pyroute2's namespace workers): die as it would have
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)
        os._exit(128 + signum)  # only if the signal was blocked here
    signal.signal(signum, signal.SIG_IGN)  # a second one must not cut the teardown short
    raise KeyboardInterrupt(f"signal {signum}")


def pytest_configure(config: pytest.Config) -> None:
    """A SIGTERM (a CI job cancelled, `timeout`) ends the run as Ctrl-C does: pytest then still tears down
    every fixture, so the labs and their daemons go down. Only in pytest's own process: a forked copy that
    unwound pytest's stack would tear the fixtures down a second time."""
    signal.signal(signal.SIGTERM, _interrupted)


@pytest.fixture(autouse=True)
def _lab_tests_need_root(request):
    """Lab tests fail, never skip, without root: a skipped test proves nothing.

    Developers without root deselect them with `-m "not lab"`.
    """
    if "lab" in request.keywords and os.geteuid() != 0:
        pytest.fail("lab integration tests need root (real namespaces); run as root or use -m 'not lab'")


@pytest.fixture(scope="session")
def lab_config() -> LabConfig:
    return load_lab_config().with_overrides(prefix=TEST_PREFIX, subnet=TEST_SUBNET)


@pytest.fixture(scope="session")
def lab(lab_config):
    """A running lab for the whole session, always brought down at the end."""
    from harness.lab.lab import Lab

    the_lab = Lab(lab_config)
    the_lab.down()  # leftovers of an interrupted earlier run
    the_lab.up(wait=LAB_UP_WAIT)
    yield the_lab
    the_lab.down()


@pytest.fixture
def private_lab(lab_config) -> Iterator[Callable[..., object]]:
    """A factory of labs of the test's own: `private_lab(up=True)` returns a `Lab` with a fresh prefix and /23.

    With `up=False` the lab is only named (for tests that bring it up through the CLI,
    or test what happens to a lab that never came up). Every lab handed out is
    brought down when the test ends, whatever state it is in.
    """
    from harness.lab.lab import Lab

    made: list[Lab] = []

    def make(up: bool = True, config: LabConfig | None = None) -> Lab:
        prefix, subnet = _ADDRESSES.next()
        the_lab = Lab((config or lab_config).with_overrides(prefix=prefix, subnet=subnet))
        made.append(the_lab)
        the_lab.down()  # leftovers of an interrupted earlier run
        if up:
            the_lab.up(wait=LAB_UP_WAIT)
        return the_lab

    yield make
    for the_lab in made:
        the_lab.down()


@contextmanager
def replaying_lab(lab_config: LabConfig, archive: Path) -> Iterator[object]:
    """A lab of its own (the next prefix and /23) serving a replay archive, brought down when the block ends;
    for module-scoped fixtures (tests/test_replay_lab.py, tests/test_har_replay_lab.py)."""
    from harness.lab.lab import Lab

    prefix, subnet = _ADDRESSES.next()
    the_lab = Lab(lab_config.with_overrides(prefix=prefix, subnet=subnet, web_archive=str(archive)))
    the_lab.down()
    try:
        the_lab.up()
        yield the_lab
    finally:
        the_lab.down()


@contextmanager
def own_lab(config: LabConfig) -> Iterator[object]:
    """A lab of ``config`` on its own prefix and /23 (the next of the pool), brought down when the block ends;
    for module-scoped fixtures of labs with another profile (tests/test_h3_lab.py)."""
    from harness.lab.lab import Lab

    prefix, subnet = _ADDRESSES.next()
    the_lab = Lab(config.with_overrides(prefix=prefix, subnet=subnet))
    the_lab.down()
    try:
        the_lab.up(wait=LAB_UP_WAIT)
        yield the_lab
    finally:
        the_lab.down()
