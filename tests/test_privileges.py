"""Least privilege, checked on the running processes: who each helper runs as, with which capabilities.

Root keeps namespaces, nftables and tc; everything that touches the network
or parses what comes from it runs as an account of its own, with no new
privileges and only the capability it needs (docs/security.md).
"""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from harness import netns
from harness.accounts import BIND_LOW_PORT, HELPER_USER, Account, helper
from harness.arms.dot import DotArm
from harness.browser.account import BrowserAccount
from harness.browser.firefox import Firefox
from harness.browser.session import FirefoxSession
from harness.capture import capture
from harness.lab.checks import account
from harness.shaping.link_profile import load_link_profile
from harness.shaping.shaper import Shaper
from harness.timer import TimerSettings, start_timer
from harness.visit import Visitor
from tests.helpers import wait_for

CAP_BITS = {"net_bind_service": 10, "net_admin": 12}


def credentials(pid: int) -> dict[str, int]:
    """uid, NoNewPrivs and the effective and bounding capability sets of a process."""
    fields = dict(
        line.split(":\t", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":\t" in line
    )
    return {
        "uid": int(fields["Uid"].split()[1]),  # effective
        "no_new_privs": int(fields["NoNewPrivs"]),
        "cap_eff": int(fields["CapEff"], 16),
        "cap_bnd": int(fields["CapBnd"], 16),
    }


def assert_confined(pid: int, account: Account, keep: tuple[str, ...] = ()) -> None:
    creds = credentials(pid)
    allowed = sum(1 << CAP_BITS[c] for c in keep)
    assert creds["uid"] == account.uid, (pid, creds)
    assert creds["no_new_privs"] == 1, (pid, creds)
    assert creds["cap_eff"] & ~allowed == 0 and creds["cap_bnd"] & ~allowed == 0, (pid, hex(creds["cap_eff"]))


def pids_named(namespace: str, program: str) -> list[int]:
    found = []
    for pid in netns.pids_in(namespace):
        try:
            if Path(f"/proc/{pid}/comm").read_text().strip() == program[:15]:
                found.append(pid)
        except OSError:
            pass
    return found


@pytest.mark.lab
def test_lab_helpers_run_as_the_helper_account_without_privileges(lab):
    """dnsproxy and the upstream delayer, started by `lab up`; the tarpit drops root once its ports are bound."""
    account = helper()
    server = lab.config.namespaces["server"]
    for program, keep in (("dnsproxy", ()), ("nfqdelay", ("net_admin",)), ("python", ())):
        pids = pids_named(server, program)
        assert pids, f"no {program} in {server}"
        for pid in pids:
            assert_confined(pid, account, keep)
    # unbound and nginx drop to their own accounts themselves
    for program in ("unbound", "nginx"):
        assert all(credentials(pid)["uid"] != 0 for pid in pids_named(server, program) if _is_worker(pid, program))


def _is_worker(pid: int, program: str) -> bool:
    """nginx's master keeps root to bind 443 and owns no connection; its workers and unbound never keep it."""
    return program == "unbound" or "worker" in Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")


@pytest.mark.lab
def test_stub_timer_delayer_and_capture_run_unprivileged(lab, tmp_path):
    account = helper()
    client = lab.client_side()
    arm = Visitor(lab, tmp_path).arm("dot", "near", persistent=True)
    assert isinstance(arm, DotArm)
    arm.start()
    try:
        assert arm.stub is not None
        assert_confined(arm.stub.pid, account, (BIND_LOW_PORT,))
    finally:
        arm.stop()
        client.restore_system_resolver()

    proc = start_timer(client, "dot", lab.resolver("near"), TimerSettings(), duration_s=5)
    try:
        # the timer's command drops root as it execs (the same pid): waited for, as the uid shows it
        wait_for(lambda: credentials(proc.pid)["uid"] == account.uid, 10, "the timer to run as its account")
        assert_confined(proc.pid, account)
    finally:
        proc.communicate("www.lab.test\n", timeout=20)

    shaper = Shaper(lab, backend="userspace")
    shaper.apply(load_link_profile("4g"))
    try:
        delayers = shaper.daemons()
        assert delayers
        for daemon in delayers:
            assert_confined(daemon.pid, account, ("net_admin",))
    finally:
        shaper.clear()

    with capture(client.namespace, tmp_path / "x.pcap", ["udp", "port", "53"]):
        dumps = pids_named(client.namespace, "tcpdump")
        assert dumps
        for pid in dumps:
            assert credentials(pid)["uid"] == account.uid  # tcpdump -Z: root only opens the capture socket


@pytest.mark.parametrize("name", ["LD_PRELOAD", "HOME", "PATH"])
def test_only_firefox_s_own_variables_may_be_added_to_the_browser_s_environment(name):
    # They would reach `ip netns exec` and setpriv, which run as root, before privileges drop.
    account = BrowserAccount("nobody", 65534, 65534, Path("/nonexistent"))
    with pytest.raises(ValueError, match=name):
        FirefoxSession(account, Path("/nonexistent"), None, Path("/tmp"), environment={name: "x"})
    assert FirefoxSession(account, Path("/nonexistent"), None, Path("/tmp"), environment={"MOZ_LOG": "x"})


@pytest.mark.lab
def test_the_browser_runs_unprivileged_and_cannot_touch_the_template(lab, tmp_path):
    browser = BrowserAccount.lookup()
    visitor = Visitor(lab, tmp_path, timeout=30.0)
    seen: dict[int, dict[str, int]] = {}
    stop = threading.Event()

    def watch() -> None:
        while not stop.is_set():
            for program in ("firefox-esr", "geckodriver"):
                for pid in pids_named(visitor.client.namespace, program):
                    try:
                        seen[pid] = credentials(pid)
                    except OSError:
                        pass
            time.sleep(0.05)

    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()
    try:
        result = visitor.visit_once("https://www.lab.test/", "do53", "near")
    finally:
        stop.set()
        watcher.join()
    assert result.error_class == "Successful", result.detail
    assert seen, "no browser process was seen"
    assert all(c["uid"] == browser.uid and c["no_new_privs"] == 1 and c["cap_eff"] == 0 for c in seen.values())
    assert isinstance(visitor.browser, Firefox)
    template = visitor.browser.template
    for root, dirs, files in os.walk(template):
        for name in [*dirs, *files, "."]:
            st = os.lstat(os.path.join(root, name))
            assert st.st_uid == 0 and not st.st_mode & 0o022, os.path.join(root, name)


DROP_THEN_REPORT = (
    "import sys; from harness.lab.privileges import drop_privileges; from harness.lab.checks import account; "
    "drop_privileges(sys.argv[1], 'test'); print(account())"
)


@pytest.mark.lab
def test_the_checks_run_as_the_helper_account_without_privileges(lab):
    """`lab check` parses the resolvers' and servers' answers: as the helper account, never as root."""
    row = next(r for r in lab.run_checks() if r.name == "account")
    assert row.ok and row.detail.startswith(f"{HELPER_USER} (uid {helper().uid}), capabilities 0x0"), row


def test_the_checks_account_row_fails_as_root():
    ok, said = account()
    assert not ok and said.startswith("root (uid 0)"), said


def test_a_dropped_process_is_the_account_with_no_capability_and_no_new_privileges():
    argv = [sys.executable, "-c", DROP_THEN_REPORT, HELPER_USER]
    out = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == f"(True, '{HELPER_USER} (uid {helper().uid}), capabilities 0x0, no new privileges 1')"


def test_dropping_to_root_is_refused():
    out = subprocess.run([sys.executable, "-c", DROP_THEN_REPORT, "root"], capture_output=True, text=True, timeout=30)
    assert out.returncode != 0 and "test: refusing to run as 'root': it is root" in out.stderr, out.stderr
