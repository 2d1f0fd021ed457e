"""The timer wrapper's logic: records, command lines, HAR hostnames, bench settings. No network."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from harness.arms.base import Resolver
from harness.bench import load_bench_profile, with_loss
from harness.errors import HarnessError
from harness.shaping.profile import load_link_profile
from harness.timer import TimerSettings, Timing, hostnames_from_hars, shuffled, timer_argv

LAB = Resolver(
    name="near",
    address="198.18.1.53",
    tls_name="near.dns.lab.test",
    doh_uri="https://near.dns.lab.test/dns-query",
    doq_port=8853,
    doh3_uri="https://near.dns.lab.test:8443/dns-query",
)
PLAIN = Resolver(name="plain", address="192.0.2.1", tls_name="x.test", doh_uri="https://x.test/dns-query")
CA = Path("/tmp/ca.pem")

RECORD = {
    "index": 3,
    "name": "www.lab.test",
    "type": "A",
    "protocol": "dot",
    "resolver": "near",
    "server": "198.18.1.53",
    "start": 1.5,
    "duration_us": 3200,
    "new_connection": True,
    "tcp_setup_us": 200,
    "tls_setup_us": 1100,
    "rcode": 0,
    "answers": 1,
    "status": "ok",
    "transport": "tls",
    "error": None,
    "concurrency": 1,
    "interval_ms": 0,
    "timeout_ms": 5000,
    "idle_timeout_ms": 10000,
    "nagle": False,
    "library": "getdns",
    "reuse": True,
}


def test_a_record_parses_and_its_handshake_is_tcp_plus_tls():
    t = Timing.from_json(json.dumps(RECORD))
    assert t.ok and t.ms == 3.2 and t.handshake_us == 1300
    quic = Timing.from_json(json.dumps({**RECORD, "tcp_setup_us": None, "tls_setup_us": 900}))
    assert quic.handshake_us == 900
    warm = Timing.from_json(json.dumps({**RECORD, "new_connection": False}))
    assert warm.handshake_us is None


def test_each_protocol_gets_its_program_and_endpoint():
    s = TimerSettings()
    do53 = timer_argv("do53", LAB, CA, s)
    assert do53[0].endswith("/dnstimer") and do53[do53.index("--server") + 1] == "198.18.1.53"
    assert "--tls-name" not in do53
    dot = timer_argv("dot", LAB, CA, s)
    assert dot[dot.index("--tls-name") + 1] == "near.dns.lab.test"
    doh = timer_argv("doh", LAB, CA, s)
    assert doh[doh.index("--url") + 1] == LAB.doh_uri
    doq = timer_argv("doq", LAB, CA, s)
    assert doq[0].endswith("/quictimer") and doq[doq.index("--port") + 1] == "8853"
    doh3 = timer_argv("doh3", LAB, CA, TimerSettings(reuse=False, concurrency=4, interval_ms=2.5))
    assert doh3[doh3.index("--port") + 1] == "8443" and "--reuse=false" in doh3
    assert doh3[doh3.index("--concurrency") + 1] == "4" and doh3[doh3.index("--interval-ms") + 1] == "2.5"
    assert "--no-reuse" in timer_argv("dot", LAB, CA, TimerSettings(reuse=False))


def test_unknown_protocol_and_missing_endpoints_are_clear_errors():
    with pytest.raises(HarnessError, match="unknown protocol 'dnscrypt'"):
        timer_argv("dnscrypt", LAB, CA, TimerSettings())
    with pytest.raises(HarnessError, match="resolver 'plain' serves no DoQ"):
        timer_argv("doq", PLAIN, CA, TimerSettings())
    with pytest.raises(HarnessError, match="serves no DoH3"):
        timer_argv("doh3", PLAIN, CA, TimerSettings())


def test_the_order_is_random_but_reproducible():
    names = [f"n{i}.test" for i in range(50)]
    a, b = shuffled(names, 7, "near/dot"), shuffled(reversed(names), 7, "near/dot")
    assert a == b and sorted(a) == sorted(names) and a != names
    assert shuffled(names, 7, "near/doh") != a and shuffled(names, 8, "near/dot") != a


def _har(urls: list[str]) -> dict:
    def entry(u: str) -> dict:
        return {
            "pageref": "page_1",
            "startedDateTime": "2026-01-01T00:00:00.000Z",
            "time": 1,
            "request": {
                "method": "GET",
                "url": u,
                "httpVersion": "HTTP/2",
                "headers": [],
                "queryString": [],
                "cookies": [],
                "headersSize": -1,
                "bodySize": 0,
            },
            "response": {
                "status": 200,
                "statusText": "",
                "httpVersion": "HTTP/2",
                "headers": [],
                "cookies": [],
                "content": {"size": 0, "mimeType": "text/html"},
                "redirectURL": "",
                "headersSize": -1,
                "bodySize": 0,
            },
            "cache": {},
            "timings": {"send": 0, "wait": 1, "receive": 0},
        }

    return {
        "log": {
            "version": "1.2",
            "creator": {"name": "t", "version": "1"},
            "pages": [
                {
                    "id": "page_1",
                    "startedDateTime": "2026-01-01T00:00:00.000Z",
                    "title": urls[0],
                    "pageTimings": {"onContentLoad": 1, "onLoad": 2},
                }
            ],
            "entries": [entry(u) for u in urls],
        }
    }


def test_hostnames_come_from_every_har_once(tmp_path):
    (tmp_path / "hars").mkdir()
    with gzip.open(tmp_path / "hars" / "a.har.gz", "wt") as f:
        json.dump(_har(["https://www.a.test/", "https://cdn.b.test/x.js", "https://WWW.A.TEST/y.css"]), f)
    (tmp_path / "b.har").write_text(json.dumps(_har(["https://cdn.b.test/z", "https://c.test:8443/"])))
    assert hostnames_from_hars([tmp_path / "hars", tmp_path / "b.har"]) == ["c.test", "cdn.b.test", "www.a.test"]


def test_a_missing_or_broken_har_is_named(tmp_path):
    with pytest.raises(HarnessError, match="nope.har: no such HAR"):
        hostnames_from_hars([tmp_path / "nope.har"])
    (tmp_path / "bad.har").write_text("{not json")
    with pytest.raises(HarnessError, match="bad.har: not a readable HAR"):
        hostnames_from_hars([tmp_path / "bad.har"])


def test_the_shipped_bench_profile_loads_and_a_wrong_one_is_named(tmp_path):
    profile = load_bench_profile()
    assert profile.loss_sweep.loss_percent == [0, 1, 5, 10, 15, 20]
    assert set(profile.loss_sweep.protocols) == {"do53", "dot", "doq", "doh"}
    text = Path("profiles/bench/default.toml").read_text().replace('"doq", "doh"]', '"doq", "dnscrypt"]', 1)
    bad = tmp_path / "bad.toml"
    bad.write_text(text)
    with pytest.raises(HarnessError, match="bad.toml: unknown protocol 'dnscrypt'"):
        load_bench_profile(bad)
    bad.write_text(Path("profiles/bench/default.toml").read_text().replace("seconds = 10", "seconds = -1"))
    with pytest.raises(HarnessError, match="seconds"):
        load_bench_profile(bad)


def test_loss_is_added_to_both_directions_and_nothing_else_changes():
    base = load_link_profile("4g")
    lossy = with_loss(base, 15)
    assert lossy.uplink.loss_percent == lossy.downlink.loss_percent == 15
    assert lossy.uplink.delay_ms == base.uplink.delay_ms and lossy.downlink.rate_mbit == base.downlink.rate_mbit
    assert "loss15" in lossy.name
