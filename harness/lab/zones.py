"""The lab's DNS data: which name has which address, rendered for each server."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

from harness.lab.config import LabConfig

LAB_ZONE = "lab.test"


@dataclass(frozen=True)
class ZoneData:
    """Every A record of the lab, grouped by the zone (registered domain) that holds it."""

    records: dict[str, dict[str, str]]  # zone -> {hostname: address}

    def address_of(self, hostname: str) -> str | None:
        for names in self.records.values():
            if hostname in names:
                return names[hostname]
        return None

    @property
    def count(self) -> int:
        return sum(len(names) for names in self.records.values())


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


def build_zones(config: LabConfig, host_domain: dict[str, str]) -> ZoneData:
    """Zones for lab.test and every registered domain of the synthetic web."""
    records: dict[str, dict[str, str]] = {LAB_ZONE: infrastructure_names(config)}
    for host, domain in sorted(host_domain.items()):
        records.setdefault(domain, {})[host] = web_address(config, domain)
    return ZoneData(records)


#: A name whose TXT answer (about 2 KB) does not fit a 1232-byte EDNS UDP
#: answer: over Do53 it comes back truncated and clients must retry over TCP.
BIG_NAME = f"big.{LAB_ZONE}"
BIG_TXT = [f"record {i:02d} " + "x" * 190 for i in range(10)]


def unbound_local_data(zones: ZoneData, ttl: int = 3600) -> str:
    """local-zone/local-data lines: static zones answer NXDOMAIN for any other name in them."""
    lines = []
    for zone, names in zones.records.items():
        lines.append(f'local-zone: "{zone}." static')
        for host, addr in names.items():
            lines.append(f'local-data: "{host}. {ttl} IN A {addr}"')
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
    lines += [f'{BIG_NAME}. IN TXT "{text}"' for text in BIG_TXT]
    return "\n".join(lines) + "\n"
