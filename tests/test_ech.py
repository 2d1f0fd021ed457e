"""Encrypted Client Hello's lab parts that touch no network (harness/lab/ech.py): the configuration's layout,
its list as an HTTPS record carries it (read back by dnspython), the front's connection log read from a
window, a visit's record of it, and the profile's rule that ECH needs HTTPS records."""

from __future__ import annotations

import base64
import struct

import dns.rdata
import dns.rdataclass
import dns.rdatatype
import dns.rdtypes.svcbbase
import pytest
from pydantic import ValidationError

from harness.https_use import https_use_record
from harness.lab.config import WebSettings
from harness.lab.ech import (
    AEAD_AES_128_GCM,
    KDF_HKDF_SHA256,
    KEM_X25519,
    PUBLIC_NAME,
    VERSION,
    config_list,
    ech_config,
    ech_hosts,
    make_ech,
)
from harness.lab.svcb import https_rdata


def test_the_configuration_has_the_specified_layout():
    key = bytes(range(32))
    config = ech_config(key)
    version, length, config_id, kem, key_length = struct.unpack("!HHBHH", config[:9])
    assert (version, length, config_id, kem, key_length) == (VERSION, len(config) - 4, 1, KEM_X25519, 32)
    assert config[9:41] == key
    assert struct.unpack("!HHH", config[41:47]) == (4, KDF_HKDF_SHA256, AEAD_AES_128_GCM)
    max_name, name_length = config[47], config[48]
    assert max_name == 0 and config[49 : 49 + name_length] == PUBLIC_NAME.encode()
    assert config[49 + name_length :] == b"\x00\x00"  # no extensions
    assert config_list(config) == struct.pack("!H", len(config)) + config


def test_an_https_record_carries_the_list_as_dnspython_reads_it(tmp_path):
    keys = make_ech(tmp_path)
    assert (tmp_path / "ech.key").stat().st_mode & 0o077 == 0 and len((tmp_path / "ech.key").read_bytes()) == 32
    rdata = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.HTTPS, https_rdata("198.18.1.10", keys.config_list))
    ech = rdata.params[dns.rdtypes.svcbbase.ParamKey.ECH].ech  # type: ignore[attr-defined]
    assert ech == base64.b64decode(keys.config_list) == config_list((tmp_path / "ech.config").read_bytes())
    assert "ech=" not in https_rdata("198.18.1.10")


def test_the_connection_log_is_read_from_the_window(tmp_path):
    log = tmp_path / "h3front-ech.log"
    log.write_text("2026-11-28T22:00:00Z 198.18.0.2:1 old.test ech=1 quic\n")
    window = log.stat().st_size
    with log.open("a") as f:
        f.write("2026-11-28T22:00:01Z 198.18.0.2:2 a.test ech=0 tcp\n")
        f.write("2026-11-28T22:00:01Z 198.18.0.2:3 a.test ech=1 quic\n")
        f.write(f"2026-11-28T22:00:01Z 198.18.0.2:4 {PUBLIC_NAME} ech=0 quic\n")
        f.write("2026-11-28T22:00:01Z 198.18.0.2:5 b.test ech=0 quic\n")
        f.write("a torn line\n")
    assert ech_hosts(log, window) == {"a.test": True, PUBLIC_NAME: False, "b.test": False}
    assert ech_hosts(tmp_path / "none.log", 0) == {}


def _har(*urls_versions: tuple[str, str]) -> dict:
    entries = [{"request": {"url": u}, "response": {"httpVersion": v}} for u, v in urls_versions]
    return {"log": {"entries": entries}}


def test_a_visit_records_which_hosts_accepted_ech():
    har = _har(("https://a.test/", "HTTP/3"), ("https://b.test/x", "HTTP/3"), ("https://c.test/y", "HTTP/2"))
    record = https_use_record(har, "https://a.test/", [], frozenset({"a.test"}), {"a.test": True, "b.test": False})
    assert record["ech_accepted"] == 1
    assert [h["ech"] for h in record["https_hosts"]] == [True, False, None]  # c.test: never seen by the front
    without = https_use_record(har, "https://a.test/", [], frozenset({"a.test"}))
    assert without["ech_accepted"] is None and "ech" not in without["https_hosts"][0]


def test_ech_needs_https_records():
    base = {"sites": "s", "top": 1, "shape": "p", "seed": 1, "http3": True}
    with pytest.raises(ValidationError, match="ech is published in HTTPS records"):
        WebSettings.model_validate(base | {"ech": True})
    assert WebSettings.model_validate(base | {"ech": True, "https_records": "r.toml"}).ech
