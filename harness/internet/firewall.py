"""`Firewall`: the Internet side's nftables table, what the client namespace may reach through the host.

The host forwards the side's own /29 out of the interface the user chose and
nothing else: no other interface, no private, shared, link-local, loopback or
multicast destination, not the uplink's own network, and nothing of the host
itself, except the resolvers the side was brought up with (`Allowance`).
docs/security.md says what the client can reach.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from harness import netns
from harness.errors import HarnessError
from harness.internet.nft import IFNAME
from harness.place import Resolver
from harness.protocols import protocols
from harness.resolvers import NO_IPV6, host_resolver, load_resolver, protocols_of

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
