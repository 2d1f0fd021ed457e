"""HTTPS records in the lab's zones (no lab): each site's kind from the web profile's shares, what unbound and
nginx are given, and what a lab profile may ask (harness/lab/svcb.py, docs/web.md "HTTPS records")."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from pydantic import ValidationError

from harness.lab.config import LocalResolver, RecursiveResolver, WebSettings, load_lab_config
from harness.lab.h3front import ALT_SVC
from harness.lab.nginx import nginx_config
from harness.lab.svcb import HttpsShares, load_shares, site_kind, site_kinds
from harness.lab.zones import ZoneData, local_data_file, root_zone_file, unbound_local_data

PROFILE = "profiles/lab/https-records.toml"
ZONES = ZoneData(
    records={"a.test": {"a.test": "198.18.1.100", "www.a.test": "198.18.1.100"}, "b.test": {"b.test": "198.18.1.101"}},
    https={"a.test": "record", "b.test": "none"},
)


def test_each_site_s_kind_follows_the_shares_and_the_seed():
    shares = load_shares("profiles/web/https-records.toml")
    assert (shares.record, shares.alt_svc, shares.none) == (0.24, 0.06, 0.70)
    domains = [f"site{i}.test" for i in range(4000)]
    kinds = site_kinds(2019, domains, shares)
    counts = Counter(kinds.values())
    assert abs(counts["record"] / 4000 - 0.24) < 0.03 and abs(counts["alt_svc"] / 4000 - 0.06) < 0.015
    assert site_kinds(2019, domains, shares) == kinds  # the same in every run
    assert site_kinds(2020, domains, shares) != kinds  # another seed, another draw
    assert {site_kind(1, d, HttpsShares(record=0, alt_svc=0, none=1)) for d in domains[:50]} == {"none"}


def test_shares_must_sum_to_one():
    with pytest.raises(ValidationError, match="sum to"):
        HttpsShares(record=0.5, alt_svc=0.5, none=0.5)


def test_records_need_http3_and_are_off_by_default():
    assert load_lab_config().settings.web.https_records is None
    assert load_lab_config("profiles/lab/http3.toml").settings.web.https_records is None
    web = load_lab_config(PROFILE).settings.web
    assert web.http3 and web.https_records == "profiles/web/https-records.toml"
    with pytest.raises(ValidationError, match="needs http3"):
        WebSettings(**(web.model_dump() | {"http3": False}))


def test_every_hostname_of_a_record_site_has_one_in_both_zone_renderings():
    want = {
        "a.test": '1 . alpn="h3,h2" ipv4hint=198.18.1.100',
        "www.a.test": '1 . alpn="h3,h2" ipv4hint=198.18.1.100',
    }
    assert ZONES.https_records() == want
    local, root = unbound_local_data(ZONES), root_zone_file(ZONES, "198.18.1.2")
    for host, data in want.items():
        assert f"local-data: '{host}. 3600 IN HTTPS {data}'" in local
        assert f"{host}. IN HTTPS {data}" in root.splitlines()
    assert "b.test. 3600 IN HTTPS" not in local and "b.test. IN HTTPS" not in root
    assert "HTTPS" not in unbound_local_data(ZoneData(records=ZONES.records))


def test_a_bare_resolver_s_local_data_leave_the_records_out_and_keep_every_address(tmp_path):
    """The profile's near-bare resolver: the same web without HTTPS records, beside near with them."""
    resolvers = {r.name: r for r in load_lab_config(PROFILE).settings.resolvers}
    near, bare = resolvers["near"], resolvers["near-bare"]
    assert isinstance(near, LocalResolver) and isinstance(bare, LocalResolver)
    assert near.https_records and not bare.https_records
    assert local_data_file(tmp_path, resolvers["near"]).name == "local-data.conf"
    assert local_data_file(tmp_path, resolvers["near-bare"]).name == "local-data-bare.conf"
    assert local_data_file(tmp_path, resolvers["far"]).name == "local-data.conf"
    full, without = unbound_local_data(ZONES), unbound_local_data(ZONES, https=False)
    assert "IN HTTPS" in full and "IN HTTPS" not in without
    assert [line for line in full.splitlines() if "IN HTTPS" not in line] == without.splitlines()
    with pytest.raises(ValidationError, match="https_records"):
        RecursiveResolver.model_validate(
            {"name": "far", "kind": "recursive", "upstream_rtt_ms": 40, "https_records": False}
        )


def test_a_site_with_neither_does_not_announce_http3():
    certs = {"a.test": Path("/c/a.pem"), "b.test": Path("/c/b.pem")}
    badcert = ("198.18.1.62", Path("/c/bad.pem"), Path("/c/bad.key"))
    conf = nginx_config(ZONES, Path("/run/x"), Path("/web"), certs, Path("/c/web.key"), badcert, http3=True)
    blocks = {b.split("server_name ", 1)[1].split(" ", 1)[0]: b for b in conf.split("  server {")[1:]}
    assert f"add_header Alt-Svc '{ALT_SVC}' always;" in conf.split("  server {")[0]  # the http block's
    assert "add_header" not in blocks["a.test"]  # inherits Alt-Svc and Cache-Control
    assert 'add_header Cache-Control "no-store" always;' in blocks["b.test"]  # and so inherits neither
