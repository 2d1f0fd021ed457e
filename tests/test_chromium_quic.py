"""Chromium and a place's CA over QUIC (harness/browser/chromium_quic.py): the switch that allows the hosts a place
names its CA over QUIC without forcing any, when Chromium adds it, and what a visit reads back. No browser."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from harness.arms import ClientSide, Resolver, make_arm
from harness.browser.chromium import Chromium, quiet_switches, study_switches
from harness.browser.chromium_quic import (
    DECOY_QUIC_PORT,
    MAX_SWITCH_BYTES,
    SWITCH,
    quic_ca_hosts,
    unknown_root_hosts,
    with_quic_ca_hosts,
)
from harness.browser.chromium_reused import launch_settings
from harness.browser.chromium_settings import ChromiumDns, ChromiumSetting, load_chromium_dns
from harness.errors import HarnessError
from harness.lab.config import load_lab_config
from harness.lab.lab import Lab
from harness.lab.replayweb import ReplayWeb

RESOLVER = Resolver("near", "198.18.1.53", "near.dns.lab.test", "https://near.dns.lab.test/dns-query", doq_port=853)
HOSTS = ("a.test", "www.b.test")
LAB_CLIENT = ClientSide("c", Path("/run/x"), Path("/ca.pem"), dead_resolver="198.18.1.60", quic_ca_hosts=HOSTS)


def _forced(argument: str) -> list[str]:
    """The origins of an --origin-to-force-quic-on argument at a port other than the decoy's."""
    origins = argument.partition("=")[2].split(",")
    return [o for o in origins if not o.endswith(f":{DECOY_QUIC_PORT}")]


def test_each_host_is_named_at_the_decoy_port_only_so_nothing_is_forced():
    assert DECOY_QUIC_PORT not in (80, 443)
    assert unknown_root_hosts(HOSTS) == "a.test:9,www.b.test:9"
    assert with_quic_ca_hosts(["--x"], HOSTS) == ["--x", f"--{SWITCH}=a.test:9,www.b.test:9"]


def test_a_place_naming_no_hosts_leaves_the_switches_as_they_are():
    assert with_quic_ca_hosts(["--x", f"--{SWITCH}=a.test:443"], ()) == ["--x", f"--{SWITCH}=a.test:443"]


@pytest.mark.parametrize(
    ("own", "merged"),
    [
        (f"--{SWITCH}=a.test:443", f"--{SWITCH}=a.test:443,a.test:9,www.b.test:9"),
        (f"--{SWITCH}=*", f"--{SWITCH}=*,a.test:9,www.b.test:9"),
        (f"--{SWITCH}", f"--{SWITCH}=a.test:9,www.b.test:9"),
    ],
)
def test_a_profile_s_own_forced_origins_stay_forced_in_its_place(own, merged):
    """Chromium reads a switch once: the profile's value and the decoys are merged into one argument where the
    profile's was, every origin it forced still named at its port."""
    switches = with_quic_ca_hosts(["--x", own, "--y"], HOSTS)
    assert switches == ["--x", merged, "--y"]
    assert _forced(own) == _forced(merged) or own == f"--{SWITCH}"


def test_a_list_too_long_for_chromium_is_a_one_line_error():
    hosts = [f"host{i:06d}.example.test" for i in range(MAX_SWITCH_BYTES // 25)]
    with pytest.raises(HarnessError, match=r"over the 60000 Chromium starts with") as caught:
        with_quic_ca_hosts([], hosts)
    assert "\n" not in str(caught.value) and f"{len(hosts)} hosts" in str(caught.value)


def _switches(settings: ChromiumDns, client: ClientSide, page_http3: bool = True) -> list[str]:
    return study_switches(settings, client, page_http3, "dns-current.toml")


def test_chromium_adds_the_switch_only_where_it_trusts_the_place_s_ca():
    settings = load_chromium_dns()
    quiet = quiet_switches(settings)
    assert _switches(settings, LAB_CLIENT) == [*quiet, f"--{SWITCH}=a.test:9,www.b.test:9"]
    assert _switches(settings, replace(LAB_CLIENT, browser_trusts_ca=False)) == quiet  # Internet: real roots
    assert _switches(settings, replace(LAB_CLIENT, quic_ca_hosts=())) == quiet  # no HTTP/3 in the place


def test_without_page_http3_chromium_has_no_quic_and_a_profile_may_not_force_it():
    settings = load_chromium_dns()
    assert _switches(settings, LAB_CLIENT, page_http3=False) == [*quiet_switches(settings), "--disable-quic"]
    own = ChromiumSetting(name=SWITCH, kind="switch", value="a.test:443", reason="forced (test)")
    forcing = ChromiumDns(version=settings.version, setting=[*settings.setting, own])
    with pytest.raises(HarnessError, match=r"^dns-current.toml: origin-to-force-quic-on forces QUIC, but .*false$"):
        _switches(forcing, LAB_CLIENT, page_http3=False)


def test_a_profile_that_forces_quic_itself_keeps_its_origin_beside_the_place_s_hosts():
    settings = load_chromium_dns()
    own = ChromiumSetting(name=SWITCH, kind="switch", value="a.test:443", reason="forced (test)")
    forcing = ChromiumDns(version=settings.version, setting=[*settings.setting, own])
    argv = [a for a in _switches(forcing, LAB_CLIENT) if a.startswith(f"--{SWITCH}")]
    assert argv == [f"--{SWITCH}=a.test:443,a.test:9,www.b.test:9"]


def _browser(client: ClientSide) -> Chromium:
    browser = Chromium.__new__(Chromium)  # no browser account or lab needed to render the switches
    browser.settings, browser.client, browser.timeout, browser.margin = load_chromium_dns(), client, 30.0, 10.0
    browser.study_switches = _switches(browser.settings, client)
    return browser


def test_the_switch_is_part_of_the_launch_settings_and_the_same_for_every_visit_of_a_group():
    """A reused Chromium is replaced when its launch settings change: the place's hosts are the same at every
    visit, so two visits of one launch group (the stub arms) compare equal and cause no restart."""
    browser = _browser(LAB_CLIENT)
    launches = []
    for protocol in ("dot", "doq"):
        kwargs = browser._session_kwargs(make_arm(protocol, RESOLVER, LAB_CLIENT))
        assert f"--{SWITCH}=a.test:9,www.b.test:9" in kwargs["switches"]
        launches.append(launch_settings(kwargs["switches"], kwargs["local_state"], ["127.0.0.1"]))
    assert launches[0] == launches[1]


def test_a_visit_reads_the_hosts_allowed_back_from_the_browser_s_command_line():
    line = f"chromium --headless --{SWITCH}=a.test:443,a.test:9,www.b.test:9 --enable-features=AsyncDns"
    assert quic_ca_hosts(line) == 2  # the forced origin is not one of them
    assert quic_ca_hosts("chromium --headless") == 0
    assert quic_ca_hosts(f"chromium --{SWITCH}=*") == 0


def test_a_lab_names_the_hosts_its_web_announces_http3_for_only_when_it_serves_http3():
    """The default web's 2,000 sites with HTTPS records: the hosts of the sites that announce HTTP/3 (a record or
    Alt-Svc), in a switch Chromium starts with; without the records every site announces it, too many for one
    Chromium (a one-line error); without HTTP/3, none."""
    records = Lab(load_lab_config("profiles/lab/https-records.toml"))
    hosts = records.client_side().quic_ca_hosts
    every = records.web_hostnames()
    assert set(hosts) < set(every) and 1000 < len(hosts) < len(every) / 2, (len(hosts), len(every))
    assert len(with_quic_ca_hosts([], hosts)[0].encode()) < MAX_SWITCH_BYTES
    http3 = Lab(load_lab_config("profiles/lab/http3.toml"))
    assert list(http3.client_side().quic_ca_hosts) == http3.web_hostnames()
    with pytest.raises(HarnessError, match="fewer sites"):
        with_quic_ca_hosts([], http3.client_side().quic_ca_hosts)
    assert Lab(load_lab_config("profiles/lab/default.toml")).client_side().quic_ca_hosts == ()


def test_a_replay_names_the_hosts_at_its_addresses_that_offer_http3():
    web = ReplayWeb(
        Path("archive"),
        hosts_at={"198.18.0.10": {"x.test", "cdn.x.test"}, "198.18.0.11": {"y.test"}},
        h3_at={"198.18.0.10"},
        tls_at={"198.18.0.10", "198.18.0.11"},
        hostnames=["cdn.x.test", "x.test", "y.test"],
    )
    assert web.h3_hostnames(http3=True) == ["cdn.x.test", "x.test"]
    assert web.h3_hostnames(http3=False) == []
