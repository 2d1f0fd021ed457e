"""`dnsstudy record`: load sites in the browser through a recording mitmproxy, then record their DNS.

The proxy (mitmdump from its own environment, build/mitmproxy-venv, run as
the helper account in the place's client namespace) only records: it is
started here and nowhere else, so it is never part of a measured visit.
The browser trusts the proxy's CA for the recording and asks it for every
URL; the proxy resolves through the place's resolver (the Do53 arm points
the namespace's resolv.conf at it). Once a page is loaded, every hostname
it used is resolved again through the same resolver with dnspython and the
answers (CNAME chain, A and AAAA, TTLs, and the HTTPS records at the chain's
end) are stored beside the exchanges.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import cast

import dns.exception
import dns.flags
import dns.message
import dns.query
import dns.rcode
import dns.rdatatype

from harness import netns
from harness.accounts import helper, helper_dir
from harness.arms import make_arm
from harness.arms.base import BrowserDns, DnsArm
from harness.browser.registry import make_browser
from harness.daemons import Daemon, stop_all
from harness.errors import HarnessError
from harness.paths import PROJECT_ROOT
from harness.place import ClientSide, Place, Resolver
from harness.replay.archive import DnsAnswer, Exchange, SiteRecord, write_site
from harness.replay.waits import measure_waits

MITMDUMP = PROJECT_ROOT / "build" / "mitmproxy-venv" / "bin" / "mitmdump"
ADDON = Path(__file__).resolve().with_name("mitm_addon.py")
START_WAIT = 20.0  # seconds for mitmdump to make its CA and listen


class _Proxied:
    """The arm as the browser sees it during a recording: its DNS setting, with the proxy's port added.

    The browser asks an arm for nothing but its `BrowserDns` (`Browser.start`), so this stands in for it.
    """

    def __init__(self, arm: DnsArm, port: int):
        self.arm, self.port = arm, port

    def browser_dns(self) -> BrowserDns:
        return replace(self.arm.browser_dns(), proxy_port=self.port)


class RecordingProxy:
    """mitmdump in the client namespace, recording every exchange to a file of JSON lines."""

    def __init__(self, client: ClientSide, upstream_ca: Path | None):
        if not MITMDUMP.exists():
            raise HarnessError(f"{MITMDUMP} is missing: run 'bash scripts/setup.sh' (it installs mitmproxy)")
        self.client = client
        self.work = helper_dir(client.run_dir) / "record"
        self.work.mkdir(mode=0o755, exist_ok=True)
        self.out = self.work / "exchanges.jsonl"
        self.out.unlink(missing_ok=True)
        helper().give(self.work)
        with netns.entered(client.namespace):
            self.port = netns.free_tcp_port()
        self.upstream_ca = upstream_ca
        self.offset = 0
        self.daemon: Daemon | None = None

    @property
    def ca(self) -> Path:
        return self.work / "mitmproxy-ca-cert.pem"

    def start(self) -> None:
        account = helper()
        argv = [account.program(MITMDUMP), "--listen-host", "127.0.0.1", "--listen-port", str(self.port), "-q"]
        argv += ["--set", f"confdir={self.work}", "-s", str(ADDON)]
        if self.upstream_ca:
            argv += ["--set", f"ssl_verify_upstream_trusted_ca={self.upstream_ca}"]
        env = {"DNSSTUDY_RECORD_OUT": str(self.out), "HOME": str(self.work)}
        log = str(self.work / "mitmdump.log")
        self.daemon = Daemon("mitmdump", self.client.namespace, account.run_as(argv), log, [], env=env)
        self.daemon.start()
        deadline = time.monotonic() + START_WAIT
        while netns.wait_tcp(self.client.namespace, [("127.0.0.1", self.port)], timeout=0.5):
            if not self.daemon.alive() or time.monotonic() > deadline:
                self.stop()
                raise HarnessError(f"mitmdump did not start: see {log}")
        if not self.ca.exists():
            raise HarnessError(f"mitmdump made no CA in {self.work}")

    def take(self) -> list[tuple[Exchange, list[str]]]:
        """The exchanges recorded since the last call, each with its server certificate's DNS names."""
        if not self.out.exists():
            return []
        with self.out.open("rb") as f:
            f.seek(self.offset)
            data = f.read()
        complete = data[: data.rfind(b"\n") + 1]
        self.offset += len(complete)
        lines = [json.loads(line) for line in complete.splitlines() if line.strip()]
        return [(_exchange(d), [str(n) for n in d.get("cert_names", [])]) for d in lines]

    def stop(self) -> None:
        if self.daemon is not None:
            stop_all([self.daemon])
            self.daemon = None


def _exchange(d: dict) -> Exchange:
    return Exchange(
        method=d["method"],
        url=d["url"],
        status=int(d["status"]),
        http_version=d["http_version"],
        request_headers=[(k, v) for k, v in d["request_headers"]],
        response_headers=[(k, v) for k, v in d["response_headers"]],
        body=base64.b64decode(d["body"]),
        wait_ms=float(d["wait_ms"]),
    )


def resolve(namespace: str, resolver: str, name: str, timeout: float = 5.0) -> DnsAnswer:
    """``name``'s CNAME chain, A and AAAA with their TTLs, and the HTTPS records at the chain's end, asked of
    ``resolver`` from inside ``namespace``."""
    chain: list[tuple[str, int]] = []
    found: dict[int, tuple[list[str], int]] = {}
    for rdtype in (dns.rdatatype.A, dns.rdatatype.AAAA):
        reply = _ask(namespace, resolver, name, rdtype, timeout)
        links, addresses, ttl = [], [], 0
        for rrset in reply.answer:
            if rrset.rdtype == dns.rdatatype.CNAME:
                links.append((str(rrset[0].target).rstrip(".").lower(), rrset.ttl))
            elif rrset.rdtype == rdtype:
                addresses, ttl = sorted(r.address for r in rrset), rrset.ttl
        chain = chain or links
        found[rdtype] = (addresses, ttl)
    (a, a_ttl), (aaaa, aaaa_ttl) = found[dns.rdatatype.A], found[dns.rdatatype.AAAA]
    https, https_ttl = _https_records(namespace, resolver, name, timeout)
    return DnsAnswer(
        name=name, chain=chain, a=a, a_ttl=a_ttl, aaaa=aaaa, aaaa_ttl=aaaa_ttl, https=https, https_ttl=https_ttl
    )


def _ask(
    namespace: str, resolver: str, name: str, rdtype: dns.rdatatype.RdataType, timeout: float
) -> dns.message.Message:
    query = dns.message.make_query(name, rdtype)
    with netns.entered(namespace):
        reply, _ = dns.query.udp_with_fallback(query, resolver, timeout=timeout)
    return reply


def _https_records(namespace: str, resolver: str, name: str, timeout: float) -> tuple[list[str] | None, int]:
    """The HTTPS records (RFC 9460) at the end of ``name``'s CNAME chain as dnspython prints them, and their TTL;
    [] when the resolver says there are none, None when it gave no answer (a timeout, SERVFAIL): a failure is
    not recorded as "none"."""
    try:
        reply = _ask(namespace, resolver, name, dns.rdatatype.HTTPS, timeout)
    except dns.exception.Timeout:
        return None, 0
    if reply.rcode() not in (dns.rcode.NOERROR, dns.rcode.NXDOMAIN):
        return None, 0
    # A record lives at the name that owns it, the chain's end: the reply's HTTPS set is that name's (a CNAME
    # excludes any other data at its own name), so it goes with the chain the A reply gave.
    for rrset in reply.answer:
        if rrset.rdtype == dns.rdatatype.HTTPS:
            return sorted(r.to_text() for r in rrset), rrset.ttl
    return [], 0


def site_url(site: str) -> str:
    return site if "://" in site else f"https://{site}/"


def record_sites(
    place: Place, sites: list[str], directory: Path, resolver_name: str | None = None, timeout: float = 30.0
) -> Iterator[SiteRecord]:
    """Record each site into the archive at ``directory``, yielding each record once written."""
    client = place.client_side()
    names = place.resolver_names()
    resolver = place.resolver(resolver_name or (names[0] if names else "default"))
    arm = make_arm("do53", resolver, client)
    arm.start()  # resolv.conf first: mitmdump's `ip netns exec` binds it at start
    proxy = RecordingProxy(client, client.ca_file if client.browser_trusts_ca else None)
    try:
        proxy.start()
        # The browser trusts the proxy's CA, which signs no QUIC: the proxy speaks to it over TCP only.
        proxied_client = replace(client, ca_file=proxy.ca, browser_trusts_ca=True, quic_ca_hosts=())
        browser = make_browser("firefox", proxied_client, timeout)
        for site in sites:
            yield _record_one(site, browser, _Proxied(arm, proxy.port), proxy, client, resolver, directory)
    finally:
        proxy.stop()
        arm.stop()
        client.restore_system_resolver()


def _record_one(
    site: str, browser, proxied: _Proxied, proxy: RecordingProxy, client: ClientSide, resolver: Resolver, out: Path
) -> SiteRecord:
    url = site_url(site)
    try:
        browser.start(cast(DnsArm, proxied))
        load = browser.load(url)
    finally:
        browser.stop()
    time.sleep(0.3)  # the addon writes a line as each response ends; let the last ones land
    taken = proxy.take()
    exchanges = [e for e, _ in taken]
    certificates: dict[str, list[str]] = {}
    for e, names in taken:
        if names:
            certificates.setdefault(e.host, names)
    if not exchanges:
        raise HarnessError(f"{url}: nothing was recorded ({load.driver_failure or load.message or 'no response'})")
    hosts = sorted({e.host for e in exchanges})
    dns_answers = {h: resolve(client.namespace, resolver.address, h) for h in hosts}
    ca = client.ca_file if client.browser_trusts_ca else None
    exchanges = measure_waits(client.namespace, exchanges, dns_answers, ca)
    name = site.split("://")[-1].strip("/")
    record = SiteRecord(name, url, "recorded", exchanges, dns_answers, certificates)
    write_site(out, record)
    return record
