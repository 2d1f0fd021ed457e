"""Internet mode, with a stand-in for the Internet: a namespace behind a host interface the test creates.

The "upstream" namespace holds a real unbound and a real web server on an
address only reachable through the host; it has no route back to the
Internet side's own subnet, so every answer proves the host's NAT.
"""

from __future__ import annotations

import statistics
import subprocess
import sys
from pathlib import Path

import pytest
from pyroute2 import IPRoute

from harness import netns
from harness.arms import make_arm
from harness.arms.base import Resolver
from harness.errors import HarnessError
from harness.internet import IP_FORWARD, InternetSide, internet_config
from harness.shaping.profile import load_link_profile
from harness.shaping.shaper import Shaper
from harness.timer import Timing, time_names
from harness.visit import Visitor

pytestmark = pytest.mark.lab

UP_NS, UP_IF = "dsup", "dsup0"
HOST_ADDR, UP_ADDR = "198.19.254.1", "198.19.254.2"
SUBNET = "198.19.253.248/29"
SITE = "site.example"


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    """A namespace reached through host interface dsup0, running unbound and a web server."""
    work = tmp_path_factory.mktemp("upstream")
    work.chmod(0o755)
    netns.remove(UP_NS)
    netns.create(UP_NS)
    netns.delete_host_link(UP_IF)
    with IPRoute() as ipr:
        ipr.link("add", ifname=UP_IF, kind="veth", peer={"ifname": "u0", "net_ns_fd": UP_NS})
        index = ipr.link_lookup(ifname=UP_IF)[0]
        ipr.addr("add", index=index, address=HOST_ADDR, prefixlen=30)
        ipr.link("set", index=index, state="up")
    with IPRoute(netns=UP_NS) as ipr:
        index = ipr.link_lookup(ifname="u0")[0]
        ipr.addr("add", index=index, address=UP_ADDR, prefixlen=30)
        ipr.link("set", index=index, state="up")
    (work / "unbound.conf").write_text(f"""server:
  interface: {UP_ADDR}
  access-control: 0.0.0.0/0 allow
  username: ""
  chroot: ""
  directory: "{work}"
  pidfile: ""
  use-syslog: no
  do-ip6: no
  module-config: "iterator"
  local-zone: "example." static
  local-data: "{SITE}. 60 IN A {UP_ADDR}"
""")
    (work / "www").mkdir()
    (work / "www" / "index.html").write_text("<html><body>upstream</body></html>")
    procs = [
        subprocess.Popen(
            netns.command(UP_NS, ["unbound", "-d", "-c", str(work / "unbound.conf")]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
        subprocess.Popen(
            netns.command(
                UP_NS, [sys.executable, "-m", "http.server", "80", "--bind", UP_ADDR, "--directory", str(work / "www")]
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
    ]
    assert not netns.wait_tcp(UP_NS, [(UP_ADDR, 53), (UP_ADDR, 80)], timeout=10)
    yield Resolver(name="upstream", address=UP_ADDR, tls_name="", doh_uri="")
    for p in procs:
        p.kill()
        p.wait()
    netns.remove(UP_NS)
    netns.delete_host_link(UP_IF)


@pytest.fixture(scope="module")
def side(upstream):
    forward_before = IP_FORWARD.read_text().strip()
    s = InternetSide(internet_config("dsit", UP_IF, SUBNET))
    s.down()
    assert s.up() is True
    yield s
    s.down()
    assert IP_FORWARD.read_text().strip() == forward_before


def test_up_is_idempotent_and_refuses_bad_input(side):
    assert side.up() is False and side.status().healthy
    with pytest.raises(HarnessError, match="interface 'nope0' does not exist"):
        InternetSide(internet_config("dsbad", "nope0", "198.19.252.248/29")).up()
    with pytest.raises(HarnessError, match="must be an IPv4 /29"):
        internet_config("dsbad", UP_IF, "198.19.252.0/24")
    assert InternetSide.named("dsit").config.interface == UP_IF


def test_queries_leave_by_the_chosen_interface_with_nat(side, upstream):
    # The upstream has no route to the side's subnet: an answer can only come back through the NAT.
    timings = time_names(side.client_side(), "do53", upstream, [SITE] * 5)
    assert all(t.ok and t.answers == 1 for t in timings), [t.error for t in timings]
    with IPRoute(netns=UP_NS) as ipr:
        assert not any(r.get_attr("RTA_DST") == "198.19.253.248" for r in ipr.get_routes())


def _ms(t: Timing) -> float:
    """The duration in ms of a query the test expects to have been sent."""
    assert t.ms is not None, t
    return t.ms


def test_the_shaping_backend_works_on_the_internet_link(side, upstream):
    shaper = Shaper(side)
    try:
        base = statistics.median(_ms(t) for t in time_names(side.client_side(), "do53", upstream, [SITE] * 10))
        shaper.apply(load_link_profile("4g"))
        assert shaper.apply(load_link_profile("4g")) is False  # applying twice is a no-op
        shaped = statistics.median(_ms(t) for t in time_names(side.client_side(), "do53", upstream, [SITE] * 10))
        assert 45 < shaped - base < 75, (base, shaped)  # 4g adds 53.3 ms of round trip
    finally:
        shaper.clear()


def test_a_visit_runs_on_the_internet_side_with_a_client_side_proof(side, upstream, tmp_path):
    visitor = Visitor(side, tmp_path, timeout=15, margin=10)
    arm = make_arm("do53", upstream, visitor.client)
    arm.start()
    try:
        result = visitor.visit(f"http://{SITE}/", arm)
    finally:
        arm.stop()
    assert result.error_class == "Successful", (result.detail, result.signal, result.proof)
    assert result.on_load_ms and result.har_path and Path(result.har_path).exists()
    assert result.proof["valid"] and result.proof["resolver_queries"] is None  # no resolver statistics here
    assert result.proof["client_packets"]["do53_resolver"] > 0


def test_down_leaves_nothing(upstream):
    s = InternetSide(internet_config("dsit2", UP_IF, "198.19.253.240/29"))
    s.up()
    s.down()
    assert not netns.exists("dsit2-client") and not netns.exists("dsit2-shaper")
    assert subprocess.run(["nft", "list", "table", "ip", "dnsstudy_dsit2"], capture_output=True).returncode != 0
    with IPRoute() as ipr:
        assert not ipr.link_lookup(ifname="dsit2-up")
