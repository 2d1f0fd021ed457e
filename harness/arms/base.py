"""The interface every DNS arm implements, and the places and resolvers it works with.

An arm is one way the browser's DNS queries reach a resolver (plain DNS
through the system resolver, a local stub, the browser's own resolver,
...). Adding one is one new module with a `DnsArm` subclass decorated with
`harness.protocols.register_arm`, imported by `harness/arms/__init__.py`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar
from urllib.parse import urlsplit

from harness import netns
from harness.errors import HarnessError

if TYPE_CHECKING:
    from harness.protocols import Protocol


@dataclass(frozen=True)
class Resolver:
    """One resolver and its endpoints for every transport."""

    name: str
    address: str  # Do53 and DoT address (and DoH bootstrap)
    tls_name: str  # name its certificate carries (DoT authentication, DoH host)
    doh_uri: str
    control_config: Path | None = None  # a lab resolver's unbound config: its statistics prove transports
    doq_port: int | None = None  # DNS over QUIC (RFC 9250) on `address`, if served
    doh3_uri: str | None = None  # DNS over HTTP/3, if served

    def port(self, protocol: Protocol) -> int:
        """Where this resolver serves ``protocol``: the port its endpoint names, else the standard one."""
        named = {
            "doh": urlsplit(self.doh_uri).port,
            "doq": self.doq_port,
            "doh3": urlsplit(self.doh3_uri).port if self.doh3_uri else None,
        }
        return named.get(protocol.name) or protocol.port


@dataclass(frozen=True)
class ClientSide:
    """Where the browser runs: the lab's client namespace, or the Internet side's."""

    namespace: str
    run_dir: Path  # per-lab run-time directory (stub configs, logs)
    ca_file: Path  # the CA that signs resolver certificates
    dead_resolver: str  # an address where no DNS server answers
    browser_trusts_ca: bool = True  # import ca_file into Firefox (a lab CA); False: Firefox's own roots
    system_resolver: str | None = None  # the namespace's resolver between visits (None: the host's resolv.conf)

    def set_system_resolver(self, address: str) -> None:
        """Point the namespace's resolv.conf at ``address`` (`ip netns exec` bind-mounts it)."""
        self._write_resolv_conf(f"# written by dnsstudy for the visit's DNS arm\nnameserver {address}\n")

    def restore_system_resolver(self) -> None:
        """Undo the arms' resolv.conf: after a visit (or a killed crawl) the namespace resolves as it did before."""
        if self.system_resolver is None:
            (netns.ETC_NETNS / self.namespace / "resolv.conf").unlink(missing_ok=True)
        else:
            self._write_resolv_conf(f"# written by dnsstudy lab\nnameserver {self.system_resolver}\n")

    def _write_resolv_conf(self, text: str) -> None:
        etc = netns.ETC_NETNS / self.namespace
        etc.mkdir(parents=True, exist_ok=True)
        tmp = etc / "resolv.conf.tmp"
        tmp.write_text(text)
        tmp.replace(etc / "resolv.conf")


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
    uses_stub: ClassVar[bool] = False  # the browser's queries go to a stub on the client's loopback first
    stubs: ClassVar[tuple[str, ...]] = ()  # the stub programs it can run, its default first

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
        self.stub_program = stub or (self.stubs[0] if self.stubs else None)  # the stub it runs, if any
        self.set_up()

    def set_up(self) -> None:  # noqa: B027 -- optional hook, intentionally a no-op by default
        """Called at the end of construction: arms prepare their stub (nothing starts yet) or refuse a resolver."""

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

    def firefox_prefs(self) -> dict[str, bool | int | str]:
        """Preferences this arm needs in the visit's profile."""
        return {"network.trr.mode": 5}  # TRR off: Firefox uses the system resolver

    def problem(self) -> str | None:
        """Why the arm itself is broken (a harness failure), or None if it is healthy."""
        return None

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
