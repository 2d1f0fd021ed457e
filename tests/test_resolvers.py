"""Resolver profiles for the Internet and the host's own resolver. No network."""

from __future__ import annotations

import pytest

from harness.errors import HarnessError
from harness.internet.config import internet_config
from harness.resolvers import available_resolvers, host_resolver, load_resolver


def test_shipped_public_resolvers_load_with_every_endpoint():
    assert {"default", "cloudflare", "google", "quad9"} <= set(available_resolvers())
    cf = load_resolver("cloudflare")
    assert (cf.address, cf.tls_name, cf.doh_uri) == (
        "1.1.1.1",
        "cloudflare-dns.com",
        "https://cloudflare-dns.com/dns-query",
    )
    assert cf.control_config is None  # no statistics from a public resolver
    with pytest.raises(HarnessError, match="no resolver profile 'nope'"):
        load_resolver("nope")


def test_the_host_resolver_is_the_first_nameserver_and_never_loopback(tmp_path):
    conf = tmp_path / "resolv.conf"
    conf.write_text("# comment\nsearch example\nnameserver 192.0.2.53\nnameserver 192.0.2.54\n")
    r = host_resolver(conf)
    assert (r.name, r.address) == ("default", "192.0.2.53")
    conf.write_text("nameserver 127.0.0.53\n")
    with pytest.raises(HarnessError, match="127.0.0.53 is on loopback"):
        host_resolver(conf)
    conf.write_text("search example\n")
    with pytest.raises(HarnessError, match="no 'nameserver' line"):
        host_resolver(conf)


def test_internet_side_names_are_checked_before_they_reach_nftables():
    with pytest.raises(HarnessError, match="not a Linux interface name"):
        internet_config("dsnet", 'eth0" accept; flush ruleset; "')
    with pytest.raises(HarnessError, match="name 'Bad_Name'"):
        internet_config("Bad_Name", "eth0")
    cfg = internet_config("dsnet", "eth0")
    assert cfg.namespaces == {"client": "dsnet-client", "shaper": "dsnet-shaper"} and cfg.host_if == "dsnet-up"
