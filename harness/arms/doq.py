"""DoQ: dnsproxy on 127.0.0.1:53 of the client namespace, DNS over QUIC (RFC 9250) to the resolver.

Firefox has no DoQ of its own; like Kosek et al. (IMC 2022), the system
resolver points at a local dnsproxy whose upstream is the resolver's DoQ
endpoint. A new stub per visit (its QUIC connection, and handshake, with
it) unless the arm is persistent, as for DoT. The lab serves DoQ from a
dnsproxy front beside unbound that relays over Do53 on the resolver's own
address, so a lab resolver counts these queries as Do53; the client's
counters prove that nothing but QUIC left the client.
"""

from __future__ import annotations

from harness.arms.base import DnsArm, register_arm
from harness.arms.dnsproxy import STAMP_DOQ, STUB_ADDRESS, DnsproxyStub, log_size, stamp, verify_failed_since
from harness.errors import HarnessError
from harness.protocols import DO53, DOQ


@register_arm(DOQ)
class DoqArm(DnsArm):
    uses_stub = True
    stubs = ("dnsproxy",)

    def set_up(self) -> None:
        resolver, client = self.resolver, self.client
        if resolver.doq_port is None:
            raise HarnessError(f"resolver '{resolver.name}' serves no DoQ (its profile names no doq_port)")
        upstream = stamp(STAMP_DOQ, resolver.address, resolver.port(DOQ), resolver.tls_name)
        self.proxy = DnsproxyStub(f"doq-stub-{resolver.name}", client, upstream)
        self.log_mark = 0

    @property
    def transport(self) -> str:
        """The lab's QUIC front relays to unbound over Do53: that is what the resolver counts."""
        return DO53.name

    def start(self) -> None:
        if self.proxy.alive():
            return  # persistent stub, still running
        self.client.set_system_resolver(STUB_ADDRESS)
        self.proxy.start()

    def problem(self) -> str | None:
        return None if self.proxy.alive() else "the DoQ stub (dnsproxy) is not running"

    @property
    def stub_started_at(self) -> float | None:
        return self.proxy.started_at

    def reset_connection(self) -> int:
        if not self.persistent:
            self.proxy.restart()
        return 0  # the stub's connection is new; the browser holds none

    def begin_visit(self) -> None:
        self.log_mark = log_size(self.proxy.log)

    def authentication_failed(self, trr_failure: str | None) -> bool:
        return verify_failed_since(self.proxy.log, self.log_mark)

    def finish_visit(self) -> None:
        if not self.persistent:
            self.stop()

    def stop(self) -> None:
        self.proxy.stop()

    def describe(self) -> dict:
        return {
            **super().describe(),
            "stub": "dnsproxy",
            "upstream": self.proxy.upstream,
            "port": self.resolver.port(DOQ),
            "stub_persistent": self.persistent,
        }
