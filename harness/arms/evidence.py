"""The proof that a visit's queries used the arm's transport and no other.

Two independent sources: the resolver's own per-transport query counters
(unbound's extended statistics, read without resetting them) and packet
counters on the client namespace's output path (nftables), which also see
queries that went to any other server.

The client-side counters are built from the protocol registry: for each
protocol, packets to the resolver on its port, new connections to the
resolver there, and new connections to any other address there. A
forbidden transport is counted by its new connections (SYNs, or any
datagram), not its packets: under a shaped link the previous visit's stub
or browser is still closing its connection (FIN, ACK) when the next visit
starts, and that is not the next visit using the transport. Any query over
TCP needs a new connection, since every visit starts its arm and browser
afresh.
"""

from __future__ import annotations

import ipaddress
import json
import math
import socket
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from harness.errors import HarnessError
from harness.netns import nft
from harness.protocols import DO53, DOH, DOT, Protocol, names, protocols

if TYPE_CHECKING:
    from harness.place import Resolver

TABLE = "dnsstudy_proof"
#: How long a resolver's statistics may take: unbound answers in milliseconds unless it hangs.
CONTROL_TIMEOUT_S = 10
STUB_COUNTER = "stub_loopback"  # plain DNS to a stub on 127.0.0.0/8:53


ICMP_COUNTER = "icmp_unreachable"  # "destination unreachable" received: a port or host refused on the path
#: Outbound counters per protocol (see `_protocol_rules`), then inbound ones (see `_reply_rules`).
OUT_KINDS = ("resolver", "connections", "other")
IN_KINDS = ("accepted", "refused", "answered")


def client_counter_names() -> list[str]:
    """Every client-side counter: per protocol of the registry, where its packets went and what came back."""
    per_protocol = [f"{p.name}_{kind}" for p in protocols() for kind in OUT_KINDS + IN_KINDS]
    fallbacks = [f"{p.name}_fallback" for p in protocols() if p.carrier == "udp"]
    initials = [f"{p.name}_initials" for p in protocols() if p.carrier == "udp" and p.encrypted]
    return [STUB_COUNTER, ICMP_COUNTER] + per_protocol + fallbacks + initials


def forbidden_counters(protocol: str, uses_stub: bool) -> tuple[str, ...]:
    """Client counters that must stay at zero for an arm of ``protocol``.

    No new connection (or datagram) to the resolver over any other protocol's port, no query to
    any other server on a DNS port (ports shared with the web excepted), and no stub unless the arm runs one.
    """
    others = [f"{p.name}_connections" for p in protocols() if p.name != protocol]
    elsewhere = [f"{p.name}_other" for p in protocols() if not p.web_port]
    return tuple(others + elsewhere + ([] if uses_stub else [STUB_COUNTER]))


def required_counters(protocol: str, uses_stub: bool) -> tuple[str, ...]:
    """Client counters that must be non-zero: packets to the resolver on the protocol's port (and to the stub)."""
    return ((STUB_COUNTER,) if uses_stub else ()) + (f"{protocol}_resolver",)


def resolver_counters(control_config: Path) -> dict[str, int]:
    """Queries an unbound resolver received so far per transport it counts: do53 (UDP and plain TCP), dot, doh."""
    raw = dict(
        line.split("=", 1) for line in _unbound_control(control_config, "stats_noreset").splitlines() if "=" in line
    )
    number = lambda key: int(float(raw.get(key, "0")))  # noqa: E731
    total, tcp, tls, https = (
        number(k) for k in ("total.num.queries", "num.query.tcp", "num.query.tls", "num.query.https")
    )
    # unbound counts DoH inside tls and both inside tcp.
    return {f"{DO53.name}_udp": total - tcp, f"{DO53.name}_tcp": tcp - tls, DOT.name: tls - https, DOH.name: https}


def _unbound_control(control_config: Path, command: str) -> str:
    """What a lab resolver's remote control answers to ``command``, as `unbound-control -c CONFIG COMMAND` prints
    it. Spoken on the control socket the config names, unencrypted (harness/lab/unbound.py): spawning
    unbound-control took 10 ms a reading against 0.3 ms, and each visit reads twice."""
    path = _control_socket(control_config)
    try:
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as control:
            control.settimeout(CONTROL_TIMEOUT_S)
            control.connect(path)
            control.sendall(f"UBCT1 {command}\n".encode())  # unbound's control protocol, version 1
            answer = b"".join(iter(lambda: control.recv(65536), b""))
    except TimeoutError:
        # A frozen resolver (SIGSTOP, a deadlock) still looks alive in /proc: the timeout is what shows it.
        # The control file is named after the resolver's daemon (resolver-NAME.conf).
        raise HarnessError(
            f"{control_config.stem} does not answer: {command} timed out after {CONTROL_TIMEOUT_S} s ({path})"
        ) from None
    except OSError as exc:
        raise HarnessError(f"cannot read resolver statistics ({path}): {exc.strerror or exc}") from None
    text = answer.decode(errors="replace")
    if not text or text.startswith("error"):
        raise HarnessError(f"cannot read resolver statistics ({path}): {(text.splitlines() or ['no answer'])[0]}")
    return text


def _control_socket(control_config: Path) -> str:
    """The unix socket a lab resolver's config names as its control interface."""
    try:
        lines = control_config.read_text().splitlines()
    except OSError as exc:
        raise HarnessError(f"cannot read resolver statistics: {control_config}: {exc.strerror}") from None
    for line in lines:
        key, _, value = line.strip().partition(":")
        value = value.strip().strip('"')
        if key == "control-interface" and value.startswith("/"):
            return value
    raise HarnessError(f"{control_config}: no control-interface on a unix socket (harness/lab/unbound.py writes one)")


def _reply_rules(p: Protocol, resolver: str, port: int) -> list[str]:
    """What came back from the resolver's port: connections accepted (SYN-ACK) or refused (RST), and
    packets that carried data (any datagram; a TCP segment longer than the largest header, 80 bytes).
    These tell a blocked port from a silent server from one that spoke and was then refused."""
    rules = []
    for l4 in p.transports:
        source = f"ip saddr {resolver} {l4} sport {port}"
        if l4 == "tcp":
            rules += [
                f"{source} tcp flags & (syn | ack) == syn | ack counter name {p.name}_accepted",
                f"{source} tcp flags & rst == rst counter name {p.name}_refused",
                f"{source} ip length > 80 counter name {p.name}_answered",
            ]
        else:
            rules += [f"{source} counter name {p.name}_answered"]
    return rules


def _protocol_rules(p: Protocol, resolver: str, port: int) -> list[str]:
    """Counting rules of one protocol: any packet to the resolver on its port; new connections
    (SYN, or any datagram) to the resolver; new connections to any other non-loopback address.

    New connections, not packets: under a shaped link the previous visit's connection is still
    closing (FIN, ACK) when the next visit starts, and that is not this visit using the transport.
    """
    rules = []
    for l4 in p.transports:
        new = "tcp flags & (syn | ack) == syn " if l4 == "tcp" else ""
        rules += [
            f"ip daddr {resolver} {l4} dport {port} counter name {p.name}_resolver",
            f"ip daddr {resolver} {l4} dport {port} {new}counter name {p.name}_connections",
            f"ip daddr != 127.0.0.0/8 ip daddr != {resolver} {l4} dport {p.port} {new}counter name {p.name}_other",
        ]
    if p.carrier == "udp":  # attempts at the TCP twin of a QUIC port (DoH3's HTTP/2 fallback), for the record
        syn = "tcp flags & (syn | ack) == syn"
        rules.append(f"ip daddr {resolver} tcp dport {port} {syn} counter name {p.name}_fallback")
    if p.carrier == "udp" and p.encrypted:  # datagrams opening with a QUIC v1 Initial: only a handshake sends them
        initial = "@th,64,8 & 0xf0 == 0xc0"  # the first byte after the UDP header: long header, type Initial
        rules.append(f"ip daddr {resolver} udp dport {port} {initial} counter name {p.name}_initials")
    return rules


#: The counting table this process last loaded in each namespace (its script): a visit whose table would be the
#: same only zeroes its counters (5 ms against 16 ms for a new table, 2026-11-29). Only the process that runs a
#: place's visits loads its table (a crawl holds the place's lock); a table gone (the lab made again) is loaded anew.
#: The reset zeroes the counters one by one, before the visit's window opens.
_LOADED: dict[str, str] = {}
#: When each namespace's counters were last zeroed (a reset, or a reading, which zeroes them too): monotonic
#: seconds, taken once the zeroing returned, so whatever started after it is counted in full.
_ZEROED: dict[str, float] = {}


@dataclass(frozen=True)
class ClientCount:
    """What the client's counters counted from a moment on: ``packets`` by counter name, counted since ``since``
    (monotonic seconds) or earlier."""

    packets: dict[str, int]
    since: float


def reset_client_counters(namespace: str, resolver: Resolver) -> ClientCount | None:
    """Zero the counting table in the client namespace, (re)created unless it is the one this process loaded.

    Traffic to and from the resolver is counted on the ports it serves each protocol on; traffic to
    other servers on the protocols' standard ports. Returns what the table counted before the zeroing, since
    it was last read or zeroed (between two visits: since the last one's window closed); None when it was made
    anew, or is not all this code's.
    """
    script = _counting_table(resolver)
    if _LOADED.get(namespace) == script:
        try:
            return _read_and_zero(namespace)
        except HarnessError:  # the table is gone (made anew below), or not all ours (refused at the reading)
            pass
    _LOADED.pop(namespace, None)
    nft(namespace, ["-f", "-"], script)
    _ZEROED[namespace] = time.monotonic()
    _LOADED[namespace] = script
    return None


def _counting_table(resolver: Resolver) -> str:
    """The nft script that makes the counting table anew for ``resolver``, its counters at zero. Every counter is
    named: `nft reset counters` zeroes named counters only (an anonymous one would keep counting across visits)."""
    address = str(ipaddress.IPv4Address(resolver.address))  # validated: it goes into an nft script
    out = [f"ip daddr 127.0.0.0/8 meta l4proto {{ tcp, udp }} th dport {DO53.port} counter name {STUB_COUNTER}"]
    out += [rule for p in protocols() for rule in _protocol_rules(p, address, resolver.port(p))]
    # Not from loopback: a stub answering a query the browser gave up on draws a port unreachable there.
    into = [f"ip saddr != 127.0.0.0/8 icmp type destination-unreachable counter name {ICMP_COUNTER}"]
    into += [rule for p in protocols() for rule in _reply_rules(p, address, resolver.port(p))]
    counters = "".join(f"  counter {name} {{ }}\n" for name in client_counter_names())
    return f"""
table inet {TABLE}
delete table inet {TABLE}
table inet {TABLE} {{
{counters}  chain out {{
    type filter hook output priority 0; policy accept;
{_lines(out)}  }}
  chain in {{
    type filter hook input priority 0; policy accept;
{_lines(into)}  }}
}}
"""


def _lines(rules: list[str]) -> str:
    return "".join(f"    {rule}\n" for rule in rules)


def client_counters(namespace: str) -> dict[str, int]:
    """Packets counted since the last reset or reading, by counter name; the counters are zeroed as they are read,
    so what counts between two visits is the next reset's to say (`reset_client_counters`)."""
    return _read_and_zero(namespace).packets


def _read_and_zero(namespace: str) -> ClientCount:
    """The counters' values, each zeroed as it is read (`nft reset counters` prints what it zeroed)."""
    since = _ZEROED.get(namespace, -math.inf)
    data = json.loads(nft(namespace, ["-j", "reset", "counters", "table", "inet", TABLE]))
    _ZEROED[namespace] = time.monotonic()
    found = {item["counter"]["name"]: item["counter"]["packets"] for item in data["nftables"] if "counter" in item}
    # A counter missing is a table this code did not load (another version's, another process's): nothing it
    # did not count may read as zero.
    if missing := [name for name in client_counter_names() if name not in found]:
        raise HarnessError(f"the counting table {TABLE} in namespace {namespace} lacks counters {', '.join(missing)}")
    return ClientCount({name: found[name] for name in client_counter_names()}, since)


def opened_connections(protocol: str, packets: dict[str, int]) -> int:
    """New connections to the resolver over ``protocol`` in ``packets``: TCP SYNs; for QUIC, datagrams carrying an
    Initial (only a handshake sends them) and SYNs to its TCP twin (HTTP/3's fallback). 0 for plain DNS."""
    p = next(q for q in protocols() if q.name == protocol)
    if not p.encrypted:
        return 0
    if p.carrier == "tcp":
        return packets.get(f"{protocol}_connections", 0)
    return packets.get(f"{protocol}_initials", 0) + packets.get(f"{protocol}_fallback", 0)


@dataclass
class ArmProof:
    """How a visit's DNS traffic travelled, and whether that proves the arm."""

    protocol: str
    resolver_queries: dict[str, int] | None  # per transport, during the visit (None: no statistics)
    client_packets: dict[str, int]
    on_arm: int | None  # resolver queries over the arm's transport
    off_arm: int | None  # resolver queries over any other transport
    valid: bool
    reason: str = ""
    required: list[str] = field(default_factory=list)
    forbidden: list[str] = field(default_factory=list)
    other_transport: bool = False  # queries went another way than the arm's: the visit is invalid, whatever else

    def to_dict(self) -> dict:
        return asdict(self)


def judge(
    protocol: str,
    transport: str,
    before: dict[str, int] | None,
    after: dict[str, int] | None,
    packets: dict[str, int],
    required: tuple[str, ...],
    forbidden: tuple[str, ...],
) -> ArmProof:
    """Decide whether the counters prove the arm: its transport used, no other one."""
    problems: list[str] = []
    queries = on = off = None
    if before is not None and after is not None:
        queries = {k: after[k] - before.get(k, 0) for k in after}
        # Do53 is counted per carrier; the proof wants the sum.
        queries[DO53.name] = queries[f"{DO53.name}_udp"] + queries[f"{DO53.name}_tcp"]
        counted = [t for t in queries if t in names()]
        on = queries.get(transport, 0)
        off = sum(queries[t] for t in counted if t != transport)
        if on == 0:
            problems.append(f"the resolver received no {transport} query")
        if off:
            problems.append(f"the resolver received {off} queries over other transports")
    for name in required:
        if packets.get(name, 0) == 0:
            problems.append(f"no packets counted on {name}")
    leaked = [name for name in forbidden if packets.get(name, 0)]
    problems += [f"{packets[name]} packets counted on {name}" for name in leaked]
    return ArmProof(
        protocol=protocol,
        resolver_queries=queries,
        client_packets=packets,
        on_arm=on,
        off_arm=off,
        valid=not problems,
        reason="; ".join(problems),
        required=list(required),
        forbidden=list(forbidden),
        other_transport=bool(off) or bool(leaked),
    )


def path_failure(protocol: str, packets: dict[str, int], authentication_failed: bool) -> str | None:
    """Why the arm's transport failed on the path, from what the client saw: a cause such as
    "connect-timeout", "reset", "unreachable", "timeout" or "tls-auth"; None when the client never
    tried the transport (then our own part failed) or nothing observed explains the failure.

    Called only once the transport is known to have failed (docs/visit.md has the decision table).
    """
    p = next(q for q in protocols() if q.name == protocol)
    count = lambda kind: packets.get(f"{protocol}_{kind}", 0)  # noqa: E731
    if not count("connections"):
        return None
    if not count("answered"):
        if count("refused"):
            return "reset"
        if packets.get(ICMP_COUNTER, 0) and not count("accepted"):
            return "unreachable"
        if p.carrier == "tcp" and not count("accepted"):
            return "connect-timeout"
        if p.carrier == "udp" and p.encrypted:
            return "connect-timeout"  # QUIC: not even the handshake was answered
        return "timeout"  # accepted (or plain DNS sent over UDP), and not a byte came back
    if authentication_failed:  # the server spoke TLS, and the client refused what it said
        return "tls-auth"
    if count("refused"):
        return "reset"
    return None


@dataclass
class ResolverConnections:
    """How a visit reached its resolver, from the client's counters: new connections, and whether its queries
    went on a connection open before it (a warm one)."""

    handshakes: int | None  # new connections to the resolver (TCP SYNs); None for plain DNS and QUIC (see below)
    first_query_open: bool | None  # the first query used an open connection; None where the counters cannot say

    @classmethod
    def count(cls, protocol: str, packets: dict[str, int], warm: bool) -> ResolverConnections:
        """TCP: handshakes are SYNs. QUIC: a handshake sends one or more Initial datagrams, so the count is not
        one of handshakes, but none means none. With none, every query went on an open connection; with some
        and no connection open before (cold), the first query opened one; warm with some: ambiguous."""
        p = next(q for q in protocols() if q.name == protocol)
        if not p.encrypted or not packets.get(f"{protocol}_resolver"):
            return cls(None, None)
        opened = packets.get(f"{protocol}_connections" if p.carrier == "tcp" else f"{protocol}_initials", 0)
        handshakes = opened if p.carrier == "tcp" else None
        return cls(handshakes, True if not opened else (None if warm else False))
