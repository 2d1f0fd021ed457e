"""The interface every DNS arm implements, and the registry of arms by protocol.

An arm is one way the browser's DNS queries reach a resolver (plain DNS
through the system resolver, a local stub, the browser's own resolver,
...). Adding one is one new module with a `DnsArm` subclass decorated with
`register_arm` (below), imported by `harness/arms/__init__.py`.
"""

from __future__ import annotations

import ipaddress
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, Literal, TypeVar
from urllib.parse import urlsplit

from harness.errors import HarnessError
from harness.place import ClientSide, Resolver
from harness.protocols import Protocol, register_protocol

if TYPE_CHECKING:
    from harness.arms.evidence import ClientCount


@dataclass(frozen=True)
class BrowserDns:
    """What an arm asks of the browser's own DNS, browser-neutral: each `Browser` renders it in its own terms
    (Firefox: TRR preferences; Chromium: secure DNS settings and switches).

    ``system``: the browser resolves as it does by default, through what the client namespace's resolv.conf
    names (the resolver itself, or the arm's stub on loopback). ``doh``: the browser's own DNS-over-HTTPS
    client, which must never fall back to the system's, at ``uri``, reaching the server at ``bootstrap``
    without a lookup of its name; ``http3``: over HTTP/3 only.
    """

    resolver: Literal["system", "doh"] = "system"
    uri: str | None = None
    bootstrap: str | None = None
    http3: bool = False
    #: Recording only (harness/replay/recorder.py), never in a measured visit: every request goes through an
    #: HTTP(S) proxy on the client's loopback at this port.
    proxy_port: int | None = None

    def doh_server(self) -> tuple[str, int] | None:
        """The address and TCP port the browser's own DoH client sends its queries to, or None (the system's
        resolver, or DoH over HTTP/3, whose queries travel in datagrams of a long-lived QUIC connection)."""
        if self.resolver != "doh" or self.http3 or self.bootstrap is None or self.uri is None:
            return None
        return str(ipaddress.ip_address(self.bootstrap)), urlsplit(self.uri).port or 443  # as /proc's, canonical


class DnsArm(ABC):
    """One DNS transport from the browser to a resolver.

    Lifecycle: `start()` before a visit (or once for many visits when the
    arm is persistent), `problem()` after it, `stop()` at the end.
    `transport` names the resolver-side counter that proves the arm (by
    default its protocol); `client_required` and `client_forbidden` name
    client-side packet counters (see harness.arms.evidence) that must be
    non-zero and zero, derived from the protocol registry.
    """

    protocol: ClassVar[str]  # set by `register_arm`
    stubs: ClassVar[tuple[str, ...]] = ()  # the stub programs it can run, its default first
    #: The browser can speak this transport itself (`BrowserDns`), so a stub is optional: none by default, and
    #: one of `stubs` for a browser that cannot (`Browser.native_dns`).
    browser_native: ClassVar[bool] = False

    def __init__(
        self,
        resolver: Resolver,
        client: ClientSide,
        persistent: bool = False,
        idle_timeout_ms: int = 10_000,
        stub: str | None = None,
    ):
        self.resolver = resolver
        self.client = client
        self.persistent = persistent  # keep per-visit state (a stub and its connection) across visits
        self.idle_timeout_ms = idle_timeout_ms  # how long a stub keeps an idle connection to the resolver
        if stub is not None and stub not in self.stubs:
            have = ", ".join(self.stubs) or "none"
            raise HarnessError(f"the {self.protocol} arm has no stub '{stub}' (it has: {have})")
        default = None if self.browser_native or not self.stubs else self.stubs[0]
        self.stub_program = stub or default  # the stub it runs, if any
        self.set_up()

    def set_up(self) -> None:  # noqa: B027 -- optional hook, intentionally a no-op by default
        """Called at the end of construction: arms prepare their stub (nothing starts yet) or refuse a resolver."""

    @property
    def uses_stub(self) -> bool:
        """The browser's queries go to a stub on the client's loopback first."""
        return self.stub_program is not None

    @property
    def transport(self) -> str:
        return self.protocol

    @property
    def client_required(self) -> tuple[str, ...]:
        from harness.arms.evidence import required_counters

        return required_counters(self.protocol, self.uses_stub)

    @property
    def client_forbidden(self) -> tuple[str, ...]:
        from harness.arms.evidence import forbidden_counters

        return forbidden_counters(self.protocol, self.uses_stub)

    @abstractmethod
    def start(self) -> None:
        """Make the arm ready for the browser (system resolver, stub)."""

    def browser_dns(self) -> BrowserDns:
        """What this arm asks of the browser's DNS (by default: the system resolver, as resolv.conf says)."""
        return BrowserDns()

    def problem(self) -> str | None:
        """Why the arm itself is broken (a harness failure), or None if it is healthy."""
        return None

    def reset_connection(self) -> int:
        """Give the next query a new connection to the resolver, leaving resolv.conf and the rest of the arm as
        they are: called before a cold visit's counted window when the browser started just before it (a reused
        browser's new process), whose start may have asked names through the arm (Chromium's own services).
        Returns how many of the browser's own connections to the resolver were closed.

        No-op by default: plain DNS holds no connection. A stub arm restarts its stub, the one thing holding the
        connection (and its TLS session), unless the stub is persistent: keeping its connection across visits is
        what that stub is for. The browser's own DoH closes the browser's connections (`DohArm`).
        """
        return 0

    @property
    def stub_started_at(self) -> float | None:
        """When the stub now running started (monotonic seconds); None when the arm runs none."""
        return None

    def connection_unopened(self, counted: ClientCount | None) -> bool:
        """Whether the client's counters prove that no connection to the resolver has been opened through the
        arm: its stub started after they began counting, and they count no new connection over its protocol.
        Then a cold visit needs no `reset_connection`: the stub's first connection is the visit's. Never for an
        arm without a stub: a connection the browser holds can predate any count."""
        from harness.arms.evidence import opened_connections

        started = self.stub_started_at
        if counted is None or started is None or started < counted.since:
            return False
        return opened_connections(self.protocol, counted.packets) == 0

    def begin_visit(self) -> None:  # noqa: B027 -- optional hook, intentionally a no-op by default
        """Called just before the browser starts: arms that read their own logs mark where the visit begins."""

    def authentication_failed(self, trr_failure: str | None) -> bool:
        """Whether the arm's own report says TLS authentication of the resolver failed during the visit.

        ``trr_failure`` is the browser's TRR failure id from its error page (None if it showed none).
        """
        return False

    def finish_visit(self) -> None:  # noqa: B027 -- optional hook, intentionally a no-op by default
        """Called after each visit; arms with per-visit state reset it here."""

    def stop(self) -> None:  # noqa: B027 -- optional hook, intentionally a no-op by default
        """Undo `start()`."""

    def describe(self) -> dict:
        """What the visit record stores about the arm's setup."""
        return {"protocol": self.protocol, "resolver": self.resolver.name, "address": self.resolver.address}


_ARMS: dict[str, type[DnsArm]] = {}

ArmClass = TypeVar("ArmClass", bound=type[DnsArm])


def register_arm(protocol: Protocol) -> Callable[[ArmClass], ArmClass]:
    """Class decorator: the browser arm for ``protocol``."""

    def register(cls: ArmClass) -> ArmClass:
        register_protocol(protocol)
        cls.protocol = protocol.name
        _ARMS[protocol.name] = cls
        return cls

    return register


def unregister_arm(name: str) -> None:
    """Remove the arm of protocol ``name`` (for tests that register a dummy)."""
    _ARMS.pop(name, None)


def registered_arms() -> dict[str, type[DnsArm]]:
    """The arms registered so far, by protocol name (`harness.arms` imports them all)."""
    return dict(_ARMS)
