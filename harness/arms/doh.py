"""DoH: the browser's own resolver, never falling back to the system's (Firefox's TRR in mode 3, Chromium's
secure DNS in mode "secure"); each browser renders `BrowserDns` in its own settings."""

from __future__ import annotations

from urllib.parse import urlsplit

from harness import netns
from harness.arms.base import BrowserDns, DnsArm, register_arm
from harness.protocols import DOH

#: Firefox's TRR-only error page for a TRR server it could not set up a channel to (skip reasons
#: TRR_FAILED, TRR_NET_REFUSED, TRR_UNKNOWN_CHANNEL_FAILURE, ...; aboutNetError.mjs). After the server's
#: TLS handshake reached the client (the counters say so), that is a TLS failure: its certificate.
COULD_NOT_CONNECT = "neterror-dns-not-found-trr-only-could-not-connect"
#: Chromium's equivalent, which no page of it shows: its net log says a DoH request to the server failed with a
#: certificate error (harness/browser/chromium_netlog.py).
DOH_CERTIFICATE_FAILED = "chromium-doh-certificate-error"


@register_arm(DOH)
class DohArm(DnsArm):
    def start(self) -> None:
        # Anything that bypassed TRR would meet a dead resolver and show in the counters.
        self.client.set_system_resolver(self.client.dead_resolver)

    def browser_dns(self) -> BrowserDns:
        """The browser's own DoH, never falling back, at the resolver's address (no lookup of its name)."""
        return BrowserDns("doh", uri=self.resolver.doh_uri, bootstrap=self.resolver.address)

    def reset_connection(self) -> int:
        """Close the client's TCP connections to the DoH server (`ss -K`, the kernel's socket destroy): a
        connection the browser opened before a cold visit's counted window (its start's own lookups, or one its new
        user context opened early) would carry the visit's first query. The browser opens a new one for it."""
        port = str(urlsplit(self.resolver.doh_uri).port or 443)
        argv = ["ss", "-K", "-t", "-n", "-H", "state", "established", "dst", self.resolver.address]
        done = netns.run(self.client.namespace, [*argv, "dport", "=", f":{port}"], timeout=10)
        return len([line for line in done.stdout.splitlines() if line.strip()])

    def authentication_failed(self, trr_failure: str | None) -> bool:
        """The browser's error page says it could not connect to the TRR server (see COULD_NOT_CONNECT)."""
        return trr_failure in (COULD_NOT_CONNECT, DOH_CERTIFICATE_FAILED)

    def describe(self) -> dict:
        return {**super().describe(), "uri": self.resolver.doh_uri}
