"""`InternetSide`: visits and timers on the real Internet, through namespaces the harness creates.

    client  --c0 ==== sc--  shaper  --ss ==== <prefix>-up--  host  --> chosen interface
    (browser, stubs,        (forwards; shaping               (forwards; NAT out of
     timer)                  attaches here)                   the chosen interface)

The browser never runs in the host's namespace: the client namespace gives
it its own resolv.conf and packet counters (the arm proof), and the shaper
namespace gives the same link emulation as the lab, on a link that ends at
the host.

The host forwards the project's own /29 out of the interface the user chose
and nothing else, through an nftables table of the side's own (`Firewall`):
no other interface, no private, shared, link-local, loopback or multicast
destination, not the uplink's own network, and nothing of the host itself,
except the resolvers the side was brought up with (`Allowance`). Turning on
the host's ip_forward is shared by every live side (`acquire_forwarding`):
the last side down restores the value the first one found, and while the
project is the reason the host forwards, a guard table drops every forwarded
packet that is not a side's. docs/security.md says what the client can reach.
"""

from __future__ import annotations

import fcntl
import ipaddress
import json
import os
import re
import shutil
import subprocess
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pyroute2 import IPRoute

from harness import netns
from harness.daemons import kill_namespace_processes
from harness.errors import HarnessError, require_root
from harness.paths import RUN_ROOT
from harness.place import CLIENT_IF, SHAPER_CLIENT_IF, SHAPER_SERVER_IF, ClientSide, Place, Resolver
from harness.protocols import protocols
from harness.resolvers import NO_IPV6, host_resolver, load_resolver, protocols_of

SYSTEM_CA = Path("/etc/ssl/certs/ca-certificates.crt")  # Debian's bundle: what Stubby and the timer trust
DEFAULT_SUBNET = "198.19.255.248/29"  # RFC 2544 benchmarking space: rarely routed anywhere
IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")

#: Which sides turned ip_forward on, and what it was before the first. Directly under the run root, never in a
#: prefix's directory: `lab down` removes the directory of its prefix, and a lab may share a side's name.
FORWARDING_RECORD = RUN_ROOT / "internet-forwarding.json"
#: The shared guard's table: 10 characters after the "dnsstudy_", which no side's name (8 at most) can give.
GUARD_TABLE = "dnsstudy_forwarding"

IFNAME = re.compile(r"[A-Za-z0-9_.:-]{1,15}")  # Linux interface names; they go into nftables rules
TRANSPORTS = ("tcp", "udp")

#: Destinations the client namespace may not reach through the host, and why (said in errors and docs/security.md).
#: The host's own addresses are refused on the input path instead, so addresses it gains later are refused too.
REFUSED_RANGES: dict[str, str] = {
    "0.0.0.0/8": "'this network' (RFC 791), never a destination",
    "10.0.0.0/8": "private (RFC 1918)",
    "100.64.0.0/10": "shared address space (RFC 6598): the access provider's own network behind carrier-grade NAT",
    "127.0.0.0/8": "loopback",
    "169.254.0.0/16": "link-local (RFC 3927), where cloud metadata services answer (169.254.169.254)",
    "172.16.0.0/12": "private (RFC 1918)",
    "192.168.0.0/16": "private (RFC 1918)",
    "224.0.0.0/4": "multicast",
    "240.0.0.0/4": "reserved, with the limited broadcast 255.255.255.255",
}


@dataclass(frozen=True)
class Allowance:
    """One exception to the refusals: a resolver's address, and the (transport, port) pairs it serves DNS on."""

    name: str  # what named it: `--allow` ADDRESS, a resolver profile, or `default` (the host's resolver)
    address: ipaddress.IPv4Address
    ports: tuple[tuple[str, int], ...]

    def __post_init__(self) -> None:
        # Every field goes into an nftables script: refuse anything that is not what it claims to be.
        if not isinstance(self.address, ipaddress.IPv4Address):
            raise HarnessError(f"allowance '{self.name}': {self.address!r} is not an IPv4 address")
        for transport, port in self.ports:
            if transport not in TRANSPORTS or not isinstance(port, int) or not 0 < port < 65536:
                raise HarnessError(f"allowance '{self.name}': {transport}/{port} is not a transport and port")

    def describe(self) -> str:
        ports = " ".join(f"{t}/{p}" for t, p in self.ports)
        return f"{self.name} ({self.address} {ports})" if self.name != str(self.address) else f"{self.address} {ports}"

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "address": str(self.address), "ports": [list(p) for p in self.ports]}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Allowance:
        ports = tuple((str(t), int(p)) for t, p in data["ports"])
        return cls(name=str(data["name"]), address=ipaddress.IPv4Address(data["address"]), ports=ports)


def resolver_ports(name: str, resolver: Resolver) -> tuple[tuple[str, int], ...]:
    """Where ``resolver`` serves DNS: each protocol it offers, on the port its profile names or the standard one."""
    offered = protocols_of(name)
    found = {(t, resolver.port(p)) for p in protocols() if p.name in offered for t in p.transports}
    return tuple(sorted(found))


def allowance(value: str) -> Allowance:
    """`--allow VALUE`: an IPv4 address (every registered DNS port), or a resolver profile or `default` (its own)."""
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        if not re.fullmatch(r"[a-z0-9][a-z0-9_-]{0,63}", value):
            raise HarnessError(f"--allow {value!r}: give an IPv4 address or a resolver name") from None
        resolver = load_resolver(value)  # names the known resolvers if there is none
        return Allowance(value, ipaddress.IPv4Address(resolver.address), resolver_ports(value, resolver))
    if address.version != 4:
        raise HarnessError(f"--allow {value}: {NO_IPV6}")
    kinds = {
        "a loopback": address.is_loopback,
        "a multicast": address.is_multicast,
        "an unspecified": address.is_unspecified,
        "a reserved": address.is_reserved,
    }
    kind = next((k for k, it in kinds.items() if it), None)
    if kind:
        raise HarnessError(f"--allow {value}: {kind} address, which the client namespace can never reach")
    ports = tuple(sorted({(t, p.port) for p in protocols() for t in p.transports}))
    return Allowance(value, address, ports)


def host_resolver_allowance() -> Allowance | None:
    """The host's own resolver (`default`), DNS on port 53 only; None where resolv.conf names none that works.

    Allowed without asking: it is the resolver the client namespace uses whenever no arm sets one
    (`ip netns exec` falls back to the host's resolv.conf), and a host's resolver is often private.
    """
    try:
        resolver = host_resolver()
    except HarnessError:
        return None  # `default` fails with its own message when a study names it
    return Allowance("default", ipaddress.IPv4Address(resolver.address), resolver_ports("default", resolver))


@dataclass(frozen=True)
class Firewall:
    """The Internet side's nftables table: what the client namespace may reach through the host."""

    table: str
    veth: str  # the host's end of the link to the shaper
    uplink: str  # the interface the user chose
    subnet: ipaddress.IPv4Network  # the side's /29
    refused: tuple[ipaddress.IPv4Network, ...]  # destinations refused through the uplink
    allowed: tuple[Allowance, ...] = ()

    def __post_init__(self) -> None:
        for name in (self.veth, self.uplink):
            if not IFNAME.fullmatch(name):
                raise HarnessError(f"interface '{name}' is not a Linux interface name")
        if not re.fullmatch(r"dnsstudy_[a-z0-9_]{1,8}", self.table):
            raise HarnessError(f"'{self.table}' is not a side's table name")

    @classmethod
    def build(cls, table: str, veth: str, uplink: str, subnet: ipaddress.IPv4Network, allow: Sequence[str]) -> Firewall:
        """The refusals (fixed ranges and the uplink's own networks, its LAN) and the exceptions, as of now."""
        refused = [ipaddress.IPv4Network(n) for n in REFUSED_RANGES] + netns.link_networks(uplink)
        allowed = [a for a in (host_resolver_allowance(),) if a] + [allowance(v) for v in allow]
        collapsed = tuple(ipaddress.collapse_addresses(refused))  # nftables refuses overlapping intervals
        return cls(table, veth, uplink, subnet, collapsed, tuple(allowed))

    def refusal(self, address: ipaddress.IPv4Address) -> str | None:
        """Why the firewall refuses ``address`` before exceptions (None: it is reachable)."""
        if address in netns.host_addresses():
            return "an address of the host itself"
        for net, why in REFUSED_RANGES.items():
            if address in ipaddress.IPv4Network(net):
                return why
        lan = next((net for net in self.refused if address in net), None)
        return f"on the uplink's own network {lan}" if lan else None

    def require_reachable(self, side: str, name: str, resolver: Resolver) -> None:
        """Refuse a resolver the client namespace cannot reach, saying how to allow it."""
        address = ipaddress.IPv4Address(resolver.address)
        why = self.refusal(address)
        have = {p for a in self.allowed if a.address == address for p in a.ports}
        if why is None or set(resolver_ports(name, resolver)) <= have:
            return
        raise HarnessError(
            f"resolver '{name}' ({address}) is {why}, which the Internet side '{side}' refuses: "
            f"run 'dnsstudy internet down --name {side}', then 'dnsstudy internet up ... --name {side} --allow {name}'"
        )

    def script(self) -> str:
        """The nftables script that replaces the side's table in one transaction."""
        v, up = self.veth, self.uplink
        elements = sorted({f"{a.address} . {t} . {p}" for a in self.allowed for t, p in a.ports})
        allowed = f"elements = {{ {', '.join(elements)} }}" if elements else ""
        refused = ", ".join(str(n) for n in self.refused)
        reject = "reject with icmpx admin-prohibited"  # an immediate error in the client, not a timeout
        to_allowed = "meta l4proto { tcp, udp } ip daddr . meta l4proto . th dport @allowed accept"
        return f"""table inet {self.table}
delete table inet {self.table}
table inet {self.table} {{
  set allowed {{ type ipv4_addr . inet_proto . inet_service; {allowed} }}
  set refused {{ type ipv4_addr; flags interval; elements = {{ {refused} }} }}
  counter refused_forward {{}}
  counter refused_input {{}}
  chain forward {{
    type filter hook forward priority filter; policy accept;
    iifname "{v}" meta nfproto != ipv4 drop
    iifname "{v}" ip saddr != {self.subnet} drop
    iifname "{v}" oifname != "{up}" counter name refused_forward {reject}
    iifname "{v}" {to_allowed}
    iifname "{v}" ip daddr @refused counter name refused_forward {reject}
    oifname "{v}" iifname "{up}" ct state established,related accept
    oifname "{v}" drop
  }}
  chain input {{
    type filter hook input priority filter; policy accept;
    iifname "{v}" meta nfproto != ipv4 drop
    iifname "{v}" ct state established,related accept
    iifname "{v}" {to_allowed}
    iifname "{v}" counter name refused_input {reject}
  }}
  chain postrouting {{
    type nat hook postrouting priority srcnat; policy accept;
    oifname "{up}" ip saddr {self.subnet} masquerade
  }}
}}
"""

    def to_json(self) -> dict[str, Any]:
        return {"refused": [str(n) for n in self.refused], "allowed": [a.to_json() for a in self.allowed]}


# -- ip_forward, shared by every live side -------------------------------------------------------


@contextmanager
def _forwarding_record() -> Iterator[dict[str, Any]]:
    """The record of live sides, read and written under a lock (several `internet up`s may run at once).

    The lock is on the run root directory itself: a lock file would have to outlive the last side.
    """
    RUN_ROOT.mkdir(parents=True, exist_ok=True)
    fd = os.open(RUN_ROOT, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            record = json.loads(FORWARDING_RECORD.read_text())
        except (OSError, ValueError):
            record = {}
        record.setdefault("sides", {})
        yield record
        if record["sides"]:
            tmp = FORWARDING_RECORD.with_suffix(".tmp")
            tmp.write_text(json.dumps(record, indent=1))
            tmp.replace(FORWARDING_RECORD)
        else:
            FORWARDING_RECORD.unlink(missing_ok=True)
    finally:
        os.close(fd)  # closing releases the lock


def forwarding_record() -> dict[str, Any]:
    """The live sides (name -> host veth) and the ip_forward value before the first (for status and tests)."""
    with _forwarding_record() as record:
        return json.loads(json.dumps(record))


def acquire_forwarding(side: str, veth: str) -> None:
    """Count ``side`` among the sides that need ip_forward, and turn it on.

    The first side records the value it found. When that was 0, the guard keeps the host from forwarding
    anything but the sides' own traffic; it is in place before ip_forward goes on.
    """
    if not IFNAME.fullmatch(veth):
        raise HarnessError(f"interface '{veth}' is not a Linux interface name")
    with _forwarding_record() as record:
        if not record["sides"] or record.get("original") not in ("0", "1"):
            record["original"] = IP_FORWARD.read_text().strip()
        record["sides"][side] = veth
        if record["original"] == "0":
            _nft(_guard_script(record["sides"].values()), "the forwarding guard")
        IP_FORWARD.write_text("1\n")


def release_forwarding(side: str) -> list[str]:
    """Stop counting ``side``; the last side restores ip_forward and removes the guard. Returns what it did."""
    with _forwarding_record() as record:
        if record["sides"].pop(side, None) is None:
            return []
        original = record.get("original")
        if record["sides"]:
            if original == "0":
                _nft(_guard_script(record["sides"].values()), "the forwarding guard")
            return [f"forwarding share of {side} ({len(record['sides'])} sides left)"]
        done = [f"forwarding share of {side}"]
        if original in ("0", "1") and IP_FORWARD.read_text().strip() != original:
            IP_FORWARD.write_text(f"{original}\n")
            done.append(f"ip_forward back to {original}")
        if _nft_quiet(["delete", "table", "ip", GUARD_TABLE]):
            done.append(f"nft table {GUARD_TABLE}")
        return done


def _guard_script(veths: Iterable[str]) -> str:
    """Replace the guard: drop every forwarded IPv4 packet that neither enters nor leaves by a side's veth.

    One table for all sides, rewritten as they come and go: a drop in any table is final in nftables,
    so a per-side "drop the rest" would drop the other sides' traffic.
    """
    names = sorted(set(veths))
    for name in names:
        if not IFNAME.fullmatch(name):
            raise HarnessError(f"forwarding record: '{name}' is not a Linux interface name")
    quoted = ", ".join(f'"{n}"' for n in names)
    return f"""table ip {GUARD_TABLE}
delete table ip {GUARD_TABLE}
table ip {GUARD_TABLE} {{
  counter dropped {{}}
  chain forward {{
    type filter hook forward priority filter; policy accept;
    iifname != {{ {quoted} }} oifname != {{ {quoted} }} counter name dropped drop
  }}
}}
"""


def _nft(script: str, what: str) -> None:
    done = subprocess.run(["nft", "-f", "-"], input=script, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise HarnessError(f"nft refused {what}: {done.stderr.strip()}")


def _nft_quiet(args: list[str]) -> bool:
    """Run nft; True if it succeeded (deleting what may not exist)."""
    return subprocess.run(["nft", *args], capture_output=True, timeout=30).returncode == 0


# -- the side ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class InternetConfig:
    """Names and addresses of one Internet side."""

    prefix: str
    interface: str  # the host interface traffic leaves by
    subnet: ipaddress.IPv4Network  # a /29: two point-to-point /30s
    namespaces: dict[str, str] = field(default_factory=dict)

    @property
    def host_if(self) -> str:
        return f"{self.prefix}-up"

    def address(self, offset: int) -> str:
        return str(self.subnet.network_address + offset)

    @property
    def firewall_table(self) -> str:
        return f"dnsstudy_{self.prefix.replace('-', '_')}"


def internet_config(prefix: str, interface: str, subnet: str = DEFAULT_SUBNET) -> InternetConfig:
    """Validate the names and the /29 (one-line errors naming the value)."""
    if not re.fullmatch(r"[a-z][a-z0-9-]{0,7}", prefix):
        raise HarnessError(f"name '{prefix}': use at most 8 lower-case letters, digits or '-'")
    # Linux interface names; checked because the name goes into nftables rules.
    if not IFNAME.fullmatch(interface):
        raise HarnessError(f"interface '{interface}' is not a Linux interface name")
    try:
        net = ipaddress.ip_network(subnet)
    except ValueError:
        raise HarnessError(f"subnet '{subnet}' is not an IPv4 network") from None
    if net.version != 4 or net.prefixlen != 29:
        raise HarnessError(f"subnet '{subnet}' must be an IPv4 /29")
    return InternetConfig(
        prefix=prefix,
        interface=interface,
        subnet=net,
        namespaces={"client": f"{prefix}-client", "shaper": f"{prefix}-shaper"},
    )


@dataclass
class InternetStatus:
    up: bool
    namespaces: dict[str, bool]
    interface: str

    @property
    def healthy(self) -> bool:
        return self.up and all(self.namespaces.values())

    @property
    def dead(self) -> list[str]:
        return [f"namespace {role}" for role, ok in self.namespaces.items() if self.up and not ok]


class InternetSide(Place):
    """A client namespace routed to the Internet through a shaper namespace and the host."""

    kind = "internet"

    @classmethod
    def named(cls, prefix: str) -> InternetSide:
        """The Internet side `internet up` created under ``prefix``."""
        state = RUN_ROOT / prefix / "internet.json"
        try:
            saved = json.loads(state.read_text())
        except (OSError, ValueError):
            raise HarnessError(
                f"no Internet side '{prefix}': run 'dnsstudy internet up --interface IF --name {prefix}' first"
            ) from None
        return cls(internet_config(prefix, saved["interface"], saved["subnet"]))

    def __init__(self, config: InternetConfig):
        self.config = config
        self.name = config.prefix
        self.run_dir = RUN_ROOT / config.prefix
        self.state_file = self.run_dir / "internet.json"

    @property
    def namespaces(self) -> dict[str, str]:
        return self.config.namespaces

    @property
    def up_command(self) -> str:
        return f"dnsstudy internet up --interface IF --name {self.name}"

    # The addresses: client link .0/30, host link .4/30.
    @property
    def client_address(self) -> str:
        return self.config.address(2)

    @property
    def gateway(self) -> str:
        """The shaper's client-side address: the client's next hop, and an address where no DNS answers."""
        return self.config.address(1)

    def status(self) -> InternetStatus:
        return InternetStatus(
            up=self.state_file.exists(),
            namespaces={r: netns.exists(n) for r, n in self.config.namespaces.items()},
            interface=self.config.interface,
        )

    def client_side(self) -> ClientSide:
        """The client namespace as a place for arms, browser and timer; the system CA bundle, not a lab CA."""
        return ClientSide(
            namespace=self.config.namespaces["client"],
            run_dir=self.run_dir,
            ca_file=SYSTEM_CA,
            dead_resolver=self.gateway,
            browser_trusts_ca=False,
        )

    def firewall(self) -> Firewall | None:
        """The firewall `up` installed, as it recorded it (None when the side is not up)."""
        try:
            saved = json.loads(self.state_file.read_text())["firewall"]
        except (OSError, ValueError, KeyError):
            return None
        cfg = self.config
        return Firewall(
            cfg.firewall_table,
            cfg.host_if,
            cfg.interface,
            cfg.subnet,
            tuple(ipaddress.IPv4Network(n) for n in saved["refused"]),
            tuple(Allowance.from_json(a) for a in saved["allowed"]),
        )

    def resolver(self, name: str) -> Resolver:
        """A resolver profile (profiles/resolvers/NAME.toml), or `default`: the host's own plain-DNS resolver.

        One the firewall refuses (a private address, say) is an error naming `--allow`, before any visit.
        """
        found = load_resolver(name)
        firewall = self.firewall()
        if firewall is not None:
            firewall.require_reachable(self.name, name, found)
        return found

    def resolver_names(self) -> None:
        return None  # any resolver profile: a study checks its names when it loads

    def link_ends(self) -> list[tuple[str, str]]:
        """The link ends at the host, which the harness leaves alone: only the namespaces' ends."""
        ns = self.namespaces
        return [(ns["client"], CLIENT_IF), (ns["shaper"], SHAPER_CLIENT_IF), (ns["shaper"], SHAPER_SERVER_IF)]

    def probe_peer(self) -> None:
        return None  # no echo or rate peer on the Internet: the timer's RTTs are the check there

    def describe(self) -> dict[str, str]:
        return {"place": f"{self.kind}:{self.name}", "interface": self.config.interface}

    def up(self, allow: Sequence[str] = ()) -> bool:
        """Create the firewall, namespaces, links, routes and NAT. False if already up (a no-op).

        ``allow``: addresses or resolver names the client may reach although the firewall refuses
        their range (`--allow`); the host's own resolver is always allowed, on port 53 only.
        """
        require_root("internet up")
        cfg = self.config
        if self.state_file.exists():
            if self.status().healthy:
                return False
            raise HarnessError(f"internet side '{cfg.prefix}' is broken: run 'dnsstudy internet down' first")
        if (self.run_dir / "state.json").exists():
            raise HarnessError(f"'{cfg.prefix}' is the name of a lab: choose another --name")
        with IPRoute() as ipr:
            if not ipr.link_lookup(ifname=cfg.interface):
                raise HarnessError(f"interface '{cfg.interface}' does not exist on this host")
        for ifname, net in netns.host_networks():
            if net.overlaps(cfg.subnet):
                raise HarnessError(f"subnet {cfg.subnet} collides with {net} on {ifname}: choose another /29")
        firewall = Firewall.build(cfg.firewall_table, cfg.host_if, cfg.interface, cfg.subnet, allow)
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)  # shaping daemons log here
        state = {"interface": cfg.interface, "subnet": str(cfg.subnet), "firewall": firewall.to_json()}
        self.state_file.write_text(json.dumps(state))
        try:
            # The table first: its rules name interfaces, so they hold from the moment the veth exists.
            _nft(firewall.script(), "the Internet side's table")
            self._build()
            acquire_forwarding(cfg.prefix, cfg.host_if)
        except BaseException:
            self.down()
            raise
        return True

    def _build(self) -> None:
        cfg, ns = self.config, self.config.namespaces
        for name in ns.values():
            netns.create(name)
        netns.write_hosts(ns["client"])
        a = cfg.address
        with IPRoute(netns=ns["client"]) as ipr:
            ipr.link("add", ifname=CLIENT_IF, kind="veth", peer={"ifname": SHAPER_CLIENT_IF, "net_ns_fd": ns["shaper"]})
        with IPRoute() as ipr:
            ipr.link(
                "add", ifname=cfg.host_if, kind="veth", peer={"ifname": SHAPER_SERVER_IF, "net_ns_fd": ns["shaper"]}
            )
        _configure(ns["client"], CLIENT_IF, a(2), 30, default_via=a(1))
        _configure(ns["shaper"], SHAPER_CLIENT_IF, a(1), 30)
        _configure(ns["shaper"], SHAPER_SERVER_IF, a(6), 30, default_via=a(5))
        _configure(None, cfg.host_if, a(5), 30, routes=((f"{a(0)}/30", a(6)),))
        netns.set_sysctl(ns["shaper"], "net.ipv4.ip_forward", "1")

    def down(self) -> list[str]:
        """Remove everything `up` made, whatever state it is in; the last side down restores ip_forward.

        Works from the name alone (after `lab down` of the same prefix removed the side's directory).
        A lab brought up under the name since keeps its namespaces and directory.
        """
        require_root("internet down")
        cfg, removed = self.config, []
        lab_here = (self.run_dir / "state.json").exists()
        if not lab_here:
            removed += [f"stray process {p}" for p in kill_namespace_processes(list(cfg.namespaces.values()))]
            for name in cfg.namespaces.values():
                if netns.exists(name):
                    netns.remove(name)
                    removed.append(f"namespace {name}")
        if netns.delete_host_link(cfg.host_if):  # normally it dies with the shaper namespace; a lab has none
            removed.append(f"interface {cfg.host_if}")
        removed += release_forwarding(cfg.prefix)
        for family in ("inet", "ip"):  # "ip": the NAT-only table of earlier versions
            if _nft_quiet(["delete", "table", family, cfg.firewall_table]):
                removed.append(f"nft table {family} {cfg.firewall_table}")
        if not lab_here and self.run_dir.exists():
            shutil.rmtree(self.run_dir, ignore_errors=True)
            removed.append(f"directory {self.run_dir}")
        return removed


def _configure(
    ns: str | None,
    ifname: str,
    address: str,
    prefixlen: int,
    default_via: str | None = None,
    routes: tuple[tuple[str, str], ...] = (),
) -> None:
    with IPRoute(netns=ns) if ns else IPRoute() as ipr:
        index = ipr.link_lookup(ifname=ifname)[0]
        ipr.addr("add", index=index, address=address, prefixlen=prefixlen)
        ipr.link("set", index=index, state="up")
        if default_via:
            ipr.route("add", dst="0.0.0.0/0", gateway=default_via)
        for dst, gateway in routes:
            ipr.route("add", dst=dst, gateway=gateway)
