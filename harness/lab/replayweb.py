"""A lab web from a replay archive: its DNS in the lab's zone, its addresses, certificates and replay server.

Each address the archive's hostnames resolved to becomes a lab web address
(from the second on: the first serves www.lab.test), in order of first use,
so hostnames that shared an address share one in the lab and the browser
coalesces their connections as it did; past the lab's web addresses they
wrap round (docs/replay.md). The authoritative's root zone gets every
recorded name with its CNAME chain and TTLs; A records only, as the lab has
no IPv6; and each name's recorded HTTPS records at the chain's end,
rewritten for the lab (harness/replay/https_rewrite.py). Each lab address
gets from the lab CA one certificate per certificate its hostnames were
recorded with (the same DNS names) and one naming its other names, and
offers HTTP/2 if any exchange with one of its hosts was. With `http3` under
the profile's `[web]`, an address whose hosts were recorded over HTTP/3 or
announced it (Alt-Svc, or `alpn` h3 in an HTTPS record) offers it too,
through the HTTP/3 front; nginx announces it there, and the records keep h3.
nginx answers exact matches from files, the replay server the rest
(harness/lab/replayfront.py).
"""

from __future__ import annotations

import json
import re
import sys
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from harness.accounts import helper
from harness.daemons import Daemon
from harness.errors import HarnessError
from harness.lab.ca import CertificateAuthority, new_key, write_key
from harness.lab.config import LabConfig
from harness.lab.h3front import front_argv as h3_argv
from harness.lab.h3front import replay_front_config, write_front
from harness.lab.nginx import WORKER_PROCESSES
from harness.lab.replayfront import file_answers, front_config, require_modules, write_answers
from harness.paths import PROJECT_ROOT
from harness.replay.archive import Archive, Exchange, SiteRecord
from harness.replay.https_rewrite import KINDS, announces_h3, rewrite_https
from harness.replay.matching import ExchangeIndex, body_for

#: An Alt-Svc value that offers HTTP/3 (h3, or a draft's h3-NN) somewhere.
_ALT_SVC_H3 = re.compile(r"(^|,)\s*h3(-[0-9a-z]+)?=", re.IGNORECASE)


@dataclass
class ReplayWeb:
    """Where each archived name lives in one lab: zone lines, addresses and what each address serves."""

    archive_dir: Path
    records: dict[str, tuple[str, str, int]] = field(default_factory=dict)  # owner -> (type, data, ttl)
    https: dict[str, tuple[list[str], int]] = field(default_factory=dict)  # owner -> (HTTPS records' data, ttl)
    # What the rewrite for the lab did to the recorded HTTPS records, by kind (harness/replay/https_rewrite.py),
    # and "published": the records the zone holds
    https_changes: Counter[str] = field(default_factory=Counter)
    hosts_at: dict[str, set[str]] = field(default_factory=dict)  # lab address -> names served there
    http2_at: set[str] = field(default_factory=set)  # lab addresses offering HTTP/2
    # Lab addresses whose hosts were recorded over HTTP/3 or announced it: where a lab with `http3` offers it
    h3_at: set[str] = field(default_factory=set)
    plain_at: set[str] = field(default_factory=set)  # lab addresses serving http:// URLs on port 80
    # Lab addresses with a hostname recorded over https: the others (only http:// recorded) refuse TLS, as their
    # sites evidently did, so a browser's HTTPS upgrade falls back to http:// as it would have
    tls_at: set[str] = field(default_factory=set)
    certificate_of: dict[str, tuple[str, ...]] = field(default_factory=dict)  # hostname -> its recorded names
    sites: list[str] = field(default_factory=list)
    urls: list[str] = field(default_factory=list)
    hostnames: list[str] = field(default_factory=list)
    # What `lab check` fetches: per site, its page and one other answer, each with what was recorded
    samples: list[dict] = field(default_factory=list)
    loaded: list[SiteRecord] = field(default_factory=list, repr=False)  # the archive's sites, loaded once

    @classmethod
    def plan(cls, config: LabConfig, archive_dir: Path) -> ReplayWeb:
        """The archive's names placed in this lab (every site loaded, so a broken archive fails here)."""
        web = cls(archive_dir)
        archive = Archive(archive_dir)
        records = archive.load_all()
        pool = config.addresses.web(config.settings.web_addresses)[1:] or config.addresses.web(1)
        mapped: dict[str, str] = {}
        for record in records:
            web._add(record, pool, mapped)
        h3_at = frozenset(web.h3_served(config.settings.web.http3))
        for record in records:  # once every name is placed: a record may point at another site's name
            web._add_https(record, archive, h3_at)
        address_of = {name: address for address, names in web.hosts_at.items() for name in names}
        web.samples = [sample for r in records for sample in web._samples(r, address_of, h3_at)]
        web.loaded = records
        web.sites = [r.site for r in records]
        web.urls = [r.url for r in records]
        web.hostnames = sorted({h for r in records for h in r.hostnames})
        return web

    def _add(self, record: SiteRecord, pool: list[str], mapped: dict[str, str]) -> None:
        # Over TCP a host recorded over HTTP/3 (found through Alt-Svc after HTTP/2) is offered HTTP/2.
        http2 = {e.host for e in record.exchanges if e.http_version.upper().startswith(("HTTP/2", "HTTP/3"))}
        h3 = {e.host for e in record.exchanges if e.http_version.upper().startswith("HTTP/3") or _offers_h3(e)}
        h3 |= {name for name, answer in record.dns.items() if any(announces_h3(t) for t in answer.https or [])}
        plain = {e.host for e in record.exchanges if e.url.lower().startswith("http://")}
        tls = {e.host for e in record.exchanges if e.url.lower().startswith("https://")}
        for name, answer in sorted(record.dns.items()):
            if not answer.a or name in self.records:
                continue  # no address (nothing to serve), or already placed by an earlier site
            owner = name
            for target, ttl in answer.chain:
                self.records.setdefault(owner, ("CNAME", target + ".", ttl))
                owner = target
            recorded = answer.a[0]
            address = mapped.setdefault(recorded, pool[len(mapped) % len(pool)])
            self.records.setdefault(owner, ("A", address, answer.a_ttl))
            self.hosts_at.setdefault(address, set()).update({name, owner})
            if record.certificates.get(name):
                self.certificate_of[name] = tuple(sorted(set(record.certificates[name])))
            if name in http2:
                self.http2_at.add(address)
            if name in h3:
                self.h3_at.add(address)
            if name in plain:
                self.plain_at.add(address)
            if name in tls or name not in plain:
                self.tls_at.add(address)

    def _add_https(self, record: SiteRecord, archive: Archive, h3_at: frozenset[str]) -> None:
        """The site's recorded HTTPS records at their owners (the chains' ends), rewritten for the lab (h3 kept
        in `alpn` at the addresses ``h3_at`` that offer HTTP/3); a name already given records by an earlier site
        keeps them, as its addresses. A record dnspython cannot read stops the plan with one line naming the
        file, the site and the name."""
        for name, answer in sorted(record.dns.items()):
            owner = answer.canonical
            if not answer.https or owner in self.https or self.records.get(owner, ("",))[0] != "A":
                continue  # none recorded, placed already, or a name the zone does not serve (no address)
            published: list[str] = []
            for text in answer.https:
                try:
                    done = rewrite_https(text, owner, self.address_of, h3_at)
                except ValueError as exc:
                    path = archive.directory / archive.entries[record.site]["file"]
                    raise HarnessError(
                        f"{path}: site {record.site}, name {name}: HTTPS record {text!r}: {exc}"
                    ) from None
                self.https_changes.update(done.changes)
                if done.text is not None and done.text not in published:  # rewrites may make two records one
                    published.append(done.text)
            if published:
                self.https[owner] = (published, answer.https_ttl)
                self.https_changes["published"] += len(published)

    def address_of(self, name: str) -> str | None:
        """The lab address the zone puts ``name`` on (following its CNAMEs), None if the zone has no such name."""
        for _ in range(len(self.records) + 1):  # a chain can be no longer than the zone; bounded against a loop
            kind, data, _ttl = self.records.get(name, ("", "", 0))
            if kind != "CNAME":
                return data if kind == "A" else None
            name = data.rstrip(".")
        return None

    def https_summary(self) -> str:
        """What the zone publishes of the recorded HTTPS records and what the rewrite changed, in one line."""
        changes = ", ".join(f"{kind} {self.https_changes[kind]}" for kind in KINDS if self.https_changes[kind])
        published = self.https_changes["published"]
        return f"{published} published at {len(self.https)} names" + (f"; rewritten: {changes}" if changes else "")

    def _samples(self, record: SiteRecord, address_of: dict[str, str], h3_at: frozenset[str]) -> list[dict]:
        """The site's page and its last other answer recorded in full (a file), each with the status, protocol
        and bytes a client must get from the lab: what the archive recorded, as this lab serves it; ``http3``:
        the lab also offers it over HTTP/3 (at ``h3_at``), where the same status and bytes must come."""
        given = [e for e in record.exchanges if not e.failure and e.host in address_of]
        chosen = given[:1] + [e for e in given[1:] if e.status == 200][-1:]
        return [
            {
                "site": record.site,
                "url": e.url,
                "status": e.status,
                # over TCP; http:// only over HTTP/1.1
                "http_version": "HTTP/2"
                if e.url.startswith("https:") and address_of[e.host] in self.http2_at
                else "HTTP/1.1",
                "bytes": None if e.method != "GET" else len(body_for(e, record.site)),
                "http3": e.url.startswith("https:") and address_of[e.host] in h3_at,
            }
            for e in chosen
        ]

    def zone_lines(self, https: bool = True) -> str:
        """The archive's records for the lab's root zone (``https`` False: without its HTTPS records)."""
        lines = [f"{owner}. {ttl} IN {kind} {data}\n" for owner, (kind, data, ttl) in sorted(self.records.items())]
        lines += [
            f"{owner}. {ttl} IN HTTPS {data}\n"
            for owner, (texts, ttl) in sorted(self.https.items() if https else [])
            for data in texts
        ]
        return "".join(lines)

    def certificate_groups(self, address: str) -> list[tuple[list[str], list[str]]]:
        """The certificates one address serves, each as (its DNS names, the hostnames it is for): one per
        certificate recorded for the address's hostnames, with the recorded names, so a connection carries
        the hostnames it could on the recording; one naming the rest (unrecorded: a version 1 archive, a HAR)."""
        groups: dict[tuple[str, ...], list[str]] = {}
        for name in sorted(self.hosts_at[address]):
            groups.setdefault(self.certificate_of.get(name, ()), []).append(name)
        unrecorded = groups.pop((), [])
        out = [(list(names), hosts) for names, hosts in sorted(groups.items())]
        return out + ([(unrecorded, unrecorded)] if unrecorded else [])

    def server_config(self, run: Path, ca: CertificateAuthority, wait: bool, http3: bool = False) -> None:
        """Certificates per address, the exact answers' files, the nginx front's and the replay server's
        configurations (harness/lab/replayfront.py); with ``http3``, the HTTP/3 front's."""
        require_modules()
        key = new_key()
        key_file = write_key(key, run / "certs" / "replay.key")
        listen, h3_certs = [], []  # h3_certs: (hostnames, certificate) at addresses offering HTTP/3
        for address in sorted(self.hosts_at):
            servers = []
            for i, (names, hosts) in enumerate(self.certificate_groups(address)):
                cert = run / "certs" / f"replay-{address}-{i}.pem"
                cert.write_bytes(ca.issue(names, [], key))
                servers.append({"names": hosts, "cert": str(cert), "key": str(key_file)})
                if address in self.h3_served(http3):
                    h3_certs.append((hosts, cert))
            alpn = ["h2", "http/1.1"] if address in self.http2_at else ["http/1.1"]
            ports = {"tls": address in self.tls_at, "plain": address in self.plain_at}
            ports["alt_svc"] = address in self.h3_served(http3)  # nginx announces the HTTP/3 front
            listen.append({"address": address, "alpn": alpn, "servers": servers} | ports)
        if self.h3_served(http3):
            write_front(run, replay_front_config(self.h3_served(http3), h3_certs, key_file, run), helper())
        (run / "replay-nginx-tmp").mkdir(exist_ok=True)
        address_of = {name: address for address, names in self.hosts_at.items() for name in names}
        answers = file_answers(ExchangeIndex(self.loaded), address_of, run, wait)
        socket = replay_socket(run)
        write_answers(run, answers)
        front = front_config(run, listen, answers, socket, WORKER_PROCESSES)
        (run / "replay-nginx.conf").write_text(front)
        config = {
            "archive": str(self.archive_dir),
            "wait": wait,
            "events": str(events_log(run)),
            "user": helper().name,
            "workers": WORKER_PROCESSES,
            "socket": str(socket),
        }
        (run / "replay.json").write_text(json.dumps(config, indent=1))

    def ports(self, address: str) -> list[int]:
        """The ports the front listens on at ``address``: 443 where an https:// URL was recorded, 80 where an
        http:// one was."""
        return [port for port, served in ((443, self.tls_at), (80, self.plain_at)) if address in served]

    def h3_hostnames(self, http3: bool) -> list[str]:
        """The hostnames at addresses that offer HTTP/3 in a lab whose profile offers it (``http3``), sorted."""
        served = set(self.h3_served(http3))
        return sorted(name for name in self.hostnames if any(name in self.hosts_at[a] for a in served))

    def h3_served(self, http3: bool) -> list[str]:
        """The addresses that offer HTTP/3 in a lab whose profile offers it (``http3``), else none."""
        return sorted(self.h3_at & self.tls_at) if http3 else []

    def daemons(self, namespace: str, run: Path, http3: bool = False) -> list[Daemon]:
        """The replay server (it binds its socket as root, then runs as the helper account), then its nginx
        front on the archive's addresses, both in the server namespace; with ``http3``, the HTTP/3 front on the
        addresses that offer it."""
        argv = [sys.executable, "-m", "harness.lab.replayserver", str(run / "replay.json")]
        env = {"PYTHONPATH": str(PROJECT_ROOT)}
        server = Daemon("replay", namespace, argv, str(run / "logs" / "replay.log"), [], env=env)
        front_argv = ["nginx", "-p", str(run), "-c", str(run / "replay-nginx.conf"), "-g", "daemon off;"]
        addresses = [f"{a}:{port}" for a in sorted(self.hosts_at) for port in self.ports(a)]
        front = Daemon("replay-nginx", namespace, front_argv, str(run / "logs" / "replay-nginx.log"), addresses)
        if not self.h3_served(http3):
            return [server, front]
        argv_h3 = h3_argv(run / "h3front.json", helper())
        udp = [f"{a}:443/udp" for a in self.h3_served(http3)]
        return [server, front, Daemon("h3front", namespace, argv_h3, str(run / "logs" / "h3front.log"), udp)]


def _offers_h3(e: Exchange) -> bool:
    """True when the recorded answer announced HTTP/3 (an Alt-Svc header with an h3 alternative)."""
    return any(k.lower() == "alt-svc" and _ALT_SVC_H3.search(v) for k, v in e.response_headers)


def replay_socket(run: Path) -> Path:
    """Where the replay server listens for what its nginx front passes on."""
    return run / "replay.sock"


def events_log(run: Path) -> Path:
    """Where the replay server writes its events: misses, fuzzy matches, errors, filled bodies (one JSON line each)."""
    return run / "logs" / "replay-events.jsonl"
