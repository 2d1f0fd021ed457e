"""The proof that a visit's queries used the arm's transport and no other.

Two independent sources: the resolver's own per-transport query counters
(unbound's extended statistics, read without resetting them) and packet
counters on the client namespace's output path (nftables), which also see
queries that went to any other server.

A forbidden TCP transport is counted by its new connections (SYNs), not
its packets: under a shaped link the previous visit's stub or browser is
still closing its connection (FIN, ACK) when the next visit starts, and
that is not the next visit using the transport. Any query over TCP needs a
new connection, since every visit starts its arm and browser afresh.
"""

from __future__ import annotations

import ipaddress
import json
import subprocess
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness import netns
from harness.errors import HarnessError

TABLE = "dnsstudy_proof"
TRANSPORTS = ("do53", "dot", "doh")
CLIENT_COUNTERS = ("dns53_loopback", "dns53_resolver", "dns53_other", "dot_resolver", "dot_other", "dot_new_any",
                   "https_resolver", "dot_connections", "https_connections")


def resolver_counters(control_config: Path) -> dict[str, int]:
    """Queries received so far per transport: do53 (UDP and plain TCP), dot, doh."""
    done = subprocess.run(["unbound-control", "-c", str(control_config), "stats_noreset"],
                          capture_output=True, text=True, timeout=10)
    if done.returncode != 0:
        raise HarnessError(f"cannot read resolver statistics ({control_config}): {done.stderr.strip() or done.stdout.strip()}")
    raw = dict(line.split("=", 1) for line in done.stdout.splitlines() if "=" in line)
    number = lambda key: int(float(raw.get(key, "0")))  # noqa: E731
    total, tcp, tls, https = (number(k) for k in ("total.num.queries", "num.query.tcp", "num.query.tls", "num.query.https"))
    # unbound counts DoH inside tls and both inside tcp.
    return {"do53_udp": total - tcp, "do53_tcp": tcp - tls,
            "dot": tls - https, "doh": https}


def _nft(namespace: str, args: list[str], script: str | None = None) -> str:
    done = subprocess.run(netns.command(namespace, ["nft", *args]), input=script, capture_output=True,
                          text=True, timeout=10)
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["(no message)"])[0]
        raise HarnessError(f"nft in namespace {namespace} failed: {first}")
    return done.stdout


def reset_client_counters(namespace: str, resolver_address: str) -> None:
    """(Re)create the counting table in the client namespace, all counters at zero."""
    resolver = str(ipaddress.IPv4Address(resolver_address))  # validated: it goes into an nft script
    script = f"""
table inet {TABLE}
delete table inet {TABLE}
table inet {TABLE} {{
{"".join(f"  counter {name} {{ }}{chr(10)}" for name in CLIENT_COUNTERS)}
  chain out {{
    type filter hook output priority 0; policy accept;
    ip daddr 127.0.0.0/8 meta l4proto {{ tcp, udp }} th dport 53 counter name dns53_loopback
    ip daddr {resolver} meta l4proto {{ tcp, udp }} th dport 53 counter name dns53_resolver
    ip daddr != 127.0.0.0/8 ip daddr != {resolver} meta l4proto {{ tcp, udp }} th dport 53 counter name dns53_other
    tcp dport 853 tcp flags & (syn | ack) == syn counter name dot_new_any
    udp dport 853 counter name dot_new_any
    ip daddr {resolver} meta l4proto {{ tcp, udp }} th dport 853 counter name dot_resolver
    ip daddr != {resolver} tcp dport 853 tcp flags & (syn | ack) == syn counter name dot_other
    ip daddr != {resolver} udp dport 853 counter name dot_other
    ip daddr {resolver} tcp dport 443 counter name https_resolver
    ip daddr {resolver} tcp dport 853 tcp flags & (syn | ack) == syn counter name dot_connections
    ip daddr {resolver} tcp dport 443 tcp flags & (syn | ack) == syn counter name https_connections
  }}
}}
"""
    _nft(namespace, ["-f", "-"], script)


def client_counters(namespace: str) -> dict[str, int]:
    """Packets counted since the last reset, by counter name."""
    data = json.loads(_nft(namespace, ["-j", "list", "counters", "table", "inet", TABLE]))
    found = {item["counter"]["name"]: item["counter"]["packets"] for item in data["nftables"] if "counter" in item}
    return {name: found.get(name, 0) for name in CLIENT_COUNTERS}


def remove_client_counters(namespace: str) -> None:
    if netns.exists(namespace):
        subprocess.run(netns.command(namespace, ["nft", "delete", "table", "inet", TABLE]), capture_output=True, timeout=10)


@dataclass
class ArmProof:
    """How a visit's DNS traffic travelled, and whether that proves the arm."""

    protocol: str
    resolver_queries: dict[str, int] | None   # per transport, during the visit (None: no statistics)
    client_packets: dict[str, int]
    on_arm: int | None                        # resolver queries over the arm's transport
    off_arm: int | None                       # resolver queries over any other transport
    valid: bool
    reason: str = ""
    required: list[str] = field(default_factory=list)
    forbidden: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def judge(protocol: str, transport: str, before: dict[str, int] | None, after: dict[str, int] | None,
          packets: dict[str, int], required: tuple[str, ...], forbidden: tuple[str, ...]) -> ArmProof:
    """Decide whether the counters prove the arm: its transport used, no other one."""
    problems: list[str] = []
    queries = on = off = None
    if before is not None and after is not None:
        queries = {k: after[k] - before[k] for k in ("do53_udp", "do53_tcp", "dot", "doh")}
        queries["do53"] = queries["do53_udp"] + queries["do53_tcp"]
        on = queries[transport]
        off = sum(queries[t] for t in TRANSPORTS if t != transport)
        if on == 0:
            problems.append(f"the resolver received no {transport} query")
        if off:
            problems.append(f"the resolver received {off} queries over other transports")
    for name in required:
        if packets.get(name, 0) == 0:
            problems.append(f"no packets counted on {name}")
    for name in forbidden:
        if packets.get(name, 0):
            problems.append(f"{packets[name]} packets counted on {name}")
    return ArmProof(protocol=protocol, resolver_queries=queries, client_packets=packets, on_arm=on, off_arm=off,
                    valid=not problems, reason="; ".join(problems), required=list(required), forbidden=list(forbidden))
