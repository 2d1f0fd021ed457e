"""The lab's DNS data: which name has which address, rendered for each server."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path

from harness.lab.config import LabConfig, LocalResolver, RecursiveResolver
from harness.lab.svcb import Kind, https_rdata, load_shares, site_kinds

LAB_ZONE = "lab.test"


@dataclass(frozen=True)
class ZoneData:
    """Every A record of the lab, grouped by the zone (registered domain) that holds it, and the kind of HTTPS
    record each zone of the synthetic web was given (harness/lab/svcb.py; none with `https_records` off)."""

    records: dict[str, dict[str, str]]  # zone -> {hostname: address}
    https: dict[str, Kind] = field(default_factory=dict)  # zone -> "record", "alt_svc" or "none"
    ech: str | None = None  # the ECHConfigList every HTTPS record carries (base64), if the lab has ECH

    def address_of(self, hostname: str) -> str | None:
        for names in self.records.values():
            if hostname in names:
                return names[hostname]
        return None

    @property
    def count(self) -> int:
        return sum(len(names) for names in self.records.values())

    def https_records(self) -> dict[str, str]:
        """hostname -> the data of its HTTPS record, for every hostname of a zone of kind "record"."""
        return {
            host: https_rdata(addr, self.ech)
            for zone, kind in self.https.items()
            if kind == "record"
            for host, addr in self.records[zone].items()
        }


def local_data_file(run: Path, resolver: LocalResolver | RecursiveResolver) -> Path:
    """The local-data file a lab resolver includes: the lab's, or the one without HTTPS records."""
    bare = isinstance(resolver, LocalResolver) and not resolver.https_records
    return run / ("local-data-bare.conf" if bare else "local-data.conf")


def replay_zone_file(run: Path, resolver: LocalResolver | RecursiveResolver) -> Path:
    """The root zone a lab resolver reads as its upstream when the lab replays an archive: the lab's, or, for a
    resolver without HTTPS records, the one that leaves the archive's out."""
    bare = isinstance(resolver, LocalResolver) and not resolver.https_records
    return run / ("root-bare.zone" if bare else "root.zone")


def web_address(config: LabConfig, domain: str) -> str:
    """The web address a registered domain is pinned to (stable across runs)."""
    pool = config.addresses.web(config.settings.web_addresses)
    digest = hashlib.sha256(domain.encode()).digest()
    return pool[int.from_bytes(digest[:4], "big") % len(pool)]


def infrastructure_names(config: LabConfig) -> dict[str, str]:
    """Names of the lab's own hosts under lab.test."""
    plan = config.addresses
    names = {
        f"auth.dns.{LAB_ZONE}": plan.auth,
        f"refused.{LAB_ZONE}": plan.refused,  # nothing listens
        f"hang.{LAB_ZONE}": plan.hang,  # accepts, never answers
        f"badcert.{LAB_ZONE}": plan.badcert,  # certificate from an untrusted CA
        f"www.{LAB_ZONE}": plan.web(1)[0],  # a one-object page for smoke tests
    }
    for i, resolver in enumerate(config.settings.resolvers):
        names[resolver_tls_name(resolver.name)] = plan.resolver(i)
    return names


def resolver_tls_name(name: str) -> str:
    """The name a lab resolver's certificate carries, for DoT/DoH authentication."""
    return f"{name}.dns.{LAB_ZONE}"


def build_zones(config: LabConfig, host_domain: dict[str, str], ech: str | None = None) -> ZoneData:
    """Zones for lab.test and every registered domain of the synthetic web; ``ech``: the ECHConfigList its
    HTTPS records carry."""
    records: dict[str, dict[str, str]] = {LAB_ZONE: infrastructure_names(config)}
    for host, domain in sorted(host_domain.items()):
        records.setdefault(domain, {})[host] = web_address(config, domain)
    web = config.settings.web
    if not web.https_records:
        return ZoneData(records)
    domains = sorted(set(host_domain.values()))
    return ZoneData(records, site_kinds(web.seed, domains, load_shares(web.https_records)), ech)


#: A name whose TXT answer (about 2 KB) does not fit a 1232-byte EDNS UDP
#: answer: over Do53 it comes back truncated and clients must retry over TCP.
BIG_NAME = f"big.{LAB_ZONE}"
BIG_TXT = [f"record {i:02d} " + "x" * 190 for i in range(10)]


def unbound_local_data(zones: ZoneData, ttl: int = 3600, https: bool = True) -> str:
    """local-zone/local-data lines: static zones answer NXDOMAIN for any other name in them; ``https`` False
    leaves out the HTTPS records."""
    lines = []
    for zone, names in zones.records.items():
        lines.append(f'local-zone: "{zone}." static')
        for host, addr in names.items():
            lines.append(f'local-data: "{host}. {ttl} IN A {addr}"')
    records = zones.https_records() if https else {}
    lines += [f"local-data: '{host}. {ttl} IN HTTPS {data}'" for host, data in records.items()]
    lines += [f"local-data: '{BIG_NAME}. {ttl} IN TXT \"{text}\"'" for text in BIG_TXT]
    return "\n".join(lines) + "\n"


def root_zone_file(zones: ZoneData, auth_address: str, ttl: int = 300) -> str:
    """One zone file for "." holding every lab record, served by the lab authoritative."""
    lines = [
        f"$TTL {ttl}",
        f". IN SOA auth.dns.{LAB_ZONE}. hostmaster.{LAB_ZONE}. 1 3600 600 86400 {ttl}",
        f". IN NS auth.dns.{LAB_ZONE}.",
    ]
    for names in zones.records.values():
        for host, addr in names.items():
            lines.append(f"{host}. IN A {addr}")
    lines += [f"{host}. IN HTTPS {data}" for host, data in zones.https_records().items()]
    lines += [f'{BIG_NAME}. IN TXT "{text}"' for text in BIG_TXT]
    return "\n".join(lines) + "\n"


def https_record_owners(zone_file: str) -> frozenset[str]:
    """The names (lower case, no final dot) that hold an HTTPS record in a zone file `root_zone_file` wrote (with
    a replayed web's lines), and the names whose CNAME chain ends at one: a replay publishes a record at the
    chain's end, and a query for the name is answered with it."""
    owners: set[str] = set()
    cnames: dict[str, str] = {}
    for line in zone_file.splitlines():
        fields = line.split()  # "owner [ttl] IN type data"
        klass = 1 if fields[1:2] == ["IN"] else 2
        if fields[klass : klass + 2] == ["IN", "HTTPS"]:
            owners.add(fields[0].rstrip(".").lower())
        elif fields[klass : klass + 2] == ["IN", "CNAME"] and len(fields) > klass + 2:
            cnames[fields[0].rstrip(".").lower()] = fields[klass + 2].rstrip(".").lower()
    for name in cnames:
        target = name
        for _ in range(len(cnames)):  # no longer than the zone's CNAMEs: bounded against a loop
            target = cnames.get(target, "")
            if target in owners:
                owners.add(name)
                break
    return frozenset(owners)
