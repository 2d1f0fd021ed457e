"""DNS arms: configuration, proofs and Firefox preferences (fast, no lab)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from harness.arms import ClientSide, Resolver, browser_protocols, make_arm
from harness.arms.dnsproxy import DnsproxyStub
from harness.arms.dot import DotArm
from harness.arms.evidence import client_counter_names, judge, path_failure
from harness.browser.firefox_dns import firefox_prefs, page_http3_on, refuse_page_http3_prefs
from harness.browser.prefs import PrefSet, load_prefs, user_js
from harness.errors import HarnessError
from harness.profile import load_profile
from harness.protocols import protocols

RESOLVER = Resolver("near", "198.18.1.53", "near.dns.lab.test", "https://near.dns.lab.test/dns-query")
#: A resolver serving every transport, as a lab's does.
EVERY = Resolver(
    "near",
    "198.18.1.53",
    "near.dns.lab.test",
    "https://near.dns.lab.test/dns-query",
    doq_port=8853,
    doh3_uri="https://near.dns.lab.test:8443/dns-query",
)
CLIENT = ClientSide("x-client", Path("/run/dnsstudy/x"), Path("/run/dnsstudy/x/ca.pem"), "198.18.1.60")


def zero() -> dict[str, int]:
    return {k: 0 for k in ("do53_udp", "do53_tcp", "dot", "doh")}


def packets(**counts) -> dict[str, int]:
    return {name: counts.get(name, 0) for name in client_counter_names()}


def test_every_protocol_has_an_arm():
    assert set(browser_protocols()) == {"do53", "dot", "doh", "doq", "doh3"}
    with pytest.raises(HarnessError, match="unknown protocol 'dnscrypt'"):
        make_arm("dnscrypt", RESOLVER, CLIENT)
    with pytest.raises(HarnessError, match="resolver 'near' serves no DoQ"):
        make_arm("doq", RESOLVER, CLIENT)  # RESOLVER names no DoQ endpoint
    with pytest.raises(HarnessError, match=r"the dot arm has no stub 'knot' \(it has: stubby, dnsproxy\)"):
        make_arm("dot", RESOLVER, CLIENT, stub="knot")


def test_dns_stamps_carry_the_address_and_the_name_to_authenticate():
    """The dnsproxy stub's upstream: no bootstrap query, the certificate's name checked (dnscrypt.info stamps)."""
    import base64

    from harness.arms.dnsproxy import STAMP_DOQ, stamp

    text = stamp(STAMP_DOQ, "198.18.1.53", 8853, "near.dns.lab.test")
    raw = base64.urlsafe_b64decode(text.removeprefix("sdns://") + "==")
    assert raw[0] == 0x04 and raw[1:9] == bytes(8)
    assert raw[9:] == b"\x10198.18.1.53:8853\x00\x16near.dns.lab.test:8853"


def test_proof_accepts_the_arms_own_transport_only():
    arm = make_arm("dot", RESOLVER, CLIENT)
    after = dict(zero(), dot=42)
    proof = judge(
        "dot",
        arm.transport,
        zero(),
        after,
        packets(stub_loopback=42, dot_resolver=50, dot_connections=1),
        arm.client_required,
        arm.client_forbidden,
    )
    assert proof.valid and proof.on_arm == 42 and proof.off_arm == 0


@pytest.mark.parametrize(
    "after, pk, reason",
    [
        (dict(dot=0), dict(stub_loopback=4, dot_resolver=1), "no dot query"),
        (dict(dot=40, do53_udp=2), dict(stub_loopback=4, dot_resolver=5), "2 queries over other transports"),
        (dict(dot=40), dict(stub_loopback=4, dot_resolver=5, do53_other=3), "3 packets counted on do53_other"),
        (dict(dot=40), dict(dot_resolver=5), "no packets counted on stub_loopback"),
        (
            dict(dot=40),
            dict(stub_loopback=4, dot_resolver=5, doh_connections=1),
            "1 packets counted on doh_connections",
        ),
    ],
)
def test_proof_rejects_other_transports_and_missing_evidence(after, pk, reason):
    arm = make_arm("dot", RESOLVER, CLIENT)
    proof = judge("dot", "dot", zero(), dict(zero(), **after), packets(**pk), arm.client_required, arm.client_forbidden)
    assert not proof.valid and reason in proof.reason


def test_doh_prefs_force_trr_only_with_a_bootstrap_address():
    prefs = firefox_prefs(make_arm("doh", RESOLVER, CLIENT).browser_dns(), trusts_place_ca=True)
    assert prefs["network.trr.mode"] == 3
    assert prefs["network.trr.uri"] == prefs["network.trr.custom_uri"] == RESOLVER.doh_uri
    assert prefs["network.trr.bootstrapAddr"] == RESOLVER.address
    assert firefox_prefs(make_arm("do53", RESOLVER, CLIENT).browser_dns(), True) == {"network.trr.mode": 5}


def test_the_page_s_http3_is_the_study_s_but_firefox_s_doh3_turns_it_on_too():
    h3 = "network.http.http3.enable"
    roots = "network.http.http3.disable_when_third_party_roots_found"
    do53, doh3 = (make_arm(p, EVERY, CLIENT).browser_dns() for p in ("do53", "doh3"))
    assert h3 not in firefox_prefs(do53, True) and not page_http3_on(do53, False)  # the base profile's false
    on = firefox_prefs(do53, True, page_http3=True)
    assert on[h3] is True and on[roots] is False  # the lab's CA: HTTP/3 kept beside a root Firefox does not ship
    assert firefox_prefs(do53, False, page_http3=True)[roots] is True  # the Internet: Firefox's own default
    assert firefox_prefs(doh3, True)[h3] is True and page_http3_on(doh3, False)
    with pytest.raises(HarnessError, match=r"^dns-x.toml: network.http.http3.enable is not a DNS setting"):
        refuse_page_http3_prefs("dns-x.toml", {h3: True, "network.trr.mode": 3})


#: What each arm's `firefox_prefs()` gave before arms said their DNS browser-neutrally (`BrowserDns`).
_TRR_ONLY = {
    "network.trr.mode": 3,
    "network.trr.uri": EVERY.doh_uri,
    "network.trr.custom_uri": EVERY.doh_uri,
    "network.trr.bootstrapAddr": EVERY.address,
    "network.trr.allow-rfc1918": True,
    "network.trr.confirmationNS": "skip",
    "network.trr.excluded-domains": "",
    "network.trr.builtin-excluded-domains": "",
}


@pytest.mark.parametrize("trusts_ca", [True, False])
def test_firefox_gets_exactly_the_preferences_it_got_before_the_neutral_dns_setting(trusts_ca):
    doh3 = {
        **_TRR_ONLY,
        "network.trr.uri": EVERY.doh3_uri,
        "network.trr.custom_uri": EVERY.doh3_uri,
        "network.trr.force_http3_first": True,
        "network.http.http3.enable": True,
        "network.http.http3.disable_when_third_party_roots_found": not trusts_ca,
    }
    expected: dict[str, dict[str, object]] = {
        "do53": {"network.trr.mode": 5},
        "dot": {"network.trr.mode": 5},
        "doq": {"network.trr.mode": 5},
    }
    expected |= {"doh": _TRR_ONLY, "doh3": doh3}
    for protocol, prefs in expected.items():
        got = firefox_prefs(make_arm(protocol, EVERY, CLIENT).browser_dns(), trusts_ca)
        assert list(got.items()) == list(prefs.items()), protocol  # the same values, in the same order


def test_doh3_runs_a_stub_only_for_a_browser_without_its_own_doh3():
    native = make_arm("doh3", EVERY, CLIENT)
    assert not native.uses_stub and native.browser_dns().http3
    stub = make_arm("doh3", EVERY, CLIENT, stub="dnsproxy")
    assert stub.uses_stub and stub.browser_dns().resolver == "system"
    assert "stub_loopback" in stub.client_required and "stub_loopback" in native.client_forbidden
    assert stub.describe()["upstream"].startswith("sdns://")


def test_stubby_config_requires_authentication_and_tls_only():
    arm = make_arm("dot", RESOLVER, CLIENT)
    assert isinstance(arm, DotArm)
    text = arm.config()
    assert "tls_authentication: GETDNS_AUTHENTICATION_REQUIRED" in text
    assert "dns_transport_list: [GETDNS_TRANSPORT_TLS]" in text
    assert "  - address_data: 198.18.1.53" in text
    assert 'tls_auth_name: "near.dns.lab.test"' in text


def test_stubby_config_refuses_a_non_address():
    bad = Resolver("near", "198.18.1.53\nlisten_addresses: [0.0.0.0@53]", "n", "https://n/dns-query")
    with pytest.raises(ValueError):
        arm = make_arm("dot", bad, CLIENT)
        assert isinstance(arm, DotArm)
        arm.config()


def test_every_quiet_pref_has_a_reason_and_renders():
    prefs = load_prefs()
    assert len(prefs.pref) > 30
    assert all(p.reason.strip() for p in prefs.pref)
    text = user_js(prefs.as_dict())
    assert 'user_pref("security.OCSP.enabled", 0);' in text
    assert not any(p.name.startswith(("network.trr.", "network.dns")) for p in prefs.pref)  # the DNS profile's


@pytest.mark.parametrize("path", ["profiles/firefox/dns-current.toml", "profiles/firefox/dns-2019.toml"])
def test_the_dns_profiles_pin_the_same_preferences_each_with_its_source(path):
    """Both eras name the same preferences, so a study that switches profiles changes values, never coverage."""
    prefs = load_prefs(path)
    names = {p.name for p in prefs.pref}
    assert names == {p.name for p in load_prefs("profiles/firefox/dns-current.toml").pref}
    assert {"network.trr.request_timeout_ms", "network.trr.request_timeout_mode_trronly_ms"} <= names
    assert all(len(p.reason) > 20 for p in prefs.pref)
    resolver_prefs = {"network.trr.mode", "network.trr.uri", "network.trr.custom_uri", "network.trr.bootstrapAddr"}
    assert not names & resolver_prefs  # the arm names the resolver


def test_the_2019_profile_times_trr_out_as_the_2019_browser_did():
    """Firefox 67-69 gave up on a TRR lookup after 1.5 s in every mode; current Firefox waits 30 s in mode 3."""
    old = load_prefs("profiles/firefox/dns-2019.toml").as_dict()
    new = load_prefs("profiles/firefox/dns-current.toml").as_dict()
    assert old["network.trr.request_timeout_mode_trronly_ms"] == old["network.trr.request_timeout_ms"] == 1500
    assert new["network.trr.request_timeout_mode_trronly_ms"] == 30000


def test_pref_file_errors_name_file_and_line(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[[pref]]\nname = "a.b"\nvalue = true\nreason = "x"\n\n[[pref]]\nname = "c"\nvalue = 1\n')
    with pytest.raises(HarnessError, match=r"bad.toml:6: pref\.1\.reason"):
        load_profile(path, PrefSet)
    path.write_text('[[pref]]\nname = "a.b"\nvalue = true\nreason = "x"\ncolour = "red"\n')
    with pytest.raises(HarnessError, match=r"bad.toml:5: pref\.0\.colour"):
        load_profile(path, PrefSet)


def test_each_arm_requires_its_own_transport_and_forbids_every_other_way_to_the_resolver():
    """The proof's counter sets, written out: what a Do53, DoT and DoH visit must and must not show."""
    sets = {}
    for protocol in ("do53", "dot", "doh"):
        arm = make_arm(protocol, RESOLVER, CLIENT)
        sets[protocol] = (set(arm.client_required), set(arm.client_forbidden))
    quic = {"doq_connections", "doh3_connections", "doq_other"}
    assert sets["do53"] == (
        {"do53_resolver"},
        {"dot_connections", "doh_connections", "do53_other", "dot_other", "stub_loopback"} | quic,
    )
    assert sets["dot"] == (
        {"stub_loopback", "dot_resolver"},
        {"do53_connections", "doh_connections", "do53_other", "dot_other"} | quic,
    )
    assert sets["doh"] == (
        {"doh_resolver"},
        {"do53_connections", "dot_connections", "do53_other", "dot_other", "stub_loopback"} | quic,
    )


# -- how a transport failed on the path, from the client's counters (docs/visit.md) --


@pytest.mark.parametrize(
    "protocol, counts, auth, cause",
    [
        ("dot", dict(dot_connections=8), False, "connect-timeout"),  # SYNs out, nothing back: dropped
        ("dot", dict(dot_connections=3, dot_refused=3), False, "reset"),  # answered with resets
        ("doh", dict(doh_connections=2, icmp_unreachable=2), False, "unreachable"),  # ICMP from the path
        ("dot", dict(dot_connections=2, dot_accepted=2), False, "timeout"),  # accepted, never a byte back
        ("dot", dict(dot_connections=2, dot_accepted=2), True, "timeout"),  # no server TLS: not an auth failure
        ("dot", dict(dot_connections=1, dot_accepted=1, dot_answered=1), True, "tls-auth"),
        ("doh", dict(doh_connections=2, doh_accepted=2, doh_answered=2), True, "tls-auth"),
        ("doh", dict(doh_connections=2, doh_accepted=2, doh_answered=4, doh_refused=1), False, "reset"),
        ("do53", dict(do53_connections=3), False, "timeout"),  # UDP: sent, no answer
        ("doq", dict(doq_connections=9), False, "connect-timeout"),  # QUIC: not even the handshake answered
        ("doq", dict(doq_connections=9, icmp_unreachable=3), False, "unreachable"),
        ("doq", dict(doq_connections=4, doq_answered=3), True, "tls-auth"),
        ("dot", dict(stub_loopback=4), False, None),  # the stub never tried: our part failed
        ("dot", dict(dot_connections=1, dot_accepted=1, dot_answered=3), False, None),  # nothing explains it
    ],
)
def test_path_failure_causes_come_from_what_the_client_saw(protocol, counts, auth, cause):
    assert path_failure(protocol, packets(**counts), auth) == cause


def test_counters_follow_the_resolvers_own_ports():
    """A resolver serving DoQ and DoH3 on other ports than the standard ones is counted where it serves them."""
    lab = Resolver(
        "near", "198.18.1.53", "near.dns.lab.test", "https://near.dns.lab.test/dns-query",
        doq_port=8853, doh3_uri="https://near.dns.lab.test:8443/dns-query",
    )  # fmt: skip
    by_name = {p.name: p for p in protocols()}
    assert [lab.port(by_name[n]) for n in ("do53", "dot", "doh", "doq", "doh3")] == [53, 853, 443, 8853, 8443]
    assert RESOLVER.port(by_name["doq"]) == 853  # a resolver that names no port: the standard one


def test_stub_log_verify_failures_count_only_from_the_visits_start(tmp_path):
    client = ClientSide("x-client", tmp_path, tmp_path / "ca.pem", "198.18.1.60")
    (tmp_path / "logs").mkdir()
    log = tmp_path / "logs" / "stubby.log"
    log.write_bytes(b"[08:38:18] STUBBY: 198.18.1.53  : Verify failed : TLS - *Failure* - (21) old visit\n")
    arm = DotArm(RESOLVER, client)
    arm.begin_visit()
    assert not arm.authentication_failed(None)  # the earlier visit's failure is not this one's
    with open(log, "ab") as f:
        f.write(b'[08:39:01] STUBBY: 198.18.1.53  : Verify failed : TLS - *Failure* - (62) "hostname mismatch"\n')
    assert arm.authentication_failed(None)


@pytest.mark.parametrize(
    ("protocol", "stub", "restarts"),
    [
        ("dot", "stubby", ["stop", "stubby"]),
        ("dot", "dnsproxy", ["stop", "dnsproxy"]),
        ("doq", None, ["stop", "dnsproxy"]),
        ("doh3", "dnsproxy", ["stop", "dnsproxy"]),
        ("doh3", None, []),  # the browser's own DoH3: no stub, the connection is the browser's
        ("doh", None, ["ss -K"]),  # no stub: the browser's own connections to the DoH server are closed
        ("do53", None, []),
    ],
)
@pytest.mark.parametrize("persistent", [False, True])
def test_a_connection_reset_restarts_the_stub_alone(monkeypatch, protocol, stub, restarts, persistent):
    done: list[str] = []
    monkeypatch.setattr(DnsproxyStub, "stop", lambda self: done.append("stop"))
    monkeypatch.setattr(DnsproxyStub, "start", lambda self: done.append("dnsproxy"))
    monkeypatch.setattr(DotArm, "stop", lambda self: done.append("stop"))
    monkeypatch.setattr(DotArm, "_start_stubby", lambda self: done.append("stubby"))
    monkeypatch.setattr(ClientSide, "set_system_resolver", lambda self, address: done.append("resolv.conf"))
    monkeypatch.setattr("harness.arms.doh3.nft", lambda *args: done.append("nft"))
    closing = subprocess.CompletedProcess([], 0, stdout="ESTAB 0 0 10.0.0.2:50000 198.18.1.53:443\n")

    def ran(name, argv, **kw):
        done.append(" ".join(argv[:2]))
        return closing

    monkeypatch.setattr("harness.arms.doh.netns.run", ran)
    arm = make_arm(protocol, EVERY, CLIENT, persistent=persistent, stub=stub)
    closed = arm.reset_connection()
    # resolv.conf (a reused Chromium's launch settings name its servers) and the DoH3 arm's TCP rule stay as they
    # are; a persistent stub keeps its connection across visits, as it is meant to; the browser's own DoH
    # connection is the browser's, whatever the arm's stub setting.
    assert done == ([] if persistent and protocol != "doh" else restarts)
    assert closed == (1 if protocol == "doh" else 0)
