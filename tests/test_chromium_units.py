"""Chromium's parts that need no browser: its DNS settings, the arm's rendering, the net log, net errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from harness.arms import ClientSide, Resolver, make_arm
from harness.arms.base import BrowserDns
from harness.browser.chromium import QUIET, Chromium, quiet_switches
from harness.browser.chromium_netlog import CHROMIUM_OWN_NAMES, netlog_dns, read_netlog
from harness.browser.chromium_session import navigation_error
from harness.browser.chromium_settings import ChromiumDns, ChromiumSetting, arm_switches, load_chromium_dns, local_state
from harness.errors import HarnessError
from harness.outcome import ErrorClass, Signals, classify, net_error_code

RESOLVER = Resolver("near", "198.18.1.53", "near.dns.lab.test", "https://near.dns.lab.test/dns-query")
CLIENT = ClientSide("c", Path("/run/x"), Path("/ca.pem"), dead_resolver="198.18.1.60")


def test_the_current_settings_load_and_render_as_features_switches_and_preferences():
    settings = load_chromium_dns()
    assert settings.version == "156.0.8078"
    argv = settings.switches()
    assert "--enable-features=AsyncDns,UseDnsHttpsSvcb" in argv and "--disable-features=HappyEyeballsV3" in argv
    assert not any(a.startswith("--dns-prefetch-disable") for a in argv)  # false: absent
    assert settings.preferences() == {
        "net": {"network_prediction_options": 0},
        "alternate_error_pages": {"enabled": False},
    }


def test_every_visit_has_the_omnibox_popups_off_in_one_disable_features_switch():
    settings = load_chromium_dns()
    argv = quiet_switches(settings)
    off = [a for a in argv if a.startswith("--disable-features=")]
    assert off == ["--disable-features=HappyEyeballsV3,WebUIOmniboxPopup,WebUIOmniboxAimPopup"], argv
    assert set(QUIET) < set(argv) and "--enable-features=AsyncDns,UseDnsHttpsSvcb" in argv
    on = ChromiumSetting(name="WebUIOmniboxPopup", kind="feature", value=True, reason="test")
    turned_on = ChromiumDns(version=settings.version, setting=[*settings.setting, on])
    with pytest.raises(HarnessError, match=r"^x.toml: feature WebUIOmniboxPopup must stay off"):
        quiet_switches(turned_on, "x.toml")


def test_a_feature_that_is_not_a_boolean_is_a_one_line_error(tmp_path):
    bad = tmp_path / "bad.toml"
    bad.write_text('version = "1"\n[[setting]]\nname = "AsyncDns"\nkind = "feature"\nvalue = 3\nreason = "x"\n')
    with pytest.raises(HarnessError, match="feature 'AsyncDns' must be true or false"):
        load_chromium_dns(bad)


def test_doh_is_secure_mode_with_the_template_and_the_server_mapped_never_automatic():
    dns = make_arm("doh", RESOLVER, CLIENT).browser_dns()
    assert local_state(dns) == {"dns_over_https": {"mode": "secure", "templates": RESOLVER.doh_uri}}
    assert arm_switches(dns) == ["--host-resolver-rules=MAP near.dns.lab.test 198.18.1.53"]
    for protocol in ("do53", "dot"):
        other = make_arm(protocol, RESOLVER, CLIENT).browser_dns()
        assert local_state(other)["dns_over_https"]["mode"] == "off" and arm_switches(other) == []
    with pytest.raises(HarnessError, match="no DNS over HTTP/3 of its own"):
        local_state(BrowserDns("doh", uri="https://x/dns-query", bootstrap="1.2.3.4", http3=True))


def _netlog(tmp_path: Path, events: list[dict], complete: bool = True) -> Path:
    constants = {
        "logEventTypes": {"DNS_CONFIG_CHANGED": 1, "HOST_RESOLVER_MANAGER_JOB": 2, "HOST_RESOLVER_DNS_TASK": 3,
                          "HOST_RESOLVER_SYSTEM_TASK": 4, "DOH_URL_REQUEST": 5, "SOCKET_POOL_CONNECT_JOB_CREATED": 6,
                          "SSL_CONNECT_JOB_CONNECT": 7},
        "netError": {"ERR_CERT_AUTHORITY_INVALID": -202},
        "clientInfo": {"command_line": "chromium --enable-features=AsyncDns --disable-features=HappyEyeballsV3"},
    }  # fmt: skip
    path = tmp_path / "netlog.json"
    lines = ['{"constants": ' + json.dumps(constants) + ",", '"events": [']
    lines += [json.dumps(e) + "," for e in events]
    path.write_text("\n".join(lines) + ("\n{}]}" if complete else '\n{"type": 3, "par'))
    return path


EVENTS = [
    {"type": 1, "params": {"can_use_insecure_dns_transactions": True, "secure_dns_mode": 0,
                           "nameservers": ["198.18.1.53:53"], "doh_config": {"servers": []}}},
    {"type": 2, "phase": 1, "source": {"id": 7}, "params": {"secure_dns_mode": 0, "dns_query_types": ["A", "HTTPS"]}},
    {"type": 3, "phase": 1, "source": {"id": 7}, "params": {"secure": False}},
    {"type": 3, "phase": 2, "source": {"id": 7}, "params": {"results": [{"domain_name": "a"}]}},
    {"type": 4, "phase": 2, "source": {"id": 8}, "params": {}},
]  # fmt: skip


@pytest.mark.parametrize("complete", [True, False])
def test_the_net_log_says_which_resolver_answered_and_with_which_settings(tmp_path, complete):
    found = read_netlog(_netlog(tmp_path, EVENTS, complete))
    assert found is not None
    assert found.answered == {"built-in": 1, "system": 1}
    kinds = {"AsyncDns": "feature", "UseDnsHttpsSvcb": "feature", "HappyEyeballsV3": "feature", "x": "switch"}
    assert found.settings(kinds) == {"AsyncDns": True, "UseDnsHttpsSvcb": True, "HappyEyeballsV3": False, "x": False}
    assert found.summary()["config_secure_dns_mode"] == "off" and found.summary()["nameservers"] == ["198.18.1.53:53"]
    assert not found.doh_cert_errors


def test_a_doh_request_failing_on_its_certificate_is_seen(tmp_path):
    group = "dns_bootstrap/pm/https://near.dns.lab.test <null (dns over https)>"
    events = [
        {"type": 6, "phase": 0, "source": {"id": 9}, "params": {"group_id": group}},
        {"type": 7, "phase": 2, "source": {"id": 9}, "params": {"net_error": -202}},
        {"type": 7, "phase": 2, "source": {"id": 10}, "params": {"net_error": -202}},  # a web host's: not DoH
    ]
    found = read_netlog(_netlog(tmp_path, events))
    assert found is not None and found.doh_cert_errors == ["ERR_CERT_AUTHORITY_INVALID"]
    assert read_netlog(tmp_path / "missing.json") is None


def test_the_navigation_s_net_error_comes_from_its_own_fetch_error():
    events = [
        {"method": "network.fetchError", "params": {"navigation": None, "errorText": "net::ERR_FAILED"}},
        {"method": "network.fetchError", "params": {"navigation": "n1", "errorText": "net::ERR_NAME_NOT_RESOLVED"}},
    ]
    assert navigation_error(events) == "net::ERR_NAME_NOT_RESOLVED"
    assert navigation_error(events[:1]) is None


@pytest.mark.parametrize(
    ("net_error", "strict", "paper"),
    [
        ("net::ERR_NAME_NOT_RESOLVED", "DNS Error", "DNS Error"),
        ("net::ERR_DNS_TIMED_OUT", "DNS Error", "DNS Error"),
        ("net::ERR_CONNECTION_REFUSED", "Other Error", "DNS Error"),
        ("net::ERR_CERT_AUTHORITY_INVALID", "Other Error", "Other Error"),
        ("net::ERR_CONNECTION_RESET", "Other Error", "Other Error"),
    ],
)
def test_chromium_net_errors_read_like_firefox_s_error_pages_in_both_taxonomies(net_error, strict, paper):
    signals = Signals(
        exception="WebDriverException",
        document_uri="chrome-error://chromewebdata/",
        on_load_ms=None,
        driver_failure=None,
        arm_problem=None,
        proof_valid=True,
        proof_reason="",
        har_problem=None,
        net_error=net_error,
    )
    outcome = classify(signals)
    assert (outcome.error_class.value, outcome.paper_2019, outcome.detail) == (strict, paper, net_error)
    assert outcome.page_class is ErrorClass(strict)


def test_every_named_net_error_maps_to_a_firefox_code():
    assert net_error_code("net::ERR_NAME_NOT_RESOLVED") == "dnsNotFound"
    assert net_error_code("ERR_CERT_WEAK_KEY") == "nssBadCert"
    assert net_error_code("net::ERR_SOMETHING_NEW") == "unknown"


def test_an_installed_chromium_the_settings_were_not_read_from_is_a_one_line_warning():
    browser = Chromium.__new__(Chromium)  # no browser account or lab needed for the check itself
    browser.settings, browser.browser_dns = load_chromium_dns(), "profiles/chromium/dns-current.toml"
    browser.version = "156.0.8078.108"
    assert browser.unexpected_version() is None
    browser.version = "157.0.1.2"
    warning = browser.unexpected_version()
    assert warning is not None and "\n" not in warning
    assert warning.startswith("warning: Chromium 157.0.1.2 is installed") and "156.0.8078" in warning


def test_the_browser_s_own_lookups_before_the_page_s_first_are_counted():
    # As a fresh Chromium's log has them: its services' names within ms of its start, then the page's, and its
    # services again later (not counted: the page had asked by then). Ends of lookups (phase 2) are not lookups.
    request = 7

    def lookup(host: str, phase: int = 1) -> dict:
        return {"type": request, "phase": phase, "source": {"id": 1}, "params": {"host": host}}

    events = [
        lookup("https://198.18.221.53"),  # the DoH server, an address: no lookup of a name
        lookup("[2001:db8::53]:443"),  # an address without a scheme
        lookup("http://clients2.google.com"),
        lookup("https://accounts.google.com"),
        lookup("https://accounts.google.com", phase=2),
        lookup("https://update.googleapis.com:443"),
        lookup("https://google.com"),
        lookup("https://accounts.google.com"),
    ]
    data = {"constants": {"logEventTypes": {"HOST_RESOLVER_MANAGER_REQUEST": request}}, "events": events}
    found = netlog_dns(data, own_names=CHROMIUM_OWN_NAMES)
    assert found is not None and found.summary()["own_lookups_before_page"] == 3
    later = netlog_dns({**data, "events": events[6:]}, own_names=CHROMIUM_OWN_NAMES)  # the page asked first
    assert later is not None and later.summary()["own_lookups_before_page"] == 0
    unknown = netlog_dns(data)  # a browser whose own names are not known: nothing said
    assert unknown is not None and unknown.summary()["own_lookups_before_page"] is None
