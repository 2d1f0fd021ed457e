"""The registry of DNS transports: every protocol the harness knows, and what carries each one.

A protocol is named once, here or by the module that brings it. A browser
arm (`harness/arms/`, `register_arm`) and a timer program
(`harness/timer.py`, `register_timer`) register against it in their own
families' registries; everything else reads this one: the CLI's choices, the
study file's validation, the proofs' port tables, the order of protocols in
the store (which the analysis reads), the host resolver's offer. This module
imports nothing of the project but its errors: every other module may read it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Carrier = Literal["udp", "tcp", "udp+tcp"]


@dataclass(frozen=True)
class Protocol:
    """One DNS transport between a client and a resolver."""

    name: str  # as studies, the store and the CLI spell it
    rank: int  # order in tables and figures (lower first)
    port: int  # the standard port on the resolver (RFC 7858, 8484, 9250)
    carrier: Carrier  # what carries it on that port
    encrypted: bool  # False: plain DNS, the only thing an arbitrary host resolver offers
    web_port: bool = False  # its port also carries page loads, so traffic to other hosts there proves nothing

    @property
    def transports(self) -> tuple[str, ...]:
        """'udp', 'tcp' or both, for packet filters."""
        return tuple(self.carrier.split("+"))


_PROTOCOLS: dict[str, Protocol] = {}


def register_protocol(protocol: Protocol) -> Protocol:
    """Add a protocol (registering the same one twice is a no-op; a different one under the same name is a bug)."""
    known = _PROTOCOLS.setdefault(protocol.name, protocol)
    if known != protocol:
        raise ValueError(f"protocol '{protocol.name}' is registered twice, differently: {known} and {protocol}")
    return protocol


DO53 = register_protocol(Protocol("do53", rank=0, port=53, carrier="udp+tcp", encrypted=False))
DOT = register_protocol(Protocol("dot", rank=1, port=853, carrier="tcp", encrypted=True))
DOH = register_protocol(Protocol("doh", rank=2, port=443, carrier="tcp", encrypted=True, web_port=True))
DOQ = register_protocol(Protocol("doq", rank=3, port=853, carrier="udp", encrypted=True))
DOH3 = register_protocol(Protocol("doh3", rank=4, port=443, carrier="udp", encrypted=True, web_port=True))


def unregister(name: str) -> None:
    """Remove a protocol (for tests that register a dummy)."""
    _PROTOCOLS.pop(name, None)


def protocols() -> list[Protocol]:
    """Every protocol, in rank order."""
    return sorted(_PROTOCOLS.values(), key=lambda p: (p.rank, p.name))


def names() -> list[str]:
    return [p.name for p in protocols()]


def plain_protocols() -> list[str]:
    """Unencrypted protocols: all a host's own resolver is assumed to serve."""
    return [p.name for p in protocols() if not p.encrypted]
