"""Link emulation in the lab, all real: tbf, nftables loss, the NFQUEUE delayer, UDP probes and rate tests.

Bounds are loose enough that no machine noise breaks them, tight enough to
catch a missing delay, loss or rate. Accuracy figures come from the benchmark.

Each test pins the backend it asserts on: the user-space one works on every
kernel; the netem ones (marker `netem`) need a kernel with sch_netem and say
so when it is missing, since no user-space stand-in can test the kernel's qdisc.
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import threading
import time
from pathlib import Path

import pytest

from harness import netns
from harness.shaping.check import check_link
from harness.shaping.link_profile import load_link_profile
from harness.shaping.shaper import Shaper

pytestmark = pytest.mark.lab


@pytest.fixture
def shaper(lab):
    """The user-space backend, whatever the kernel has: the tests below assert on its daemons."""
    s = Shaper(lab, backend="userspace")
    yield s
    s.clear()


@pytest.fixture
def netem_shaper(lab):
    """The kernel backend; these tests need sch_netem, which no user-space stand-in can replace."""
    from harness.shaping.netem import netem_available

    s = Shaper(lab, backend="netem")
    if not netem_available(s.point.namespace, s.point.downlink_if):
        pytest.skip("needs a kernel with sch_netem (this kernel has none; the user-space backend is tested above)")
    yield s
    s.clear()


def qdiscs(lab) -> str:
    return subprocess.run(
        netns.command(lab.config.namespaces["shaper"], ["tc", "qdisc", "show"]), capture_output=True, text=True
    ).stdout


def test_auto_chooses_netem_only_where_the_kernel_has_it_and_a_forced_netem_says_why_not(lab):
    from harness.errors import HarnessError
    from harness.shaping.netem import netem_available

    auto = Shaper(lab)
    if netem_available(auto.point.namespace, auto.point.downlink_if):
        assert auto.choose_backend() == "netem"
    else:
        assert auto.choose_backend() == "userspace"
        with pytest.raises(HarnessError, match="no sch_netem"):
            Shaper(lab, backend="netem").choose_backend()
    assert Shaper(lab, backend="userspace").choose_backend() == "userspace"  # forced: always honoured


def test_4g_adds_its_delay_and_rates_and_applying_twice_is_a_no_op(lab, shaper):
    link = load_link_profile("4g")
    assert shaper.apply(link) is True
    assert shaper.apply(link) is False
    check = check_link(lab, link, "userspace", probes=200)
    assert check.problem is None
    assert check.rtt_mean_ms is not None and 45 < check.rtt_mean_ms < 70, check
    assert check.verdicts["uplink_rate_within_5pct"] and check.verdicts["downlink_rate_within_5pct"], check
    assert check.congestion_control["client"] and check.congestion_control["server"]


def backlog_bytes(lab) -> list[int]:
    """The bytes queued in every qdisc of the shaper namespace now."""
    shown = subprocess.run(
        netns.command(lab.config.namespaces["shaper"], ["tc", "-s", "qdisc", "show"]), capture_output=True, text=True
    ).stdout
    lines = [line.split() for line in shown.splitlines()]
    return [int(words[1].removesuffix("b")) for words in lines if words and words[0] == "backlog"]


def test_the_rate_test_leaves_the_link_empty_for_what_comes_next(lab, shaper):
    """Its flow overloads the bucket: left queued, 200 ms of it would delay a block's first visit, or the next
    check's first RTT probes (they read 230 ms down to 60 ms, ten apart, on 4G before the test drained it)."""
    from harness.shaping.rate import measure_rates

    link = load_link_profile("4g")
    shaper.apply(link)
    rates = measure_rates(lab.probe_peer(), link)
    assert rates["uplink"]["mbit"] and rates["downlink"]["mbit"]
    queued = backlog_bytes(lab)
    assert queued and set(queued) == {0}, queued
    check = check_link(lab, link, "userspace", probes=200)  # straight after another rate test
    assert check.verdicts["rtt_within_2ms"], check


def test_the_rtt_is_the_path_s_and_not_the_time_an_echo_waited_for_a_cpu(lab, shaper):
    """The echo stopped for 200 ms (SIGSTOP, what a loaded machine does to it for shorter spells) mid-run: the
    probes it held show the wait as host delay, and their RTTs stay the path's."""
    from harness.shaping.probes import probe_path

    link = load_link_profile("4g")
    shaper.apply(link)
    stalled: list[int] = []

    def stall_the_echo() -> None:
        time.sleep(1.0)
        server = os.stat(f"/run/netns/{lab.config.namespaces['server']}").st_ino
        ours = Path("/proc/self/cmdline").read_bytes()
        children = Path(f"/proc/{os.getpid()}/task/{os.getpid()}/children").read_text().split()
        # The echo: a fork of this process (the lab's daemons are children too) in the server namespace.
        echo = next(
            int(c)
            for c in children
            if os.stat(f"/proc/{c}/ns/net").st_ino == server and Path(f"/proc/{c}/cmdline").read_bytes() == ours
        )
        os.kill(echo, signal.SIGSTOP)
        time.sleep(0.2)
        os.kill(echo, signal.SIGCONT)
        stalled.append(echo)

    stopper = threading.Thread(target=stall_the_echo)
    stopper.start()
    run = probe_path(lab, 300, 0.01, 1.0)
    stopper.join()
    assert stalled and len(run.rtts) > 250
    assert max(run.host) >= 150, max(run.host)  # the stall, seen and taken off
    assert max(run.rtts) < 53.3 + 100, sorted(run.rtts)[-5:]  # with the stall in them: 250 ms and more
    assert statistics.median(run.rtts) == pytest.approx(53.4, abs=2)


def test_3g_rates_are_on_target_when_the_link_is_shaped_right(lab, shaper):
    link = load_link_profile("3g")
    shaper.apply(link)
    check = check_link(lab, link, "userspace", probes=200)
    assert check.problem is None
    for way in ("uplink", "downlink"):  # 2.1 % loss up: the bottleneck's rate all the same, not TCP's share of it
        test = check.rate_tests[way]
        assert test["window_frames"] >= 100, test
        assert check.verdicts[f"{way}_rate_within_5pct"] is True, check
        assert abs(test["mbit"] - 1.0) <= 0.05, test


@pytest.mark.parametrize("rate_mbit", [0.9, 1.1])
def test_3g_check_says_off_target_when_the_rate_is_wrong(lab, shaper, rate_mbit):
    """The 3G profile with the rate 10 % off, checked against 3G: both directions read off target, on the
    side the link is off. A slower link is measured as it is; a faster one reads high but not exactly (the
    flow, planned for 1 Mbit/s, overloads it less than planned, so the bucket's burst reaches the window)."""
    right = load_link_profile("3g")
    ways = {way: getattr(right, way).model_copy(update={"rate_mbit": rate_mbit}) for way in ("uplink", "downlink")}
    shaper.apply(right.model_copy(update={"name": f"3g-at-{rate_mbit}", **ways}))
    check = check_link(lab, load_link_profile("3g"), "userspace", probes=200)
    assert check.problem is None
    for way in ("uplink", "downlink"):
        assert check.verdicts[f"{way}_rate_within_5pct"] is False, check
        measured = check.rate_tests[way]["mbit"]
        assert measured is not None, check.rate_tests
        if rate_mbit < 1:
            assert abs(measured - rate_mbit) <= 0.02 * rate_mbit, check.rate_tests
        else:
            assert measured > 1.05, check.rate_tests
    assert not check.passed


def test_loss_hits_the_direction_the_profile_names(lab, shaper, tmp_path):
    path = tmp_path / "lossy-up.toml"
    path.write_text('description = "20 % uplink loss"\nsource = "test"\n[uplink]\nloss_percent = 20\n')
    link = load_link_profile(str(path))
    shaper.apply(link)
    check = check_link(lab, link, "userspace", probes=300, seconds=1)
    assert 8 < check.uplink_loss_percent < 35, check
    assert check.downlink_loss_percent < 3, check
    assert check.rtt_mean_ms is not None and check.rtt_mean_ms < 10


def test_a_dead_delayer_stops_the_link_and_the_check_says_so(lab, shaper):
    shaper.apply(load_link_profile("4g"))
    uplink = next(d for d in shaper.daemons() if d.name == "shaper-uplink")
    os.kill(uplink.pid, signal.SIGKILL)
    deadline = time.monotonic() + 3  # SIGKILL is delivered asynchronously
    while shaper.problem() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert "shaper-uplink" in (shaper.problem() or "")
    check = check_link(lab, load_link_profile("4g"), "userspace", probes=200, seconds=1)
    assert check.problem is not None and check.rtt_mean_ms is None
    assert shaper.apply(load_link_profile("4g")) is True  # a broken profile is re-applied, not skipped
    assert shaper.problem() is None


def test_a_visit_over_a_broken_link_is_a_harness_failure_and_records_the_link(lab, shaper, tmp_path):
    from harness.visit import Visitor

    shaper.apply(load_link_profile("4g"))
    visitor = Visitor(lab, tmp_path, network="4g")
    ok = visitor.visit_once("https://www.lab.test/", "do53", "near")
    assert ok.error_class == "Successful" and ok.link["profile"] == "4g" and ok.link["backend"] == "userspace"
    uplink = next(d for d in shaper.daemons() if d.name == "shaper-uplink")  # 4g delays the uplink only
    os.kill(uplink.pid, signal.SIGKILL)
    deadline = time.monotonic() + 3
    while shaper.problem() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    broken = visitor.visit_once("https://www.lab.test/", "do53", "near")
    assert broken.error_class == "Infrastructure Failure" and broken.detail.startswith("link: ")
    assert not broken.counted  # never a DNS or page-load result


def test_switching_and_clearing_leave_no_shaping_behind(lab, shaper):
    shaper.apply(load_link_profile("3g"))
    shaper.apply(load_link_profile("4g-lossy-symmetric"))
    assert "rate 7440Kbit" in qdiscs(lab) and "rate 22100Kbit" in qdiscs(lab)
    assert len(shaper.daemons()) == 2  # symmetric: a delayer per direction
    pids = [d.pid for d in shaper.daemons()]
    shaper.clear()
    assert "tbf" not in qdiscs(lab)
    assert not any(
        os.path.exists(f"/proc/{p}") and open(f"/proc/{p}/stat").read().split(") ")[1][0] != "Z" for p in pids
    )
    check = check_link(lab, load_link_profile("wired"), None, probes=200, seconds=1)
    assert check.rtt_mean_ms is not None and check.rtt_mean_ms < 5 and check.uplink_lost == 0


@pytest.mark.netem
def test_netem_adds_its_delay_and_rates(lab, netem_shaper):
    link = load_link_profile("4g")
    assert netem_shaper.apply(link) is True
    assert netem_shaper.daemons() == []  # the kernel does it all: no delayer
    check = check_link(lab, link, "netem", probes=200)
    assert check.problem is None
    assert check.rtt_mean_ms is not None and 45 < check.rtt_mean_ms < 70, check
    assert check.verdicts["uplink_rate_within_5pct"] and check.verdicts["downlink_rate_within_5pct"], check


@pytest.mark.netem
def test_netem_loss_hits_the_direction_the_profile_names_and_clear_removes_it(lab, netem_shaper, tmp_path):
    path = tmp_path / "lossy-up.toml"
    path.write_text('description = "20 % uplink loss"\nsource = "test"\n[uplink]\nloss_percent = 20\n')
    link = load_link_profile(str(path))
    netem_shaper.apply(link)
    assert "netem" in qdiscs(lab)
    check = check_link(lab, link, "netem", probes=300, seconds=1)
    assert 8 < check.uplink_loss_percent < 35, check
    assert check.downlink_loss_percent < 3, check
    netem_shaper.clear()
    assert "netem" not in qdiscs(lab)
