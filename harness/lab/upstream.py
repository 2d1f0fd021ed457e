"""The delayed path between recursive lab resolvers and the lab authoritative.

Packets between a recursive resolver's address and the authoritative's go
through an NFQUEUE queue served by the project's delayer (delayer/), which
holds each for half the configured round-trip time. The rules have no
--queue-bypass: if the delayer dies, the resolver's upstream goes silent and
the lab reports it, rather than answering faster than documented.
"""

from __future__ import annotations

from harness import netns
from harness.accounts import NFQUEUE, helper
from harness.errors import HarnessError
from harness.lab.config import LabConfig, RecursiveResolver
from harness.paths import built_program

QUEUE_BASE = 100


def queue_of(index: int) -> int:
    return QUEUE_BASE + index


def delayer_argv(index: int, resolver: RecursiveResolver, stats: str) -> list[str]:
    """The delayer for one resolver: each direction gets half the round trip."""
    half_us = int(resolver.upstream_rtt_ms * 1000 / 2)
    jitter_us = int(resolver.upstream_jitter_ms * 1000 / 2)
    account = helper()  # it reads packets off the wire: unprivileged, keeping only NFQUEUE
    argv = [
        account.program(built_program("nfqdelay")),
        f"-queue={queue_of(index)}",
        f"-delay={half_us}us",
        f"-jitter={jitter_us}us",
        f"-stats={stats}",
    ]
    return account.run_as(argv, keep=(NFQUEUE,))


def _rules(config: LabConfig, index: int) -> list[list[str]]:
    resolver = config.addresses.resolver(index)
    auth = config.addresses.auth
    queue = str(queue_of(index))
    rules = []
    # Only resolver -> auth:53 and auth:53 -> resolver. Ports matter: the
    # kernel gives the DoQ front's own queries to the resolver the auth's
    # address as source (the namespace's first), and those must not be delayed.
    for proto in ("udp", "tcp"):
        for src, dst, port in ((resolver, auth, "--dport"), (auth, resolver, "--sport")):
            # Resolver and authoritative share the server namespace, so their
            # packets cross loopback and meet PREROUTING on the receiving side.
            rules.append(
                [
                    "-t",
                    "mangle",
                    "-A",
                    "PREROUTING",
                    "-s",
                    src,
                    "-d",
                    dst,
                    "-p",
                    proto,
                    port,
                    "53",
                    "-j",
                    "NFQUEUE",
                    "--queue-num",
                    queue,
                ]
            )
    return rules


def install_rules(config: LabConfig, index: int) -> None:
    ns = config.namespaces["server"]
    for rule in _rules(config, index):
        result = netns.run(ns, ["iptables", "-w", *rule], check=False)
        if result.returncode != 0:
            raise HarnessError(f"iptables in {ns} refused {' '.join(rule)}: {result.stderr.strip()}")
