"""The keys and certificates `lab up` issues: a fresh lab CA, the resolvers' and the web's, and badcert's."""

from __future__ import annotations

import grp
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec

from harness.lab.ca import CertificateAuthority, new_key, write_key
from harness.lab.config import LabConfig
from harness.lab.zones import LAB_ZONE, ZoneData


@dataclass
class LabTls:
    """What `lab up` makes for TLS: the CA, and the keys and certificates the daemons load."""

    ca: CertificateAuthority
    resolver_key: ec.EllipticCurvePrivateKey
    resolver_key_file: Path
    web_key_file: Path
    zone_certs: dict[str, Path]
    badcert: tuple[str, Path, Path]  # (address, certificate, key), as nginx_config takes it


def make_certificates(config: LabConfig, run_dir: Path, ca_path: Path, zones: ZoneData) -> LabTls:
    """The lab CA (written to ``ca_path``), the resolver and web keys, a certificate per zone, badcert."""
    certs = run_dir / "certs"
    # A fresh CA for every lab; a second CA nobody trusts for badcert.
    ca = CertificateAuthority.create(f"dnsstudy lab CA ({config.prefix})")
    ca_path.write_bytes(ca.cert_pem)
    unbound_gid = grp.getgrnam("unbound").gr_gid
    resolver_key = new_key()
    resolver_key_file = write_key(resolver_key, certs / "resolver.key")
    # unbound drops privileges to its group and must still read the key.
    os.chown(resolver_key_file, 0, unbound_gid)
    resolver_key_file.chmod(0o640)
    web_key = new_key()
    web_key_file = write_key(web_key, certs / "web.key")
    zone_certs: dict[str, Path] = {}
    for zone in zones.records:
        zone_certs[zone] = certs / f"{zone}.pem"
        zone_certs[zone].write_bytes(ca.issue([zone, f"*.{zone}"], [], web_key))
    badcert = _make_badcert(config.addresses.badcert, certs)
    return LabTls(ca, resolver_key, resolver_key_file, web_key_file, zone_certs, badcert)


def _make_badcert(address: str, certs: Path) -> tuple[str, Path, Path]:
    """badcert's (address, certificate, key), signed by a CA no client trusts."""
    rogue = CertificateAuthority.create("untrusted CA")
    key = new_key()
    key_file = write_key(key, certs / "badcert.key")
    cert_file = certs / "badcert.pem"
    cert_file.write_bytes(rogue.issue([f"badcert.{LAB_ZONE}"], [address], key))
    return address, cert_file, key_file
