"""The registry of DNS transports: every protocol the harness knows, and what carries each one.

A protocol is named once, here or by the module that brings it. A browser
arm (`harness/arms/`) and a timer program (`harness/timer.py`) register
against it; everything else reads this registry: the CLI's choices, the
study file's validation, the proofs' port tables, the order of protocols in
the store (which the analysis reads), the host resolver's offer. A new
transport is one module that calls `register_protocol` and `register_arm`
or `register_timer`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, TypeVar

from harness.errors import HarnessError

if TYPE_CHECKING:
    from pathlib import Path

    from harness.arms.base import DnsArm, Resolver
    from harness.timer import TimerSettings

#: A timer program's command-line builder: (protocol, resolver, CA file, settings) -> argv.
TimerArgv = Callable[["str", "Resolver", "Path", "TimerSettings"], list[str]]

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
_ARMS: dict[str, type[DnsArm]] = {}
_TIMERS: dict[str, TimerArgv] = {}

ArmClass = TypeVar("ArmClass", bound="type[DnsArm]")


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


def register_arm(protocol: Protocol) -> Callable[[ArmClass], ArmClass]:
    """Class decorator: the browser arm for ``protocol``."""

    def register(cls: ArmClass) -> ArmClass:
        register_protocol(protocol)
        cls.protocol = protocol.name
        _ARMS[protocol.name] = cls
        return cls

    return register


def register_timer(protocol: Protocol, build_argv: TimerArgv) -> None:
    """The resolution-timer program for ``protocol``: a function that builds its command line."""
    register_protocol(protocol)
    _TIMERS[protocol.name] = build_argv


def unregister(name: str) -> None:
    """Remove a protocol and its arm and timer (for tests that register a dummy)."""
    _PROTOCOLS.pop(name, None)
    _ARMS.pop(name, None)
    _TIMERS.pop(name, None)


def _load() -> None:
    """Import the modules that register arms and timers (lazily: they import this module)."""
    import harness.arms  # noqa: F401
    import harness.timer  # noqa: F401


def protocols() -> list[Protocol]:
    """Every protocol, in rank order."""
    _load()
    return sorted(_PROTOCOLS.values(), key=lambda p: (p.rank, p.name))


def names() -> list[str]:
    return [p.name for p in protocols()]


def browser_protocols() -> list[str]:
    """Protocols a browser visit can use: those with an arm."""
    return [p.name for p in protocols() if p.name in _ARMS]


def timer_protocols() -> list[str]:
    """Protocols the resolution timer can time."""
    return [p.name for p in protocols() if p.name in _TIMERS]


def plain_protocols() -> list[str]:
    """Unencrypted protocols: all a host's own resolver is assumed to serve."""
    return [p.name for p in protocols() if not p.encrypted]


def arm_class(name: str) -> type[DnsArm]:
    _load()
    try:
        return _ARMS[name]
    except KeyError:
        raise HarnessError(
            f"unknown protocol '{name}' for a visit: choose one of {', '.join(browser_protocols())}"
        ) from None


def timer_program(name: str) -> TimerArgv:
    _load()
    try:
        return _TIMERS[name]
    except KeyError:
        raise HarnessError(f"unknown protocol '{name}' (choose from {', '.join(timer_protocols())})") from None
