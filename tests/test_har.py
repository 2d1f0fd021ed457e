"""The BiDi-to-HAR recorder on recorded event shapes (fast, no browser)."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest
from haralyzer import HarParser

from harness import durable
from harness.browser.har import PageInfo, build_har, check_har, read_har, write_har
from harness.replay.compare import summarise_har

T0 = 1_795_246_148_700.0


def timings(offset: float, dns: bool = True) -> dict:
    t = lambda d: T0 + offset + d  # noqa: E731
    return {
        "timeOrigin": 0,
        "requestTime": t(0),
        "redirectStart": 0,
        "redirectEnd": 0,
        "fetchStart": t(1),
        "dnsStart": t(1) if dns else 0,
        "dnsEnd": t(3) if dns else 0,
        "connectStart": t(3),
        "connectEnd": t(10),
        "tlsStart": t(4),
        "tlsEnd": t(10),
        "requestStart": t(11),
        "responseStart": t(20),
        "responseEnd": t(25),
    }


def request(rid: str, url: str, offset: float, **extra) -> dict:
    return {
        "request": rid,
        "url": url,
        "method": "GET",
        "headers": [{"name": "Host", "value": {"type": "string", "value": "a"}}],
        "cookies": [],
        "headersSize": 100,
        "bodySize": 0,
        "timings": timings(offset, **extra),
    }


def response(url: str, from_cache: bool = False) -> dict:
    return {
        "url": url,
        "protocol": "h2",
        "status": 200,
        "statusText": "",
        "fromCache": from_cache,
        "headers": [],
        "mimeType": "text/html",
        "bytesReceived": 600,
        "headersSize": 100,
        "bodySize": 500,
        "content": {"size": 0},
    }


def event(method: str, params: dict) -> dict:
    return {"type": "event", "method": method, "params": params}


def events() -> list[dict]:
    main, img = "https://a.test/", "https://img.b.test/x.png"
    out = [event("browsingContext.navigationStarted", {"timestamp": T0, "url": main})]
    for rid, url, off in (("1", main, 0), ("2", img, 30)):
        out.append(
            event(
                "network.beforeRequestSent",
                {"request": request(rid, url, off), "redirectCount": 0, "timestamp": T0 + off},
            )
        )
        out.append(
            event(
                "network.responseCompleted",
                {"request": request(rid, url, off), "redirectCount": 0, "response": response(url)},
            )
        )
    # Firefox reports the cached image a second time, with no network timings: dropped.
    cached = request("3", img, 60)
    cached["timings"] = {k: (0 if k != "requestTime" else v) for k, v in cached["timings"].items()}
    out.append(
        event("network.responseCompleted", {"request": cached, "redirectCount": 0, "response": response(img, True)})
    )
    # Error pages load data: fonts: dropped.
    out.append(
        event(
            "network.beforeRequestSent", {"request": request("4", "data:font/woff2;base64,AA", 70), "redirectCount": 0}
        )
    )
    # A failed fetch stays, with its error.
    out.append(
        event("network.beforeRequestSent", {"request": request("5", "https://gone.test/", 80), "redirectCount": 0})
    )
    out.append(
        event(
            "network.fetchError",
            {
                "request": request("5", "https://gone.test/", 80),
                "redirectCount": 0,
                "errorText": "NS_ERROR_UNKNOWN_HOST",
            },
        )
    )
    out.append(event("browsingContext.load", {"timestamp": T0 + 400}))
    return out


def page(on_load=398.0) -> PageInfo:
    return PageInfo(
        url="https://a.test/",
        title="A",
        on_load_ms=on_load,
        on_content_load_ms=200.0,
        server_addresses=[
            {"url": "https://a.test/", "address": "198.18.1.100", "port": 443, "protocol": "h2"},
            {"url": "https://img.b.test/x.png", "address": "198.18.1.101", "port": 443, "protocol": "h2"},
        ],
    )


def test_entries_drop_cache_duplicates_and_data_urls_and_keep_failures():
    har = build_har(events(), page(), ("Firefox", "153.7.0esr"), "0.1.0")
    urls = [e["request"]["url"] for e in har["log"]["entries"]]
    assert urls == ["https://a.test/", "https://img.b.test/x.png", "https://gone.test/"]
    assert har["log"]["entries"][2]["_error"] == "NS_ERROR_UNKNOWN_HOST"
    assert har["log"]["entries"][2]["response"]["status"] == 0


def test_a_request_with_no_outcome_stays_marked_unanswered_and_the_replay_comparison_skips_it():
    ev = events()
    ev.insert(-1, event("network.beforeRequestSent", {"request": request("6", "https://img.b.test/x.png", 90)}))
    har = build_har(ev, page(), ("Firefox", "153.7.0esr"), "0.1.0")
    entries = har["log"]["entries"]
    assert [e.get("_unanswered", False) for e in entries] == [False, False, False, True]
    assert entries[3]["response"]["status"] == 0 and "_error" not in entries[3]
    summary = summarise_har(har)
    assert summary.requests == 3 and summary.hostnames == {"a.test", "img.b.test", "gone.test"}


def test_timings_server_address_and_version():
    entry = build_har(events(), page(), ("Firefox", "153.7.0esr"), "0.1.0")["log"]["entries"][0]
    assert entry["timings"] == {
        "blocked": 1.0,
        "dns": 2.0,
        "connect": 7.0,
        "ssl": 6.0,
        "send": 0,
        "wait": 9.0,
        "receive": 5.0,
    }
    assert entry["time"] == 1 + 2 + 7 + 9 + 5  # ssl lies inside connect
    assert entry["serverIPAddress"] == "198.18.1.100"
    assert entry["request"]["httpVersion"] == entry["response"]["httpVersion"] == "HTTP/2"
    assert entry["response"]["content"]["size"] == 500


def test_unset_phases_are_minus_one():
    ev = events()
    ev[2]["params"]["request"]["timings"] = timings(0, dns=False)
    entry = build_har(ev, page(), ("Firefox", "153.7.0esr"), "0.1.0")["log"]["entries"][0]
    assert entry["timings"]["dns"] == -1


def test_haralyzer_reads_it_and_page_load_time_is_onload(tmp_path):
    har = build_har(events(), page(), ("Firefox", "153.7.0esr"), "0.1.0")
    assert check_har(har) is None
    path = tmp_path / "v.har.gz"
    write_har(har, path)
    assert HarParser(read_har(path)).pages[0].page_load_time == 398.0
    assert not list(tmp_path.glob("*.part"))


def test_error_visit_har_has_onload_minus_one():
    har = build_har(events(), page(on_load=None), ("Firefox", "153.7.0esr"), "0.1.0")
    assert har["log"]["pages"][0]["pageTimings"]["onLoad"] == -1
    assert check_har(har) is None


def test_check_har_catches_a_mismatch():
    har = build_har(events(), page(), ("Firefox", "153.7.0esr"), "0.1.0")
    har["log"]["pages"].append(dict(har["log"]["pages"][0], id="page_2"))
    problem = check_har(har)
    assert problem is not None and "2 pages" in problem


def test_a_har_is_fsynced_before_its_name_and_its_directory_after(tmp_path, monkeypatch):
    """The order that makes a record naming the HAR safe after a power cut: data, rename, directory."""
    synced: list[str] = []
    real_fsync = os.fsync

    def fsync(fd: int) -> None:
        target = os.readlink(f"/proc/self/fd/{fd}")
        # At the file's fsync the final name must not exist yet; at the directory's it must.
        synced.append(f"{Path(target).name}:{(tmp_path / 'v.har.gz').exists()}")
        real_fsync(fd)

    monkeypatch.setattr(durable.os, "fsync", fsync)
    write_har(build_har(events(), page(), ("Firefox", "153.7.0esr"), "0.1.0"), tmp_path / "v.har.gz")
    assert synced == ["v.har.gz.part:False", f"{tmp_path.name}:True"]
    assert read_har(tmp_path / "v.har.gz")["log"]["pages"][0]["pageTimings"]["onLoad"] == 398.0


def test_a_full_disk_leaves_neither_the_har_nor_its_part_and_names_the_file(tmp_path, monkeypatch):
    def full(fd: int, data: bytes) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(durable.os, "write", full)
    with pytest.raises(OSError) as raised:
        write_har(build_har(events(), page(), ("Firefox", "153.7.0esr"), "0.1.0"), tmp_path / "v.har.gz")
    assert raised.value.errno == errno.ENOSPC and raised.value.filename == str(tmp_path / "v.har.gz.part")
    assert list(tmp_path.iterdir()) == []
