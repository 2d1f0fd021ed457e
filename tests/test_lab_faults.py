"""Faults and bad input: crashes, a second lab, collisions, no root, missing programs."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

from harness.lab.lab import Lab
from tests.helpers import DNSSTUDY, ROOT, in_ns, live_processes_mentioning, mounts_mentioning, namespace_exists

pytestmark = pytest.mark.lab


def _cli(*args: str, env: dict | None = None, no_caps: bool = False) -> subprocess.CompletedProcess[str]:
    argv = [*DNSSTUDY, *args]
    if no_caps:
        # uid 0 without capabilities: what an unprivileged user or a locked-down container has
        argv = ["setpriv", "--inh-caps=-all", "--ambient-caps=-all", "--bounding-set=-all", "--", *argv]
    return subprocess.run(
        argv,
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def _names(the_lab: Lab) -> tuple[str, ...]:
    """--prefix and --subnet of a private lab, for the CLI."""
    return ("--prefix", the_lab.config.prefix, "--subnet", the_lab.config.settings.subnet)


def _assert_nothing_left(the_lab: Lab) -> None:
    for name in the_lab.config.namespaces.values():
        assert not namespace_exists(name), name
        assert not Path("/etc/netns", name).exists(), name
        assert not mounts_mentioning(f"/run/netns/{name}"), name
    assert not the_lab.run_dir.exists()
    assert not live_processes_mentioning(str(the_lab.run_dir)), "daemons left running"


def test_down_after_every_daemon_crashed_removes_everything(lab, private_lab):
    """A second lab beside the session's lab; its daemons are SIGKILLed, then `lab down`."""
    crashed = private_lab()
    assert crashed.status().healthy and lab.status().healthy  # two labs side by side
    # the second lab answers in its own namespace with its own addresses
    plan = crashed.config.addresses
    out = in_ns(crashed.config.namespaces["client"], "dig", "+short", f"@{plan.resolver(0)}", "www.lab.test")
    assert out.stdout.strip() == plan.web(1)[0]
    # a stray process started inside a lab namespace, not recorded anywhere
    stray = subprocess.Popen(
        ["ip", "netns", "exec", crashed.config.namespaces["client"], "sleep", "300"], start_new_session=True
    )
    for d in crashed.status().daemons:
        os.kill(d["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 5
    while (
        time.monotonic() < deadline
        and crashed.status().daemons
        and not all(not d["alive"] for d in crashed.status().daemons)
    ):
        time.sleep(0.05)  # SIGKILL is delivered asynchronously
    status = crashed.status()
    assert not status.healthy and len(status.dead) == len(status.daemons)
    shown = _cli("lab", "status", "--json", *_names(crashed))
    assert shown.returncode == 1 and set(json.loads(shown.stdout)["dead"]) == {d["name"] for d in status.daemons}
    crashed.down()
    stray.wait(timeout=5)
    _assert_nothing_left(crashed)
    assert lab.status().healthy  # the other lab did not notice


def test_down_twice_and_down_of_a_lab_never_up(private_lab):
    never = private_lab(up=False)
    assert never.down() == []
    assert never.down() == []


def test_subnet_colliding_with_a_host_address_is_refused(private_lab, lab_config):
    # 127.0.0.0/8 is on the host's loopback interface
    named = private_lab(up=False)
    result = _cli("lab", "up", "--prefix", named.config.prefix, "--subnet", "127.0.8.0/23")
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "collides with 127.0.0.0/8 on host interface lo" in lines[0], result.stderr
    _assert_nothing_left(Lab(lab_config.with_overrides(prefix=named.config.prefix, subnet="127.0.8.0/23")))


@pytest.mark.parametrize("command", [("lab", "up"), ("lab", "down"), ("demo",)])
def test_without_capabilities_one_line_says_what_is_needed(command):
    result = _cli(*command, "--prefix", "dsuser", no_caps=True)
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "needs root with CAP_NET_ADMIN and CAP_SYS_ADMIN" in lines[0], result.stderr


def test_missing_program_names_its_package(tmp_path):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("ip", "nginx", "iptables"):  # everything but unbound
        (bin_dir / program).symlink_to(shutil.which(program))
    result = _cli("lab", "up", "--prefix", "dsmiss", env={"PATH": str(bin_dir)})
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "'unbound' not found" in lines[0] and "package 'unbound'" in lines[0]


def test_broken_profile_is_one_line(tmp_path):
    profile = tmp_path / "lab.toml"
    profile.write_text((ROOT / "profiles/lab/default.toml").read_text().replace('prefix = "dsl"', 'prefx = "dsl"'))
    result = _cli("lab", "status", "--profile", str(profile))
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and f"{profile}:" in lines[0] and "prefx: unknown key" in lines[0]


def test_up_failing_half_way_removes_what_it_made(tmp_path, private_lab):
    """nginx that dies at start (fault injected through PATH): up fails, names it, leaves nothing."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for program in ("ip", "unbound", "iptables"):
        (bin_dir / program).symlink_to(shutil.which(program))
    broken = bin_dir / "nginx"
    broken.write_text("#!/bin/sh\necho 'nginx: [emerg] injected failure' >&2\nexit 1\n")
    broken.chmod(0o755)
    half = private_lab(up=False)
    result = _cli("lab", "up", *_names(half), env={"PATH": f"{bin_dir}:/usr/sbin:/usr/bin:/sbin:/bin"})
    assert result.returncode == 2, result.stdout + result.stderr
    lines = result.stderr.strip().splitlines()
    assert (
        len(lines) == 1 and "lab did not come up" in lines[0] and "nginx" in lines[0] and "injected failure" in lines[0]
    )
    _assert_nothing_left(half)
