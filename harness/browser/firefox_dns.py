"""An arm's `BrowserDns` as Firefox preferences: TRR off for the system resolver, TRR mode 3 for its own DoH."""

from __future__ import annotations

from collections.abc import Mapping

from harness.arms.base import BrowserDns
from harness.errors import HarnessError

PrefValue = bool | int | str


#: What the study's `page_http3` sets, and no DNS profile may.
PAGE_HTTP3_PREFS = ("network.http.http3.enable", "network.http.http3.disable_when_third_party_roots_found")


def refuse_page_http3_prefs(profile: str, prefs: Mapping[str, object]) -> None:
    """A one-line error if the DNS profile ``profile`` sets what the study's `page_http3` does."""
    for name in sorted(set(prefs) & set(PAGE_HTTP3_PREFS)):
        raise HarnessError(f"{profile}: {name} is not a DNS setting: the study's page_http3 sets it")


def firefox_prefs(dns: BrowserDns, trusts_place_ca: bool, page_http3: bool = False) -> dict[str, PrefValue]:
    """The preferences a visit's profile gets for ``dns``; ``trusts_place_ca``: the browser trusts the place's CA
    (a lab's), a root Firefox does not ship; ``page_http3``: the page may use HTTP/3."""
    http3 = _http3_prefs(page_http3_on(dns, page_http3), trusts_place_ca)
    return _resolver_prefs(dns) | http3 | _proxy_prefs(dns.proxy_port)


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


def _resolver_prefs(dns: BrowserDns) -> dict[str, PrefValue]:
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
        prefs["network.trr.force_http3_first"] = True
    return prefs


def page_http3_on(dns: BrowserDns, page_http3: bool) -> bool:
    """Whether the page may use HTTP/3: the study's `page_http3`, or the arm's DNS over HTTP/3, which Firefox cannot
    have without HTTP/3 for everything (one switch, `network.http.http3.enable`; docs/web.md)."""
    return page_http3 or dns.http3


def _http3_prefs(on: bool, trusts_place_ca: bool) -> dict[str, PrefValue]:
    """HTTP/3 on, where the visit has it; off is the base profile's value (quiet-offline.toml), restored between a
    reused browser's visits."""
    if not on:
        return {}
    return {
        "network.http.http3.enable": True,
        # The lab CA is a root Firefox does not ship; on the Internet the browser trusts only its own.
        "network.http.http3.disable_when_third_party_roots_found": not trusts_place_ca,
    }
