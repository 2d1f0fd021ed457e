"""An arm's `BrowserDns` as Firefox preferences: TRR off for the system resolver, TRR mode 3 for its own DoH."""

from __future__ import annotations

from harness.arms.base import BrowserDns

PrefValue = bool | int | str


def firefox_prefs(dns: BrowserDns, trusts_place_ca: bool) -> dict[str, PrefValue]:
    """The preferences a visit's profile gets for ``dns``; ``trusts_place_ca``: the browser trusts the place's CA
    (a lab's), a root Firefox does not ship."""
    return _resolver_prefs(dns, trusts_place_ca) | _proxy_prefs(dns.proxy_port)


def _proxy_prefs(port: int | None) -> dict[str, PrefValue]:
    if port is None:
        return {}
    return {
        "network.proxy.type": 1,  # manual
        "network.proxy.http": "127.0.0.1",
        "network.proxy.http_port": port,
        "network.proxy.ssl": "127.0.0.1",
        "network.proxy.ssl_port": port,
        "network.proxy.no_proxies_on": "",
    }


def _resolver_prefs(dns: BrowserDns, trusts_place_ca: bool) -> dict[str, PrefValue]:
    if dns.resolver == "system":
        return {"network.trr.mode": 5}  # TRR off: Firefox uses the system resolver
    assert dns.uri is not None and dns.bootstrap is not None  # a "doh" setting names both
    prefs: dict[str, PrefValue] = {
        "network.trr.mode": 3,  # TRR only, no native fallback
        "network.trr.uri": dns.uri,
        "network.trr.custom_uri": dns.uri,
        "network.trr.bootstrapAddr": dns.bootstrap,  # no Do53 lookup of the DoH host
        "network.trr.allow-rfc1918": True,  # lab answers are private addresses
        # No confirmation query before use: the proof must see the page's queries only (the
        # study's DNS profile says the same; here it cannot be undone by a profile).
        "network.trr.confirmationNS": "skip",
        "network.trr.excluded-domains": "",
        "network.trr.builtin-excluded-domains": "",
    }  # how requests look (GET or POST, ECS, padding, timeouts): the study's DNS profile, harness/browser/prefs.py
    if dns.http3:
        prefs |= {
            "network.trr.force_http3_first": True,
            "network.http.http3.enable": True,
            # The lab CA is a root Firefox does not ship; on the Internet the browser trusts only its own.
            "network.http.http3.disable_when_third_party_roots_found": not trusts_place_ca,
        }
    return prefs
