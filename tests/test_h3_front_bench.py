"""benchmarks/h3_front.py --replay (no lab): which recorded exchanges it times, what it leaves out and why, and
its replay lab without the recorded waits."""

from __future__ import annotations

from benchmarks.h3_front import replay_urls
from harness.lab.config import load_lab_config
from harness.replay.archive import Exchange


def _exchange(url: str, status: int = 200, method: str = "GET", failure: str = "") -> Exchange:
    return Exchange(method, url, status, "HTTP/2.0", [], [], b"", 0.0, failure)


def test_only_distinct_recorded_answers_over_https_where_http3_is_offered_are_timed():
    exchanges = [
        _exchange("https://a.test/"),
        _exchange("https://a.test/moved", 301),
        _exchange("https://a.test/beacon", 204),
        _exchange("https://a.test/"),  # a repeat
        _exchange("https://a.test/favicon.ico", 404),
        _exchange("https://a.test/broken", 500),
        _exchange("https://a.test/reset", 0, failure="net::ERR_CONNECTION_RESET"),
        _exchange("https://a.test/form", method="POST"),
        _exchange("http://a.test/plain"),
        _exchange("https://b.test/x.js"),  # b.test's address has no HTTP/3
    ]
    urls, left = replay_urls(exchanges, lambda host: host == "a.test")
    assert urls == ["https://a.test/", "https://a.test/moved", "https://a.test/beacon"]
    assert left == {
        "failed in the original": 1,
        "answered 4xx": 1,
        "answered 5xx": 1,
        "POST": 1,
        "http://": 1,
        "no HTTP/3 at its address": 1,
        "repeated": 1,
    }


def test_a_lab_config_can_turn_the_recorded_waits_off_and_keeps_the_profiles_otherwise():
    config = load_lab_config("profiles/lab/http3.toml")
    assert config.settings.web.replay_wait
    off = config.with_overrides("dsunit", "198.18.250.0/23", "/tmp/archive", replay_wait=False)
    assert not off.settings.web.replay_wait and off.settings.web.archive == "/tmp/archive"
    assert off.settings.web.http3 and off.settings.prefix == "dsunit"
    assert not off.with_overrides(prefix="dsunit2").settings.web.replay_wait
