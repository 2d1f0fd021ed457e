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
"""

from __future__ import annotations

import ipaddress

from harness.arms.base import DnsArm, register_arm
from harness.arms.doh import COULD_NOT_CONNECT
from harness.errors import HarnessError
from harness.netns import nft
from harness.protocols import DO53, DOH3

TABLE = "dnsstudy_doh3_only"
_DELETE = f"table inet {TABLE}\ndelete table inet {TABLE}\n"  # (re)created empty first: idempotent


@register_arm(DOH3)
class Doh3Arm(DnsArm):
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
        # Anything that bypassed TRR would meet a dead resolver and show in the counters.
        self.client.set_system_resolver(self.client.dead_resolver)
        address = str(ipaddress.IPv4Address(self.resolver.address))  # validated: it goes into an nft script
        rule = f"ip daddr {address} tcp dport {self.resolver.port(DOH3)} reject with tcp reset"
        # After the proof's counters (priority 0), so the fallback attempts are still counted.
        chain = f"  chain out {{\n    type filter hook output priority 10; policy accept;\n    {rule}\n  }}\n"
        nft(self.client.namespace, ["-f", "-"], f"{_DELETE}table inet {TABLE} {{\n{chain}}}\n")

    def stop(self) -> None:
        nft(self.client.namespace, ["-f", "-"], _DELETE)

    def firefox_prefs(self) -> dict[str, bool | int | str]:
        uri = self._uri()
        return {
            "network.trr.mode": 3,  # TRR only, no native fallback
            "network.trr.uri": uri,
            "network.trr.custom_uri": uri,
            "network.trr.bootstrapAddr": self.resolver.address,
            "network.trr.allow-rfc1918": True,
            "network.trr.confirmationNS": "skip",  # the proof must see the page's queries only
            "network.trr.excluded-domains": "",
            "network.trr.builtin-excluded-domains": "",
            "network.trr.force_http3_first": True,
            "network.http.http3.enable": True,
            # The lab CA is a root Firefox does not ship; on the Internet the browser trusts only its own.
            "network.http.http3.disable_when_third_party_roots_found": not self.client.browser_trusts_ca,
        }

    def authentication_failed(self, trr_failure: str | None) -> bool:
        """The browser's error page says it could not connect to the TRR server (see harness.arms.doh)."""
        return trr_failure == COULD_NOT_CONNECT

    def describe(self) -> dict:
        return {**super().describe(), "uri": self.resolver.doh3_uri}
