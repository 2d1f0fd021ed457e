"""DoH3: Firefox's own resolver (TRR, mode 3) over HTTP/3 to the resolver's DoH3 endpoint.

Firefox tries HTTP/3 first for its TRR server with `network.trr.force_http3_first`,
and falls back to HTTP/2 over TCP when HTTP/3 fails. The arm measures DoH
over HTTP/3 and nothing else: while it runs, a rule in the client
namespace answers any TCP connection to the endpoint's port with a reset
(the attempts are counted, `doh3_fallback`), so a visit either resolved
over HTTP/3 or failed. The proof demands QUIC packets to the endpoint and
forbids every other transport. Page loads keep to HTTP/2: the web servers
offer nothing else.
Firefox turns HTTP/3 off when it finds a root CA that is not its own
(`network.http.http3.disable_when_third_party_roots_found`), which is what
the lab's CA is, so the arm allows it where the browser trusts the lab CA.
The lab serves DoH3 from a dnsproxy front that relays over Do53, which is
what a lab resolver counts.
A browser that has no DoH over HTTP/3 of its own (Chromium: `Browser.native_dns`)
gets the stub instead, as for DoQ: dnsproxy on 127.0.0.1:53 with the endpoint
as a DoH upstream over HTTP/3 (`--http3`, a DNS stamp: no bootstrap lookup);
the same TCP reset keeps it on QUIC.
"""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from harness.arms.base import BrowserDns, DnsArm, register_arm
from harness.arms.dnsproxy import STAMP_DOH, STUB_ADDRESS, DnsproxyStub, log_size, stamp, verify_failed_since
from harness.arms.doh import COULD_NOT_CONNECT, DOH_CERTIFICATE_FAILED
from harness.errors import HarnessError
from harness.netns import nft
from harness.protocols import DO53, DOH3

TABLE = "dnsstudy_doh3_only"
_DELETE = f"table inet {TABLE}\ndelete table inet {TABLE}\n"  # (re)created empty first: idempotent


@register_arm(DOH3)
class Doh3Arm(DnsArm):
    browser_native = True  # Firefox's TRR speaks it; a browser that cannot gets the stub
    stubs = ("dnsproxy",)

    def set_up(self) -> None:
        self.proxy: DnsproxyStub | None = None
        self.log_mark = 0
        if self.stub_program == "dnsproxy":
            uri = urlsplit(self._uri())
            upstream = stamp(STAMP_DOH, self.resolver.address, self.resolver.port(DOH3), uri.hostname or "", uri.path)
            self.proxy = DnsproxyStub(f"doh3-stub-{self.resolver.name}", self.client, upstream, http3=True)

    @property
    def transport(self) -> str:
        """The lab's QUIC front relays to unbound over Do53: that is what the resolver counts."""
        return DO53.name

    def _uri(self) -> str:
        if self.resolver.doh3_uri is None:
            raise HarnessError(f"resolver '{self.resolver.name}' serves no DoH3 (its profile names no doh3_uri)")
        return self.resolver.doh3_uri

    def start(self) -> None:
        self._uri()
        if self.proxy is not None:
            self.client.set_system_resolver(STUB_ADDRESS)
            if not self.proxy.alive():
                self.proxy.start()
        else:  # anything that bypassed TRR would meet a dead resolver and show in the counters
            self.client.set_system_resolver(self.client.dead_resolver)
        address = str(ipaddress.IPv4Address(self.resolver.address))  # validated: it goes into an nft script
        rule = f"ip daddr {address} tcp dport {self.resolver.port(DOH3)} reject with tcp reset"
        # After the proof's counters (priority 0), so the fallback attempts are still counted.
        chain = f"  chain out {{\n    type filter hook output priority 10; policy accept;\n    {rule}\n  }}\n"
        nft(self.client.namespace, ["-f", "-"], f"{_DELETE}table inet {TABLE} {{\n{chain}}}\n")

    def problem(self) -> str | None:
        if self.proxy is not None and not self.proxy.alive():
            return "the DoH3 stub (dnsproxy) is not running"
        return None

    @property
    def stub_started_at(self) -> float | None:
        return self.proxy.started_at if self.proxy is not None else None

    def reset_connection(self) -> int:
        """The stub restarted (the TCP reset rule stays); without a stub the connection is the browser's own."""
        if self.proxy is not None and not self.persistent:
            self.proxy.restart()
        return 0  # the stub's connection is new; the browser holds none

    def begin_visit(self) -> None:
        if self.proxy is not None:
            self.log_mark = log_size(self.proxy.log)

    def finish_visit(self) -> None:
        if self.proxy is not None and not self.persistent:
            self.proxy.stop()

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
        nft(self.client.namespace, ["-f", "-"], _DELETE)

    def browser_dns(self) -> BrowserDns:
        """The browser's own DoH over HTTP/3 only; with a stub, the system resolver (the stub on loopback)."""
        if self.proxy is not None:
            return BrowserDns()
        return BrowserDns("doh", uri=self._uri(), bootstrap=self.resolver.address, http3=True)

    def authentication_failed(self, trr_failure: str | None) -> bool:
        """The stub logged a certificate that did not verify, or the browser says it could not connect to its
        DoH server (see harness.arms.doh)."""
        if self.proxy is not None:
            return verify_failed_since(self.proxy.log, self.log_mark)
        return trr_failure in (COULD_NOT_CONNECT, DOH_CERTIFICATE_FAILED)

    def describe(self) -> dict:
        stub = {"stub": "dnsproxy", "upstream": self.proxy.upstream} if self.proxy is not None else {}
        return {**super().describe(), "uri": self.resolver.doh3_uri, **stub}
