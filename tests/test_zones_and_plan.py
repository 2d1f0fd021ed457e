"""Address plan, DNS data and collision checks, without touching the network."""

from __future__ import annotations

import ipaddress

import pytest

from harness import netns
from harness.errors import HarnessError
from harness.lab import topology
from harness.lab.config import load_lab_config
from harness.lab.zones import build_zones, root_zone_file, unbound_local_data, web_address


@pytest.fixture(scope="module")
def config():
    return load_lab_config()


def test_address_plan_stays_inside_the_subnet(config):
    net = config.network
    plan = config.addresses
    addrs = topology.server_addresses(config) + [plan.client, plan.shaper_client_side, plan.shaper_server_side]
    assert len(set(addrs)) == len(addrs)
    assert all(ipaddress.IPv4Address(a) in net for a in addrs)
    assert ipaddress.IPv4Address(plan.client) in plan.client_net
    assert ipaddress.IPv4Address(plan.auth) in plan.server_net


def test_namespaces_carry_the_prefix(config):
    other = config.with_overrides(prefix="alice", subnet="198.18.8.0/23")
    assert set(other.namespaces.values()) == {"alice-client", "alice-shaper", "alice-server"}
    assert not set(other.namespaces.values()) & set(config.namespaces.values())


def test_every_hostname_gets_one_address(config):
    host_domain = {"google.com": "google.com", "www.google.com": "google.com", "cdn.youtube.com": "youtube.com"}
    zones = build_zones(config, host_domain)
    assert zones.address_of("www.google.com") == zones.address_of("google.com") == web_address(config, "google.com")
    assert zones.address_of("near.dns.lab.test") == config.addresses.resolver(0)
    local = unbound_local_data(zones)
    assert 'local-zone: "google.com." static' in local
    assert 'local-data: "cdn.youtube.com. 3600 IN A' in local
    root = root_zone_file(zones, config.addresses.auth)
    assert root.splitlines()[1].startswith(". IN SOA")
    assert f"www.google.com. IN A {web_address(config, 'google.com')}" in root


def test_web_address_is_stable_and_spread(config):
    domains = [f"site{i}.com" for i in range(500)]
    addrs = [web_address(config, d) for d in domains]
    assert addrs == [web_address(config, d) for d in domains]
    assert len(set(addrs)) == config.settings.web_addresses


def test_collision_with_host_address_refused(config, monkeypatch):
    monkeypatch.setattr(netns, "host_networks", lambda: [("eth9", ipaddress.IPv4Network("198.18.1.0/24"))])
    with pytest.raises(HarnessError, match=r"collides with 198.18.1.0/24 on host interface eth9"):
        topology.check_collisions(config)
    monkeypatch.setattr(netns, "host_networks", lambda: [("eth0", ipaddress.IPv4Network("10.0.0.0/8"))])
    topology.check_collisions(config)
