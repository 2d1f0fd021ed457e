"""Encrypted Client Hello (ECH) in the lab: one key per lab run, its ECHConfig in `record` sites' HTTPS records,
the HTTP/3 front decrypting with it, and what a visit learns from the front's log.

ECH hides a connection's real server name inside an encrypted inner ClientHello; a browser finds the server's
configuration (an ECHConfigList) in the `ech` parameter of the host's HTTPS record (RFC 9460, section 14.3.1,
and the TLS ECH specification, draft-ietf-tls-esni, whose ECHConfig version 0xfe0d both browsers and Go send).
With `ech = true` in the web's HTTPS-records profile, `lab up` makes an X25519 key, publishes its configuration
in every `record` site's HTTPS records, and gives it to h3front (Go's crypto/tls decrypts ECH, also on QUIC).
nginx (OpenSSL 3.0) cannot, so only HTTP/3 connections can accept ECH in the lab (docs/web.md, "ECH").
The configuration is written here, not by a library: neither `cryptography` nor dnspython builds an ECHConfig,
and its layout is a few fixed-size fields.
"""

from __future__ import annotations

import base64
import struct
from dataclasses import dataclass
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat, PublicFormat

#: ECHConfig version (draft-ietf-tls-esni-13 onwards), HPKE's X25519 KEM, HKDF-SHA256 and AES-128-GCM.
VERSION, KEM_X25519, KDF_HKDF_SHA256, AEAD_AES_128_GCM = 0xFE0D, 0x0020, 0x0001, 0x0001
#: The outer ClientHello's name: the lab's own zone, whose certificate the front holds (a rejected ECH's
#: connection is authenticated for it).
PUBLIC_NAME = "ech.lab.test"


@dataclass(frozen=True)
class EchKeys:
    """A lab run's ECH: the files the front reads and the list the zones publish (base64, as in a record)."""

    config_file: Path
    key_file: Path
    config_list: str


def ech_config(public_key: bytes, public_name: str = PUBLIC_NAME, config_id: int = 1) -> bytes:
    """One ECHConfig: version, length, then the key's HPKE configuration, one cipher suite, the maximum name
    length (0: the client pads as it sees fit), the public name and no extensions."""
    name = public_name.encode("ascii")
    suites = struct.pack("!HHH", 4, KDF_HKDF_SHA256, AEAD_AES_128_GCM)
    contents = (
        struct.pack("!BHH", config_id, KEM_X25519, len(public_key))
        + public_key
        + suites
        + struct.pack("!BB", 0, len(name))
        + name
        + struct.pack("!H", 0)
    )
    return struct.pack("!HH", VERSION, len(contents)) + contents


def config_list(config: bytes) -> bytes:
    """An ECHConfigList of one configuration (what the HTTPS record's `ech` carries)."""
    return struct.pack("!H", len(config)) + config


def make_ech(certs: Path) -> EchKeys:
    """A new X25519 key and its configuration, written under ``certs`` (the key readable by root only; the
    front gets its own copy, harness/lab/h3front.py)."""
    private = X25519PrivateKey.generate()
    raw = private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    config = ech_config(private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw))
    key_file, config_file = certs / "ech.key", certs / "ech.config"
    key_file.touch(mode=0o600)
    key_file.write_bytes(raw)
    config_file.write_bytes(config)
    return EchKeys(config_file, key_file, base64.b64encode(config_list(config)).decode())


def ech_log(run: Path) -> Path:
    """The front's log of connections and their ECH (h3front/ech.go), in a lab's run directory."""
    return run / "logs" / "h3front-ech.log"


def ech_hosts(log: Path, since: int) -> dict[str, bool]:
    """Per server name of the connections the front logged after byte ``since``: True when one of them
    accepted ECH (the inner ClientHello's name), False when none did. A rejected ECH names the public name.
    A line is "time client name ech=0|1 quic|tcp" (h3front/ech.go)."""
    hosts: dict[str, bool] = {}
    if not log.exists():
        return hosts
    with log.open("rb") as f:
        f.seek(since)
        lines = f.read().decode(errors="replace").splitlines()
    for line in lines:
        fields = line.split(" ")
        if len(fields) == 5 and fields[3] in ("ech=0", "ech=1"):
            hosts[fields[2]] = hosts.get(fields[2], False) or fields[3] == "ech=1"
    return hosts
