"""DoH: Firefox's own resolver (TRR) in mode 3, which never falls back to the system resolver."""

from __future__ import annotations

from harness.arms.base import DnsArm, register_arm
from harness.protocols import DOH

#: Firefox's TRR-only error page for a TRR server it could not set up a channel to (skip reasons
#: TRR_FAILED, TRR_NET_REFUSED, TRR_UNKNOWN_CHANNEL_FAILURE, ...; aboutNetError.mjs). After the server's
#: TLS handshake reached the client (the counters say so), that is a TLS failure: its certificate.
COULD_NOT_CONNECT = "neterror-dns-not-found-trr-only-could-not-connect"


@register_arm(DOH)
class DohArm(DnsArm):
    def start(self) -> None:
        # Anything that bypassed TRR would meet a dead resolver and show in the counters.
        self.client.set_system_resolver(self.client.dead_resolver)

    def firefox_prefs(self) -> dict[str, bool | int | str]:
        uri = self.resolver.doh_uri
        return {
            "network.trr.mode": 3,  # TRR only, no native fallback
            "network.trr.uri": uri,
            "network.trr.custom_uri": uri,
            "network.trr.bootstrapAddr": self.resolver.address,  # no Do53 lookup of the DoH host
            "network.trr.allow-rfc1918": True,  # lab answers are private addresses
            # No confirmation query before use: the proof must see the page's queries only (the
            # study's DNS profile says the same; here it cannot be undone by a profile).
            "network.trr.confirmationNS": "skip",
            "network.trr.excluded-domains": "",
            "network.trr.builtin-excluded-domains": "",
        }  # how requests look (GET or POST, ECS, padding, timeouts): the study's DNS profile, harness/browser/prefs.py

    def authentication_failed(self, trr_failure: str | None) -> bool:
        """The browser's error page says it could not connect to the TRR server (see COULD_NOT_CONNECT)."""
        return trr_failure == COULD_NOT_CONNECT

    def describe(self) -> dict:
        return {**super().describe(), "uri": self.resolver.doh_uri}
