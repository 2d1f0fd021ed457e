"""Shared fixtures. Integration tests (marker `lab`) run real daemons in real namespaces."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness.lab.config import load_lab_config

ROOT = Path(__file__).resolve().parent.parent

# Test labs use their own prefixes and subnets so they never touch a
# developer's running default lab (prefix "dsl", 198.18.0.0/23).
TEST_PREFIX = "dstest"
TEST_SUBNET = "198.18.4.0/23"


@pytest.fixture(autouse=True)
def _lab_tests_need_root(request):
    """Lab tests fail, never skip, without root: a skipped test proves nothing.

    Developers without root deselect them with `-m "not lab"`.
    """
    if "lab" in request.keywords and os.geteuid() != 0:
        pytest.fail("lab integration tests need root (real namespaces); run as root or use -m 'not lab'")


@pytest.fixture(scope="session")
def lab_config():
    return load_lab_config().with_overrides(prefix=TEST_PREFIX, subnet=TEST_SUBNET)


@pytest.fixture(scope="session")
def lab(lab_config):
    """A running lab for the whole session, always brought down at the end."""
    from harness.lab.lab import Lab

    the_lab = Lab(lab_config)
    the_lab.down()  # leftovers of an interrupted earlier run
    the_lab.up()
    yield the_lab
    the_lab.down()
