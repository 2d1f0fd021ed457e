"""Who failed: each lab fault under each encrypted arm gives its counted class and cause; our own faults never do.

Real visits in the session lab with `dnsstudy lab fault` applied to the near
resolver (docs/visit.md has the decision table, docs/lab.md the faults).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from harness.lab import faults
from harness.visit import Visitor

pytestmark = pytest.mark.lab

URL = "https://www.lab.test/"


@pytest.fixture(scope="module")
def visitor(lab, tmp_path_factory):
    # 12 s is enough for every cause to show (Stubby gives up within 10 s); a dropped DoH
    # connection would otherwise hold the page for Firefox's 30 s TRR-only timeout.
    return Visitor(lab, tmp_path_factory.mktemp("results"), timeout=12.0, margin=10.0)


@pytest.fixture(scope="module")
def dnsproxy_visitor(lab, tmp_path_factory):
    """DoT through dnsproxy instead of Stubby (the study's `[arms] stubs = {dot = "dnsproxy"}`)."""
    return Visitor(lab, tmp_path_factory.mktemp("results"), timeout=12.0, margin=10.0, stubs={"dot": "dnsproxy"})


@pytest.fixture
def fault(lab):
    """Apply a fault to the near resolver; every fault is cleared when the test ends."""

    def apply(name: str) -> None:
        faults.apply(lab, faults.parse_fault(name, "near"))

    yield apply
    faults.clear(lab)
    assert lab.status().healthy


CASES = [
    ("drop:dot", "dot", "dot:connect-timeout"),
    ("reject:dot", "dot", "dot:reset"),
    ("silent:dot", "dot", "dot:timeout"),
    ("untrusted-cert", "dot", "dot:tls-auth"),
    ("wrong-name", "dot", "dot:tls-auth"),
    ("drop:doh", "doh", "doh:connect-timeout"),
    ("reject:doh", "doh", "doh:reset"),
    ("silent:doh", "doh", "doh:timeout"),
    ("untrusted-cert", "doh", "doh:tls-auth"),
    ("wrong-name", "doh", "doh:tls-auth"),
    # QUIC: a dropped handshake is a connect timeout, a rejected one an ICMP port unreachable
    ("drop:doq", "doq", "doq:connect-timeout"),
    ("reject:doq", "doq", "doq:unreachable"),
    ("untrusted-cert", "doq", "doq:tls-auth"),
    ("wrong-name", "doq", "doq:tls-auth"),
    ("drop:doh3", "doh3", "doh3:connect-timeout"),
    ("reject:doh3", "doh3", "doh3:unreachable"),
    ("untrusted-cert", "doh3", "doh3:tls-auth"),
    ("wrong-name", "doh3", "doh3:tls-auth"),
]
DNSPROXY_DOT = [
    ("drop:dot", "dot:connect-timeout"),
    ("reject:dot", "dot:reset"),
    ("silent:dot", "dot:timeout"),
    ("untrusted-cert", "dot:tls-auth"),
    ("wrong-name", "dot:tls-auth"),
]


@pytest.mark.parametrize("name, protocol, detail", CASES)
def test_each_fault_is_the_protocols_counted_failure_with_its_cause(visitor, fault, name, protocol, detail):
    fault(name)
    result = visitor.visit_once(URL, protocol, "near")
    assert (result.error_class, result.detail) == ("DNS Error", detail), (result.signal, result.proof)
    assert result.counted
    # The proof still shows the arm's transport and no other: the failure is the protocol's alone.
    assert not result.proof["other_transport"]
    assert result.proof["client_packets"][f"{protocol}_connections"] > 0


@pytest.mark.parametrize("name, detail", DNSPROXY_DOT)
def test_the_dnsproxy_dot_stub_fails_the_same_way_under_each_fault(dnsproxy_visitor, fault, name, detail):
    fault(name)
    result = dnsproxy_visitor.visit_once(URL, "dot", "near")
    assert (result.error_class, result.detail) == ("DNS Error", detail), (result.signal, result.proof)
    assert result.arm["stub"] == "dnsproxy"


def test_a_fault_that_hits_another_transport_leaves_the_visit_alone(visitor, fault):
    fault("drop:dot")
    result = visitor.visit_once(URL, "doh", "near")
    assert result.error_class == "Successful", result.detail


def test_cleared_faults_leave_a_working_resolver(lab, visitor, fault):
    fault("wrong-name")
    fault("reject:dot")
    assert {f.name for f in faults.applied(lab)} == {"wrong-name", "reject:dot"}
    faults.clear(lab)
    assert faults.applied(lab) == []
    result = visitor.visit_once(URL, "dot", "near")
    assert result.error_class == "Successful", result.detail


def test_a_dead_stub_is_our_failure_even_while_the_path_is_blocked(lab, visitor, fault):
    """Stubby killed before the browser starts: an Infrastructure Failure, not the blocked transport's."""
    fault("drop:dot")
    arm = visitor.arm("dot", "near")
    arm.start()
    try:
        assert arm.stub is not None
        os.kill(arm.stub.pid, signal.SIGKILL)
        result = visitor.visit(URL, arm)
    finally:
        arm.stop()
        visitor.client.restore_system_resolver()
    assert result.error_class == "Infrastructure Failure" and not result.counted
    assert result.detail.startswith("arm: ")


def test_a_dead_lab_resolver_is_our_failure_not_the_protocols(private_lab, tmp_path):
    """The resolver's unbound dies during the visit: the place's fault, never a DNS Error."""
    broken = private_lab()
    quick = Visitor(broken, tmp_path, timeout=8.0, margin=10.0)
    name = "resolver-near"
    pid = next(d["pid"] for d in broken.status().daemons if d["name"] == name)
    arm = quick.arm("do53", "near")
    arm.start()
    try:
        os.kill(pid, signal.SIGKILL)
        result = quick.visit(URL, arm)
    finally:
        arm.stop()
        quick.client.restore_system_resolver()
    assert result.error_class == "Infrastructure Failure", result.detail
    assert result.detail == f"place: {name} not running"


def test_fault_command_applies_lists_and_clears(lab):
    args = ["--prefix", lab.config.prefix, "--subnet", lab.config.settings.subnet]
    dnsstudy = str(Path(sys.executable).with_name("dnsstudy"))  # the installed command, as a user runs it

    def run(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([dnsstudy, "lab", "fault", *argv, *args], capture_output=True, text=True, timeout=60)

    applied = run("apply", "reject:doh", "--resolver", "near")
    try:
        assert applied.returncode == 0, applied.stderr
        listed = run("list")
        assert "applied: reject:doh at resolver near, applied by hand" in listed.stdout
        unknown = run("apply", "melt:dot")
        assert unknown.returncode == 2 and "unknown lab fault 'melt:dot' (have: drop:dot" in unknown.stderr
        assert len(unknown.stderr.strip().splitlines()) == 1
    finally:
        cleared = run("clear")
    assert cleared.returncode == 0 and "reject:doh@near" in cleared.stdout
    assert faults.applied(lab) == []
