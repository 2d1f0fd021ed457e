"""Internet mode, with a stand-in for the Internet: namespaces behind host interfaces the test creates.

The stand-in takes the last /23 of DNSSTUDY_TEST_POOL (the session lab and the private labs take the
first ones), so two test runs with different pools never meet:

    side client -> shaper -> <side>-up  host  <P>up0 ==== u0  <P>-inet: the uplink's far end (router .2) and,
                                              (.1)             on its loopback, "public" servers (unbound, a
                                                               web server) and the addresses the firewall
                                                               refuses (RFC 1918, CGNAT, link-local, metadata)
                                              <P>lan0 ==== l0  <P>-lan: another network the host is on
                                              (.5)        (.6)

Each side's traffic is routed into the stand-in by a policy rule (`iif <side>-up lookup <table>`): the
stand-in is the side's default route while the host's own routes (its real default route, its metadata
service) stay untouched. The stand-in has no route back to any side's subnet, so every answer proves the
host's NAT. A refusal is shown three ways: the client gets the firewall's immediate "administratively
prohibited" (EHOSTUNREACH, not a refused connection or a timeout), the side's refusal counter moves, and
the same listener answers from elsewhere (or for a side allowed to reach it).
"""

from __future__ import annotations

import errno
import ipaddress
import json
import socket
import statistics
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path

import pytest
from click.testing import CliRunner
from pyroute2 import IPRoute

from harness import netns
from harness.arms import make_arm
from harness.cli import main
from harness.errors import HarnessError
from harness.internet.config import internet_config
from harness.internet.firewall import host_resolver_allowance
from harness.internet.forwarding import GUARD_TABLE, IP_FORWARD, forwarding_record
from harness.internet.side import InternetSide
from harness.lab.lab import Lab
from harness.place import Resolver
from harness.shaping.link_profile import load_link_profile
from harness.shaping.shaper import Shaper
from harness.timer import Timing, time_names
from harness.visit import Visitor
from tests.conftest import TEST_POOL, TEST_PREFIX

pytestmark = pytest.mark.lab

P = TEST_PREFIX[:6]  # a side's name is this and two characters: 8 at most
STANDIN = ipaddress.ip_network(f"{TEST_POOL.broadcast_address - 511}/23")  # the pool's last /23


def _at(offset: int) -> str:
    return str(STANDIN.network_address + offset)


UP_NS, UP_IF, HOST_ADDR, UP_ADDR = f"{P}-inet", f"{P}up0", _at(1), _at(2)
LAN_NS, LAN_IF, HOST_LAN_ADDR, LAN_ADDR = f"{P}-lan", f"{P}lan0", _at(5), _at(6)
PUBLIC = _at(257)  # in the /23's second /24: not on any host network, so not refused
SITE = "site.example"
PORT = 853  # a DNS port (DoT): one `--allow` opens, so one listener serves refusals and exceptions alike
#: Addresses in the stand-in the firewall refuses; each answers on PORT when reached.
TARGETS = {
    "private-10": "10.9.8.7",
    "private-172": "172.16.9.8",
    "private-192": "192.168.9.8",
    "shared-cgnat": "100.64.9.8",
    "link-local": "169.254.9.8",
    "metadata": "169.254.169.254",
    "uplink-network": UP_ADDR,  # the uplink's own network (its LAN), although not a private range here
}
STANDIN_TABLE = 0x4000_0000 + (int(STANDIN.network_address) >> 9)  # one routing table per /23
RULE_PRIORITY = 30000  # after `local` (the host's own addresses stay local), before `main`


def _side(number: int) -> InternetSide:
    """Side ``number`` of this run, on its own /29 of the stand-in."""
    return InternetSide(internet_config(f"{P}i{number}", UP_IF, f"{_at(8 * number)}/29"))


def _veth_pair(host_if: str, host_addr: str, ns: str, ns_if: str, ns_addr: str) -> None:
    """A host interface and its peer in ``ns``, each with a /30 address, both up."""
    with IPRoute() as ipr:
        ipr.link("add", ifname=host_if, kind="veth", peer={"ifname": ns_if, "net_ns_fd": ns})
        index = ipr.link_lookup(ifname=host_if)[0]
        ipr.addr("add", index=index, address=host_addr, prefixlen=30)
        ipr.link("set", index=index, state="up")
    with IPRoute(netns=ns) as ipr:
        index = ipr.link_lookup(ifname=ns_if)[0]
        ipr.addr("add", index=index, address=ns_addr, prefixlen=30)
        ipr.link("set", index=index, state="up")


@contextmanager
def listening(namespace: str | None, address: str, port: int = PORT) -> Iterator[None]:
    """A TCP server in ``namespace`` (None: the host) that accepts every connection and closes it."""
    with netns.entered(namespace):
        server = socket.create_server((address, port))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                server.accept()[0].close()
            except OSError:  # the timeout: look at `stop` again
                pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        server.close()


def connect(namespace: str | None, address: str, port: int = PORT, timeout: float = 3) -> str:
    """'connected', 'timeout' (dropped), or the errno's name: EHOSTUNREACH is a firewall's reject.

    The host rate-limits the ICMP errors it sends (net.ipv4.icmp_ratelimit, a burst of about six per
    destination), so after a burst of refusals a reject may go unanswered and the client retries a
    second later: the timeout leaves room for that, and refusal counters move by one or more.
    """
    with netns.entered(namespace):
        try:
            socket.create_connection((address, port), timeout=timeout).close()
        except TimeoutError:
            return "timeout"
        except OSError as exc:
            return errno.errorcode.get(exc.errno or 0, str(exc))
    return "connected"


def counter(table: str, name: str, family: str = "inet") -> int:
    """Packets counted so far by a named nftables counter."""
    done = subprocess.run(["nft", "-j", "list", "counter", family, table, name], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return next(i["counter"]["packets"] for i in json.loads(done.stdout)["nftables"] if "counter" in i)


def _table_exists(family: str, table: str) -> bool:
    return subprocess.run(["nft", "list", "table", family, table], capture_output=True).returncode == 0


@contextmanager
def routed_to_standin(side: InternetSide) -> Iterator[InternetSide]:
    """Make the stand-in the default route of everything arriving from ``side``'s veth."""
    rule = ["iif", side.config.host_if, "lookup", str(STANDIN_TABLE), "priority", str(RULE_PRIORITY)]
    subprocess.run(["ip", "rule", "add", *rule], check=True)
    try:
        yield side
    finally:
        subprocess.run(["ip", "rule", "del", *rule], check=True)


@pytest.fixture(scope="module")
def upstream(tmp_path_factory):
    """The stand-in: the uplink's far end with its servers and refused addresses, another LAN, the routes."""
    work = tmp_path_factory.mktemp("upstream")
    work.chmod(0o755)
    for ns, host_if in ((UP_NS, UP_IF), (LAN_NS, LAN_IF)):
        netns.remove(ns)
        netns.delete_host_link(host_if)
        netns.create(ns)
    _veth_pair(UP_IF, HOST_ADDR, UP_NS, "u0", UP_ADDR)
    _veth_pair(LAN_IF, HOST_LAN_ADDR, LAN_NS, "l0", LAN_ADDR)
    with IPRoute(netns=UP_NS) as ipr:
        lo = ipr.link_lookup(ifname="lo")[0]
        for address in (PUBLIC, *TARGETS.values()):
            if address != UP_ADDR:
                ipr.addr("add", index=lo, address=address, prefixlen=32)
        ipr.route("add", dst=f"{_at(4)}/30", gateway=HOST_ADDR)  # so a LAN packet forwarded here could answer
    with IPRoute(netns=LAN_NS) as ipr:
        ipr.route("add", dst="0.0.0.0/0", gateway=HOST_LAN_ADDR)
    with IPRoute() as ipr:  # the sides' default route, and a route to the other LAN (which they may not use)
        ipr.route("add", dst="0.0.0.0/0", gateway=UP_ADDR, table=STANDIN_TABLE)
        ipr.route("add", dst=f"{_at(4)}/30", oif=ipr.link_lookup(ifname=LAN_IF)[0], table=STANDIN_TABLE)
    (work / "unbound.conf").write_text(f"""server:
  interface: {PUBLIC}
  access-control: 0.0.0.0/0 allow
  username: ""
  chroot: ""
  directory: "{work}"
  pidfile: ""
  use-syslog: no
  do-ip6: no
  module-config: "iterator"
  local-zone: "example." static
  local-data: "{SITE}. 60 IN A {PUBLIC}"
""")
    (work / "www").mkdir()
    (work / "www" / "index.html").write_text("<html><body>upstream</body></html>")
    STANDIN_CA["pem"] = _standin_certificates(work).read_bytes()
    procs = [
        subprocess.Popen(
            netns.command(UP_NS, ["unbound", "-d", "-c", str(work / "unbound.conf")]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
        # The encrypted endpoints of a public resolver: DoT and DoQ on 853, DoH and DoH3 on 443, in front of unbound.
        subprocess.Popen(
            netns.command(UP_NS, [*_standin_front(work), "--upstream", f"{PUBLIC}:53"]),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
        subprocess.Popen(
            netns.command(
                UP_NS, [sys.executable, "-m", "http.server", "80", "--bind", PUBLIC, "--directory", str(work / "www")]
            ),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        ),
    ]
    try:
        assert not netns.wait_tcp(UP_NS, [(PUBLIC, 53), (PUBLIC, 80), (PUBLIC, 853), (PUBLIC, 443)], timeout=10)
        # Each refused target answers on PORT; not a wildcard listener, which would take the resolver's 853.
        with ExitStack() as targets:
            for address in TARGETS.values():
                targets.enter_context(listening(UP_NS, address))
            targets.enter_context(listening(LAN_NS, LAN_ADDR))
            yield Resolver(
                name="upstream",
                address=PUBLIC,
                tls_name=RESOLVER_NAME,
                doh_uri=f"https://{RESOLVER_NAME}/dns-query",
                doq_port=853,
                doh3_uri=f"https://{RESOLVER_NAME}/dns-query",
            )
        STANDIN_CA.clear()
    finally:
        for p in procs:
            p.kill()
            p.wait()
        for ns, host_if in ((UP_NS, UP_IF), (LAN_NS, LAN_IF)):
            netns.remove(ns)
            netns.delete_host_link(host_if)  # its routes in the stand-in's table go with it


RESOLVER_NAME = "resolver.example"  # the stand-in's public resolver, as its certificate names it
STANDIN_CA: dict[str, bytes] = {}  # the stand-in CA's certificate while the stand-in runs


def _standin_certificates(work: Path) -> Path:
    """A CA of the stand-in's own and the resolver's certificate (its name and address); returns the CA file."""
    from harness.lab.ca import CertificateAuthority, new_key, write_key

    ca = CertificateAuthority.create("stand-in Internet CA")
    key = new_key()
    write_key(key, work / "resolver.key")
    (work / "resolver.pem").write_bytes(ca.issue([RESOLVER_NAME], [PUBLIC], key))
    (work / "ca.pem").write_bytes(ca.cert_pem)
    return work / "ca.pem"


def _standin_front(work: Path) -> list[str]:
    """dnsproxy serving DoT, DoQ, DoH and DoH3 on the stand-in resolver's address, as a public resolver would."""
    from harness.paths import built_program

    return [
        built_program("dnsproxy"),
        "--listen",
        PUBLIC,
        "--port",
        "0",
        "--tls-port",
        "853",
        "--quic-port",
        "853",
        "--https-port",
        "443",
        "--http3",
        "--tls-crt",
        str(work / "resolver.pem"),
        "--tls-key",
        str(work / "resolver.key"),
    ]


# The ip_forward tests come first: they need the module's sides (below) not to be up yet, or
# "the value before" would already be the sides' 1.


def test_ip_forward_is_counted_across_sides_and_restored_in_either_order(upstream):
    before = IP_FORWARD.read_text().strip()
    a, b = _side(3), _side(4)
    for first, second in ((a, b), (b, a)):
        for s in (a, b):
            s.down()
            assert s.up() is True
        record = forwarding_record()
        assert IP_FORWARD.read_text().strip() == "1" and {a.name, b.name} <= set(record["sides"])
        if record["original"] == "0":  # the guard lets both sides' veths through
            listing = subprocess.run(["nft", "list", "table", "ip", GUARD_TABLE], capture_output=True, text=True)
            assert a.config.host_if in listing.stdout and b.config.host_if in listing.stdout
        first.down()
        assert IP_FORWARD.read_text().strip() == "1", "the other side still needs forwarding"
        assert set(forwarding_record()["sides"]) & {a.name, b.name} == {second.name}
        second.down()
        assert IP_FORWARD.read_text().strip() == before
        assert not set(forwarding_record()["sides"]) & {a.name, b.name}
        if not forwarding_record()["sides"]:  # no other run's side is up: nothing of the project is left
            assert not _table_exists("ip", GUARD_TABLE)


def test_lab_down_of_the_same_name_keeps_the_forwarding_record(upstream, lab_config):
    before = IP_FORWARD.read_text().strip()
    side = _side(5)
    side.down()
    side.up()
    Lab(lab_config.with_overrides(prefix=side.name)).down()  # removes the namespaces and directory of that name
    assert not side.status().up
    assert side.name in forwarding_record()["sides"] and IP_FORWARD.read_text().strip() == "1"
    done = CliRunner().invoke(main, ["internet", "down", "--name", side.name])
    assert done.exit_code == 0, done.output
    assert side.name not in forwarding_record()["sides"]
    assert IP_FORWARD.read_text().strip() == before
    assert not _table_exists("inet", side.config.firewall_table)


@pytest.fixture(scope="module")
def side(upstream):
    """A side with no exception but the host's resolver, routed into the stand-in."""
    s = _side(1)
    s.down()
    assert s.up() is True
    with routed_to_standin(s):
        yield s
    s.down()


@pytest.fixture(scope="module")
def allowed_side(upstream):
    """A side allowed to reach every refused target and the host's uplink address: the control."""
    s = _side(2)
    s.down()
    assert s.up(allow=[*TARGETS.values(), HOST_ADDR]) is True
    with routed_to_standin(s):
        yield s
    s.down()


def test_up_is_idempotent_and_refuses_bad_input(side):
    assert side.up() is False and side.status().healthy
    with pytest.raises(HarnessError, match="interface 'nope0' does not exist"):
        InternetSide(internet_config(f"{P}bd", "nope0", f"{_at(64)}/29")).up()
    with pytest.raises(HarnessError, match="must be an IPv4 /29"):
        internet_config(f"{P}bd", UP_IF, f"{_at(0)}/24")
    for value, message in (
        ("::1", "IPv6"),
        ("127.0.0.1", "loopback"),
        ("nosuchresolver", "no resolver profile"),
        ("1.2.3.4; drop", "IPv4 address or a resolver name"),
    ):
        with pytest.raises(HarnessError, match=message):
            InternetSide(internet_config(f"{P}bd", UP_IF, f"{_at(64)}/29")).up(allow=[value])
    assert not netns.exists(f"{P}bd-client")
    assert InternetSide.named(side.name).config.interface == UP_IF


@pytest.mark.parametrize("target", list(TARGETS), ids=list(TARGETS))
def test_the_client_cannot_reach_private_shared_link_local_or_metadata_addresses(side, allowed_side, target):
    address = TARGETS[target]
    before = counter(side.config.firewall_table, "refused_forward")
    assert connect(side.namespaces["client"], address) == "EHOSTUNREACH"
    assert counter(side.config.firewall_table, "refused_forward") > before
    # The same listener, on the same path, for a side brought up with `--allow ADDRESS`.
    assert connect(allowed_side.namespaces["client"], address) == "connected"


def test_the_client_cannot_reach_the_host_itself(side, allowed_side):
    with listening(None, HOST_ADDR), listening(None, HOST_LAN_ADDR):
        for address in (HOST_ADDR, HOST_LAN_ADDR, side.config.address(5)):  # uplink, another LAN, its own link
            before = counter(side.config.firewall_table, "refused_input")
            assert connect(side.namespaces["client"], address) == "EHOSTUNREACH", address
            assert counter(side.config.firewall_table, "refused_input") > before
        assert connect(UP_NS, HOST_ADDR) == "connected"  # the same listener, from the uplink's network
        assert connect(allowed_side.namespaces["client"], HOST_ADDR) == "connected"  # `--allow` the host's address


def test_the_client_cannot_leave_by_another_interface_of_the_host(side):
    # LAN_ADDR is not in a refused range: the stand-in's table routes it out of LAN_IF, not the uplink.
    before = counter(side.config.firewall_table, "refused_forward")
    assert connect(side.namespaces["client"], LAN_ADDR) == "EHOSTUNREACH"
    assert counter(side.config.firewall_table, "refused_forward") > before
    assert connect(None, LAN_ADDR) == "connected"  # the same listener, from the host


def test_the_client_cannot_reach_the_host_loopback(upstream):
    """Even with the kernel's own barriers taken away, the side's input rule refuses the host's loopback.

    Normally the client's and the shaper's own 127/8 and the host's martian check stop such a packet
    long before the firewall; here all three are disabled on this throwaway side's path.
    """
    s = _side(6)
    s.down()
    s.up()
    client, shaper = s.namespaces["client"], s.namespaces["shaper"]
    port = netns.free_tcp_port()
    try:
        for ns, via in ((client, s.gateway), (shaper, s.config.address(5))):
            subprocess.run(["ip", "-n", ns, "route", "del", "local", "127.0.0.0/8", "dev", "lo", "table", "local"])
            subprocess.run(["ip", "-n", ns, "route", "add", "127.0.0.2/32", "via", via], check=True)
        for ns, dev in ((client, "c0"), (shaper, "sc"), (shaper, "ss")):
            netns.set_sysctl(ns, f"net.ipv4.conf.{dev}.route_localnet", "1")
        Path(f"/proc/sys/net/ipv4/conf/{s.config.host_if}/route_localnet").write_text("1")  # dies with the veth
        with listening(None, "127.0.0.2", port):
            assert connect(None, "127.0.0.2", port) == "connected"  # the listener, from the host
            before = counter(s.config.firewall_table, "refused_input")
            assert connect(client, "127.0.0.2", port) == "EHOSTUNREACH"
            assert counter(s.config.firewall_table, "refused_input") > before
            subprocess.run(["nft", "flush", "chain", "inet", s.config.firewall_table, "input"], check=True)
            assert connect(client, "127.0.0.2", port) == "connected"  # without the rule, this path gets through
    finally:
        s.down()


def test_the_side_does_not_make_the_host_forward_between_other_interfaces(side):
    """A network the host is on (LAN_NS) reaches the uplink's far end only if the host forwarded before."""
    with listening(None, HOST_LAN_ADDR):
        assert connect(LAN_NS, HOST_LAN_ADDR) == "connected"  # the LAN's link works
    assert connect(None, UP_ADDR) == "connected"  # the target answers, from the host
    if forwarding_record()["original"] == "1":  # the host forwarded before any side: the sides changed nothing
        assert not _table_exists("ip", GUARD_TABLE)
        return
    before = counter(GUARD_TABLE, "dropped", family="ip")
    assert connect(LAN_NS, UP_ADDR) == "timeout"
    assert counter(GUARD_TABLE, "dropped", family="ip") > before


def test_the_side_has_no_ipv6_path(side):
    routes = netns.run(side.namespaces["client"], ["ip", "-6", "route", "show"]).stdout
    assert all(line.startswith(("fe80::", "multicast")) for line in routes.splitlines()), routes
    done = netns.run(side.namespaces["shaper"], ["cat", "/proc/sys/net/ipv6/conf/all/forwarding"])
    assert done.stdout.strip() == "0"
    table = subprocess.run(["nft", "list", "table", "inet", side.config.firewall_table], capture_output=True, text=True)
    assert "meta nfproto != ipv4 drop" in table.stdout  # in both the input and the forward chain


def test_a_resolver_the_firewall_refuses_needs_allow(side, allowed_side, tmp_path, monkeypatch):
    monkeypatch.setattr("harness.resolvers.RESOLVER_DIR", tmp_path)
    (tmp_path / "lanres.toml").write_text(
        'description = "a LAN resolver"\nsource = "test"\naddress = "10.9.8.7"\n'
        'tls_name = "lan.example"\ndoh_uri = "https://lan.example/dns-query"\n'
    )
    with pytest.raises(HarnessError, match=r"10\.9\.8\.7.*private.*--allow lanres"):
        side.resolver("lanres")
    assert allowed_side.resolver("lanres").address == "10.9.8.7"  # allowed by address: every DNS port
    host = host_resolver_allowance()  # the host's resolver is allowed without asking, on port 53 only
    firewall = side.firewall()
    assert firewall is not None
    assert host is None or (host in firewall.allowed and host.ports == (("tcp", 53), ("udp", 53)))


def test_queries_leave_by_the_chosen_interface_with_nat(side, upstream):
    # The upstream has no route to the side's subnet: an answer can only come back through the NAT.
    timings = time_names(side.client_side(), "do53", upstream, [SITE] * 5)
    assert all(t.ok and t.answers == 1 for t in timings), [t.error for t in timings]
    with IPRoute(netns=UP_NS) as ipr:
        assert not any(r.get_attr("RTA_DST") == str(side.config.subnet.network_address) for r in ipr.get_routes())


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
    s = _side(7)
    s.up()
    s.down()
    assert not netns.exists(s.namespaces["client"]) and not netns.exists(s.namespaces["shaper"])
    assert not _table_exists("inet", s.config.firewall_table)
    assert s.name not in forwarding_record()["sides"]
    with IPRoute() as ipr:
        assert not ipr.link_lookup(ifname=s.config.host_if)


@pytest.mark.parametrize(
    "protocol, stub", [("dot", None), ("dot", "dnsproxy"), ("doh", None), ("doq", None), ("doh3", None)]
)
def test_every_encrypted_arm_loads_a_page_on_the_internet_side(side, upstream, tmp_path, monkeypatch, protocol, stub):
    """Each arm through the side's NAT and firewall to a public-style resolver, proven from the client side.

    The stand-in's resolver has a certificate from a CA of its own, which the client trusts here as a lab's
    (the real Internet side trusts only the system's roots); it is kept where the helpers' account can read it.
    """
    ca = side.run_dir / "standin-ca.pem"
    ca.write_bytes(STANDIN_CA["pem"])
    ca.chmod(0o644)
    real = side.client_side()
    monkeypatch.setattr(side, "client_side", lambda: replace(real, ca_file=ca, browser_trusts_ca=True))
    visitor = Visitor(side, tmp_path, timeout=20, margin=10, stubs={protocol: stub} if stub else None)
    arm = make_arm(protocol, upstream, visitor.client, stub=stub)
    arm.start()
    try:
        result = visitor.visit(f"http://{SITE}/", arm)
    finally:
        arm.stop()
        visitor.client.restore_system_resolver()
    assert result.error_class == "Successful", (result.detail, result.signal, result.proof)
    assert result.proof["valid"] and result.proof["resolver_queries"] is None, result.proof
    packets = result.proof["client_packets"]
    assert packets[f"{protocol}_resolver"] > 0 and packets[f"{protocol}_answered"] > 0
    assert packets["do53_connections"] == 0  # not a single plain query left the client
