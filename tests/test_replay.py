"""The replay archive, HAR import, request matching, the lab's placement of an archive and the replay server.

The record-and-replay round trip in real labs is in tests/test_replay_lab.py.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

import httpx
import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.errors import HarnessError
from harness.lab import replayfront
from harness.lab.ca import CertificateAuthority, new_key, write_key
from harness.lab.config import load_lab_config
from harness.lab.h3front import ALT_SVC
from harness.lab.nginx import SSL_PROTOCOLS
from harness.lab.replayfront import file_answers, front_config, lua_string, quote, write_answers
from harness.lab.replayweb import ReplayWeb
from harness.lab.unbound import resolver_config
from harness.paths import PROJECT_ROOT
from harness.replay.archive import (
    INDEX,
    VERSION,
    Archive,
    DnsAnswer,
    Exchange,
    SiteRecord,
    shared_addresses,
    write_site,
)
from harness.replay.compare import dns_differences
from harness.replay.har_import import read_har
from harness.replay.matching import ExchangeIndex, body_for, site_seed
from tests.helpers import wait_for

HTML = b"<html><head><title>x</title></head><body><img src='https://img.cdn.test/a.png?v=1'></body></html>"


def _exchange(url: str, body: bytes = b"x", version: str = "HTTP/2.0", **kw) -> Exchange:
    headers = kw.pop("headers", [("Content-Type", "image/png")])
    return Exchange("GET", url, 200, version, [("accept", "*/*")], headers, body, kw.pop("wait_ms", 1.5))


def _record(site: str = "a.test") -> SiteRecord:
    exchanges = [
        _exchange(f"https://www.{site}/", HTML, headers=[("Content-Type", "text/html"), ("Alt-Svc", "h3=':443'")]),
        _exchange("https://img.cdn.test/a.png?v=1&k=2", b"\x89PNG" + bytes(100)),
        _exchange("https://static.b.test/s.js", b"var x;", version="HTTP/1.1"),
    ]
    dns = {
        f"www.{site}": DnsAnswer(f"www.{site}", [("edge.cdn.test", 120)], ["192.0.2.1"], 20, ["2001:db8::1"], 20),
        "img.cdn.test": DnsAnswer("img.cdn.test", [], ["192.0.2.1"], 60),
        "static.b.test": DnsAnswer("static.b.test", [], ["192.0.2.7"], 300),
    }
    certificates = {f"www.{site}": [f"*.{site}", site], "img.cdn.test": ["*.cdn.test"]}
    return SiteRecord(site, f"https://www.{site}/", "recorded", exchanges, dns, certificates)


def test_archive_round_trip(tmp_path):
    write_site(tmp_path, _record("a.test"))
    write_site(tmp_path, _record("b.test"))
    archive = Archive(tmp_path)
    assert archive.sites == ["a.test", "b.test"]
    loaded = archive.load("a.test")
    assert loaded == _record("a.test")
    assert loaded.hostnames == ["img.cdn.test", "static.b.test", "www.a.test"]
    assert shared_addresses(loaded.dns) == {"192.0.2.1": ["img.cdn.test", "www.a.test"]}
    assert loaded.dns["www.a.test"].canonical == "edge.cdn.test"
    write_site(tmp_path, _record("a.test"))  # replacing an entry keeps one per site
    assert len(json.loads((tmp_path / INDEX).read_text())["sites"]) == 2


def test_version_1_archives_still_read(tmp_path):
    """Version 1 had no certificate names: read as none recorded; a site added makes the archive version 2."""
    import hashlib

    write_site(tmp_path, _record("a.test"))
    site_file = tmp_path / "sites" / "a.test.json.gz"
    doc = json.loads(gzip.decompress(site_file.read_bytes()))
    del doc["certificates"]
    site_file.write_bytes(gzip.compress(json.dumps(doc).encode()))
    index = json.loads((tmp_path / INDEX).read_text())
    index.update(version=1, sites=[{**index["sites"][0], "sha256": hashlib.sha256(site_file.read_bytes()).hexdigest()}])
    (tmp_path / INDEX).write_text(json.dumps(index))
    assert Archive(tmp_path).load("a.test") == replace(_record("a.test"), certificates={})
    write_site(tmp_path, _record("b.test"))
    assert json.loads((tmp_path / INDEX).read_text())["version"] == VERSION
    assert Archive(tmp_path).load("b.test").certificates["img.cdn.test"] == ["*.cdn.test"]


def _broken(tmp_path: Path, how: str) -> Path:
    write_site(tmp_path, _record())
    site_file = tmp_path / "sites" / "a.test.json.gz"
    index = json.loads((tmp_path / INDEX).read_text())
    if how == "truncated":
        site_file.write_bytes(site_file.read_bytes()[:-40])
    elif how == "corrupt":  # a consistent index over a file that is not gzip: the decompressor must say so
        site_file.write_bytes(b"\x1f\x8b" + bytes(50))
        import hashlib

        index["sites"][0]["sha256"] = hashlib.sha256(site_file.read_bytes()).hexdigest()
    elif how == "version":
        index["version"] = 99
    elif how == "no-body":
        doc = json.loads(gzip.decompress(site_file.read_bytes()))
        del doc["exchanges"][1]["body"]
        data = gzip.compress(json.dumps(doc).encode())
        site_file.write_bytes(data)
        import hashlib

        index["sites"][0]["sha256"] = hashlib.sha256(data).hexdigest()
    (tmp_path / INDEX).write_text(json.dumps(index))
    return tmp_path


@pytest.mark.parametrize(
    ("how", "message"),
    [
        ("truncated", "corrupt or truncated"),
        ("corrupt", "corrupt or truncated"),
        ("version", "format version 99 is unknown"),
        ("no-body", "exchange 1 (GET https://img.cdn.test/a.png?v=1&k=2) has no body"),
    ],
)
def test_broken_archives_fail_in_one_line(tmp_path, how, message):
    directory = _broken(tmp_path, how)
    with pytest.raises(HarnessError) as error:
        Archive(directory).load_all()
    assert message in str(error.value) and "\n" not in str(error.value)
    result = CliRunner().invoke(main, ["archive", "show", str(directory)])
    assert result.exit_code != 0 and message in result.output and "Traceback" not in result.output


def test_not_an_archive(tmp_path):
    with pytest.raises(HarnessError, match="not a replay archive"):
        Archive(tmp_path)


def _har(tmp_path: Path, with_content: bool = True) -> Path:
    def entry(url: str, address: str, text: str | None, encoding: str | None = None) -> dict:
        content: dict = {"size": 4, "mimeType": "text/html"}  # no longer than the shortest body: none is partial
        if with_content and text is not None:
            content["text"] = text
            if encoding:
                content["encoding"] = encoding
        return {
            "request": {"method": "GET", "url": url, "httpVersion": "h2", "headers": [{"name": "a", "value": "b"}]},
            "response": {
                "status": 200,
                "httpVersion": "h2",
                "headers": [{"name": "Content-Encoding", "value": "br"}, {"name": "Content-Type", "value": "x/y"}],
                "content": content,
            },
            "serverIPAddress": address,
            "timings": {"wait": 12.5},
        }

    har = {
        "log": {
            "version": "1.2",
            "entries": [
                entry("https://www.c.test/", "203.0.113.5", "<html></html>"),
                entry("https://img.c.test/p.png", "203.0.113.5", base64.b64encode(b"\x89PNG").decode(), "base64"),
                entry("https://other.test/x.js", "", "var y;"),
            ],
        }
    }
    path = tmp_path / "c.har"
    path.write_text(json.dumps(har))
    return path


def test_har_import(tmp_path):
    record = read_har(_har(tmp_path))
    assert record.site == "c.test" and record.source == "har"
    assert [e.body for e in record.exchanges] == [b"<html></html>", b"\x89PNG", b"var y;"]
    assert record.exchanges[0].http_version == "HTTP/2.0" and record.exchanges[0].wait_ms == 12.5
    assert ("Content-Encoding", "br") not in record.exchanges[0].response_headers  # the HAR's body is decoded
    assert all(d.synthesized for d in record.dns.values())
    assert shared_addresses(record.dns) == {"203.0.113.5": ["img.c.test", "www.c.test"]}
    assert record.dns["other.test"].a[0].startswith("100.")  # no address in the HAR: made up, apart
    result = CliRunner().invoke(main, ["archive", "import", str(tmp_path / "c.har"), "--archive", str(tmp_path / "a")])
    assert result.exit_code == 0, result.output
    shown = CliRunner().invoke(main, ["archive", "show", str(tmp_path / "a")])
    assert "c.test" in shown.output and "synthesized" in shown.output


def test_har_without_content_is_refused(tmp_path):
    with pytest.raises(HarnessError, match=r"entry 0 \(GET https://www.c.test/\) has no body"):
        read_har(_har(tmp_path, with_content=False))


def test_matching_exact_fuzzy_and_miss():
    index = ExchangeIndex([_record()])
    exact = index.match("img.cdn.test", "GET", "/a.png?v=1&k=2")
    assert exact.exchange is not None and not exact.fuzzy
    fuzzy = index.match("img.cdn.test:443", "GET", "/a.png?v=1&k=3")
    assert fuzzy.exchange is exact.exchange and fuzzy.fuzzy and fuzzy.recorded_query == "v=1&k=2"
    assert index.match("img.cdn.test", "GET", "/b.png").exchange is None
    assert index.match("img.cdn.test", "POST", "/a.png?v=1&k=2").exchange is None


def test_served_dns_may_count_ttls_down_for_as_long_as_a_cache_held_them():
    recorded = {"a.test": DnsAnswer("a.test", a=["1.1.1.1"], a_ttl=3600, chain=[("cdn.test", 120)])}

    def served(a_ttl: int, chain: list[tuple[str, int]]) -> dict[str, DnsAnswer]:
        return {"a.test": DnsAnswer("a.test", a=["10.0.0.1"], a_ttl=a_ttl, chain=chain)}

    assert dns_differences(recorded, served(3600, [("cdn.test", 120)])) == []
    assert dns_differences(recorded, served(3599, [("cdn.test", 119)])) == []  # unbound counts whole seconds
    assert dns_differences(recorded, served(3595, [("cdn.test", 116)]), held_s=4.2) == []
    assert dns_differences(recorded, served(3594, [("cdn.test", 120)]), held_s=4.2) != []  # held longer than asked
    assert dns_differences(recorded, served(3601, [("cdn.test", 120)]), held_s=60) != []  # no cache counts up
    assert dns_differences(recorded, served(3600, [("cdn.test", 121)]), held_s=60) != []
    assert dns_differences(recorded, served(3600, [("other.test", 120)])) != []
    assert dns_differences(recorded, served(3600, [])) != []


def test_determinism_script_seeded_per_site():
    record = _record()
    page = body_for(record.exchanges[0], "a.test")
    assert page.startswith(b"<html><head><script>") and str(site_seed("a.test")).encode() in page
    assert body_for(record.exchanges[0], "b.test") != page
    assert body_for(record.exchanges[1], "a.test") == record.exchanges[1].body  # not HTML: untouched
    zipped = _exchange(
        "https://z.test/",
        gzip.compress(HTML),
        headers=[("content-type", "text/html; charset=utf-8"), ("content-encoding", "gzip")],
    )
    assert b"Math.random" in gzip.decompress(body_for(zipped, "a.test"))


def test_replay_web_places_names(tmp_path):
    write_site(tmp_path, _record("a.test"))
    config = load_lab_config().with_overrides(prefix="dsunit", subnet="198.18.250.0/23")
    web = ReplayWeb.plan(config, tmp_path)
    zone = web.zone_lines()
    assert "www.a.test. 120 IN CNAME edge.cdn.test." in zone
    lab_web = config.addresses.web(config.settings.web_addresses)
    edge = web.records["edge.cdn.test"]
    assert edge[0] == "A" and edge[2] == 20 and edge[1] in lab_web[1:]  # the first serves www.lab.test
    assert web.records["img.cdn.test"][1] == edge[1]  # shared on the recording, shared in the lab
    assert web.records["static.b.test"][1] != edge[1]
    assert edge[1] in web.http2_at and web.records["static.b.test"][1] not in web.http2_at
    assert "AAAA" not in zone
    # one certificate per recorded one (its names), one for the names without (the CNAME target here)
    assert web.certificate_groups(edge[1]) == [
        (["*.a.test", "a.test"], ["www.a.test"]),
        (["*.cdn.test"], ["img.cdn.test"]),
        (["edge.cdn.test"], ["edge.cdn.test"]),
    ]
    version1 = replace(_record("a.test"), certificates={})
    write_site(tmp_path / "v1", version1)
    assert ReplayWeb.plan(config, tmp_path / "v1").certificate_groups(edge[1]) == [
        (["edge.cdn.test", "img.cdn.test", "www.a.test"], ["edge.cdn.test", "img.cdn.test", "www.a.test"])
    ]


def test_replay_offers_http3_where_the_original_announced_it(tmp_path):
    """An address whose hosts announced HTTP/3 (Alt-Svc with an h3 alternative) offers it in a lab with `http3`,
    announced by the lab's own Alt-Svc; one whose answers named no h3 alternative does not."""
    write_site(tmp_path / "h3", _record("a.test"))  # www.a.test's page: Alt-Svc h3
    config = load_lab_config().with_overrides(prefix="dsunit", subnet="198.18.250.0/23")
    web = ReplayWeb.plan(config, tmp_path / "h3")
    edge = web.records["edge.cdn.test"][1]  # www.a.test's address (its CNAME target's)
    assert web.h3_at == {edge} and web.h3_served(True) == [edge] and web.h3_served(False) == []
    record = _record("a.test")
    others = [("Alt-Svc", 'h2="alt.a.test:443"'), ("alt-svc", "clear"), ("X-H3", 'h3=":443"')]
    page = replace(record.exchanges[0], response_headers=[("Content-Type", "text/html"), *others])
    write_site(tmp_path / "h2", replace(record, exchanges=[page, *record.exchanges[1:]]))
    assert ReplayWeb.plan(config, tmp_path / "h2").h3_at == set()
    spec = {"address": edge, "alpn": ["h2"], "servers": [{"names": ["www.a.test"], "cert": "c", "key": "k"}]}
    announced = f"add_header Alt-Svc '{ALT_SVC}' always;"
    assert announced in front_config(tmp_path, [spec | {"alt_svc": True}], [], tmp_path / "s", 2)
    assert "Alt-Svc" not in front_config(tmp_path, [spec], [], tmp_path / "s", 2)


def test_local_resolver_reads_the_zone_when_replaying(tmp_path):
    config = load_lab_config()
    near = config.settings.resolvers[0]
    text = resolver_config(config, 0, near, tmp_path, tmp_path / "c", tmp_path / "k", tmp_path / "l", tmp_path / "z")
    assert "for-upstream: yes" in text and 'include: "' not in text
    plain = resolver_config(config, 0, near, tmp_path, tmp_path / "c", tmp_path / "k", tmp_path / "l")
    assert "auth-zone" not in plain


NASTY = [("x-quoted", 'a "b" \\c $host ${x}; }'), ("set-cookie", "a=1"), ("set-cookie", "b=2"), ("server", "gws")]


def _front_record() -> SiteRecord:
    """The usual record plus a recorded redirect (the replay server's), headers nginx must copy exactly, a request
    that failed in the original, a header HTTP cannot carry, and the redirect's path answered over http://."""
    record = _record()
    odd = _exchange("https://img.cdn.test/odd.css", b"p{}", headers=[("Content-Type", "text/css"), *NASTY])
    moved = Exchange("GET", "https://img.cdn.test/old", 301, "HTTP/2.0", [], [("location", "/a.png")], b"", 0.0)
    reset = Exchange("GET", "https://img.cdn.test/reset", 0, "HTTP/2.0", [], [], b"", 0.0, "net::ERR_CONNECTION_RESET")
    bad = _exchange("https://img.cdn.test/bad.css", b"b{}", headers=[("Content-Type", "text/css"), ("x bad", "1")])
    plain = _exchange("http://img.cdn.test/old", b"plain", headers=[("Content-Type", "text/plain")])
    exchanges = [*record.exchanges, odd, moved, reset, bad, plain]
    return SiteRecord(record.site, record.url, record.source, exchanges, record.dns)


def _start(argv: list[str], **kw) -> subprocess.Popen:
    return subprocess.Popen(argv, cwd=PROJECT_ROOT, stdout=subprocess.PIPE, text=True, **kw)


@pytest.fixture
def served_dir():
    """A directory nginx's workers (www-data) can read: pytest's own are private to root."""
    path = Path(tempfile.mkdtemp(prefix="dsreplay-"))
    path.chmod(0o755)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def replay_server(served_dir):
    """The replay server as a lab runs it (its two workers), on a Unix socket in ``served_dir``."""
    write_site(served_dir / "archive", _front_record())
    socket_path = served_dir / "replay.sock"
    config = {
        "archive": str(served_dir / "archive"),
        "wait": True,
        "events": str(served_dir / "events.jsonl"),
        "user": None,
        "workers": 2,
        "socket": str(socket_path),
    }
    (served_dir / "replay.json").write_text(json.dumps(config))
    server = _start([sys.executable, "-m", "harness.lab.replayserver", str(served_dir / "replay.json")])
    try:
        assert server.stdout is not None and "2 workers" in server.stdout.readline()
        yield socket_path, served_dir, server
    finally:
        server.kill()
        server.wait(10)


@pytest.fixture
def replay_front(replay_server):
    """The nginx front of the replay server on 127.0.0.1 with a CA of its own, configured as a lab's."""
    _, served, _ = replay_server
    ca = CertificateAuthority.create("test CA")
    (served / "ca.pem").write_bytes(ca.cert_pem)
    key = new_key()
    write_key(key, served / "k.pem")
    (served / "c.pem").write_bytes(ca.issue(["www.a.test", "img.cdn.test"], ["127.0.0.1"], key))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    plain_port = _free_port()
    server = {"names": ["www.a.test", "img.cdn.test"], "cert": str(served / "c.pem"), "key": str(served / "k.pem")}
    listen = [
        {"address": "127.0.0.1", "port": port, "plain": True, "plain_port": plain_port, "alpn": ["h2", "http/1.1"]}
        | {"servers": [server]}
    ]
    for d in ("logs", "replay-nginx-tmp"):
        (served / d).mkdir()
    address_of = {"www.a.test": "127.0.0.1", "img.cdn.test": "127.0.0.1"}
    answers = file_answers(ExchangeIndex([_front_record()]), address_of, served, wait=True)
    conf = served / "replay-nginx.conf"
    write_answers(served, answers)
    conf.write_text(front_config(served, listen, answers, served / "replay.sock", 2))
    nginx = _start(["nginx", "-p", str(served), "-c", str(conf), "-g", "daemon off;"])
    try:
        wait_for(lambda: _accepts(port) and _accepts(plain_port), timeout=10, what="the replay front")
        yield port, served, answers, plain_port
    finally:
        nginx.terminate()
        nginx.wait(10)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _accepts(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def workers_of(pid: int) -> list[int]:
    return [int(p) for p in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()]


def alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False


def test_front_takes_only_what_it_can_send_exactly(tmp_path):
    address_of = {"www.a.test": "192.0.2.9", "img.cdn.test": "192.0.2.9"}
    answers = file_answers(ExchangeIndex([_front_record()]), address_of, tmp_path, wait=True)
    keys = {a.key for a in answers}
    # the redirect is the replay server's; static.b.test has no lab address here; the rest are files
    # the failed request and the unsendable header too; the http:// answer is a file of its own
    assert keys == {
        "https 192.0.2.9 www.a.test GET /",
        "https 192.0.2.9 img.cdn.test GET /a.png?v=1&k=2",
        "https 192.0.2.9 img.cdn.test GET /odd.css",
        "http 192.0.2.9 img.cdn.test GET /old",
    }
    page = next(a for a in answers if a.key.endswith(" /"))
    body = (tmp_path / "replay-bodies").read_bytes()[page.offset : page.offset + page.length]
    assert b"Math.random" in body and body.endswith(b"</html>") and page.wait_ms == 2
    assert page.content_type == "text/html" and "alt-svc" not in dict(page.headers)
    assert quote('a"b\\c$d') == '"a\\"b\\\\c$d"' and lua_string("/r un/é;") == '"/r\\032un/\\195\\169\\059"'
    with pytest.raises(ValueError, match="control character"):
        quote("a\nb")
    evil = _exchange("https://img.cdn.test/e", headers=[("x-evil", "a\r\nb")])
    assert not file_answers(ExchangeIndex([SiteRecord("a.test", "u", "r", [evil], {})]), address_of, tmp_path, True)


@pytest.mark.parametrize("http2", [True, False])
def test_replay_front_answers_files_and_passes_the_rest(replay_front, http2):
    port, served, answers, plain_port = replay_front
    with httpx.Client(http2=http2, verify=ssl.create_default_context(cafile=served / "ca.pem")) as client:

        def get(host: str, target: str, scheme: str = "https") -> httpx.Response:
            at = f"{scheme}://127.0.0.1:{port if scheme == 'https' else plain_port}"
            return client.get(f"{at}{target}", headers={"host": host})

        page = get("www.a.test", "/")
        assert page.http_version == ("HTTP/2" if http2 else "HTTP/1.1")
        assert page.status_code == 200 and b"Math.random" in page.content and "alt-svc" not in page.headers
        odd = get("img.cdn.test", "/odd.css")
        sent = [(k, v) for k, v in odd.headers.multi_items() if k not in ("content-length", "connection")]
        # as recorded, nginx's own Server, Date, Last-Modified gone; nginx writes a Server header first, and the
        # order of different names carries no meaning (RFC 9110, 5.3), of one name's values it does
        assert sorted(sent, key=lambda kv: kv[0]) == sorted(
            [("content-type", "text/css"), *NASTY], key=lambda kv: kv[0]
        )
        assert get("img.cdn.test", "/a.png?v=1&k=2").content == b"\x89PNG" + bytes(100)
        assert get("img.cdn.test", "/a.png?v=1&k=9").content == b"\x89PNG" + bytes(100)  # fuzzy: the server's
        assert get("img.cdn.test", "/nothing").status_code == 404
        moved = get("img.cdn.test", "/old")
        assert moved.status_code == 301 and moved.headers["location"] == "/a.png"
        assert get("img.cdn.test", "/old", "http").content == b"plain"  # over port 80, as recorded over http://
        with pytest.raises(httpx.RemoteProtocolError):  # failed in the original: no answer, not a made-up 5xx
            get("img.cdn.test", "/reset")
        bad = get("img.cdn.test", "/bad.css")
        assert bad.status_code == 200 and bad.content == b"b{}" and "x bad" not in bad.headers
    events = [json.loads(line) for line in (served / "events.jsonl").read_text().splitlines()]
    assert [(e["kind"], e["target"]) for e in events] == [
        ("fuzzy", "/a.png?v=1&k=9"),
        ("miss", "/nothing"),
        ("error", "/bad.css"),
    ]
    assert events[2]["url"] == "https://img.cdn.test/bad.css" and "'x bad' cannot be sent" in events[2]["reason"]
    wait_for(lambda: len(_access_log(served)) == 9, timeout=5, what="nginx's access log")
    served_by = [line.rsplit(" file=", 1)[1] for line in _access_log(served)]
    numbers = {" ".join(a.key.split(" ", 4)[::4]): str(a.number) for a in answers}
    files = [numbers["https /"], numbers["https /odd.css"], numbers["https /a.png?v=1&k=2"], "", "", ""]
    assert served_by[:6] == files  # the port-80 request may be logged by the other worker, in any order
    assert sorted(served_by[6:]) == sorted(["", "", numbers["http /old"]])


def test_replay_front_offers_tls_1_3_as_the_lab_nginx_does(replay_front):
    """The original lab's nginx offers TLS 1.2 and 1.3; so must the front (nginx 1.22's default has no 1.3, and
    Firefox on TLS 1.2 loaded google.com's replay 11 % faster than the original on 1.3: issue 42)."""
    port, served, _, _ = replay_front
    context = ssl.create_default_context(cafile=served / "ca.pem")
    context.set_alpn_protocols(["h2"])
    assert _handshake(port, context) == ("TLSv1.3", "h2")
    context.maximum_version = ssl.TLSVersion.TLSv1_2
    assert _handshake(port, context) == ("TLSv1.2", "h2")  # still offered, as by the lab's nginx
    assert f"ssl_protocols {SSL_PROTOCOLS};" in (served / "replay-nginx.conf").read_text()


def _handshake(port: int, context: ssl.SSLContext) -> tuple[str | None, str | None]:
    """The TLS version and ALPN protocol a connection to the front on ``port`` settles on."""
    with socket.create_connection(("127.0.0.1", port)) as raw:
        with context.wrap_socket(raw, server_hostname="www.a.test") as tls:
            return tls.version(), tls.selected_alpn_protocol()


def _access_log(served: Path) -> list[str]:
    log = served / "logs" / "replay-nginx-access.log"
    return log.read_text().splitlines() if log.exists() else []


def test_replay_server_answers_over_its_socket(replay_server):
    socket_path, served, _ = replay_server
    with httpx.Client(transport=httpx.HTTPTransport(uds=str(socket_path))) as client:
        page = client.get("http://www.a.test/")
        assert page.status_code == 200 and b"Math.random" in page.content
        assert client.get("http://img.cdn.test/gone").status_code == 404
    events = [json.loads(line) for line in (served / "events.jsonl").read_text().splitlines()]
    assert [(e["kind"], e["target"]) for e in events] == [("miss", "/gone")]


@pytest.mark.parametrize("stop", [signal.SIGTERM, signal.SIGKILL])
def test_replay_server_workers_end_with_it(replay_server, stop):
    """A lab stops the server by its pid: its workers must go with it, even when it is killed outright."""
    _, _, server = replay_server
    workers = workers_of(server.pid)
    assert len(workers) == 2
    os.kill(server.pid, stop)
    assert server.wait(10) == (0 if stop == signal.SIGTERM else -signal.SIGKILL)
    wait_for(lambda: not any(alive(w) for w in workers), timeout=10, what="the workers' end")


def test_visits_carry_replay_misses_into_the_store_and_the_report(tmp_path):
    import sqlite3

    from analysis.replay import replay_table
    from analysis.report import analyze
    from analysis.results import load
    from tests.synthetic import make_store, ok

    path = make_store(tmp_path / "s.sqlite", lambda n, r, i, res, p: ok(1000.0 + i), sites=4)
    with sqlite3.connect(path) as db:  # site0: 3 misses a visit, site1: 1 (not past 1.0), the others none
        db.execute(
            "UPDATE visits SET replay_misses = CASE site WHEN 'site0.test' THEN 3 WHEN 'site1.test' THEN 1 "
            "ELSE 0 END, replay_fuzzy = 2, replay_errors = (site = 'site3.test'), replay_filled = 0"
        )
    visits = load(path).visits
    table = replay_table(visits, 1.0)
    assert list(table["site"][:2]) == ["site0.test", "site3.test"]  # flagged: past the threshold, or an error
    assert list(table["flagged"]) == [True, True, False, False] and table.iloc[1]["errors"] == 2
    assert table.iloc[0]["misses_per_visit"] == 3 and table.iloc[0]["fuzzy"] == 4  # two configurations
    report = analyze([path], tmp_path / "out")
    text = report.html.read_text()
    assert "2 sites passed the threshold or met replay errors" in text and "site3.test" in text
    assert (tmp_path / "out" / "tables" / "replay-misses.csv").exists()
    # A store whose visits met no replayed web has no replay section.
    plain = make_store(tmp_path / "p.sqlite", lambda n, r, i, res, p: ok(1000.0 + i), sites=4)
    assert "<h2>Replay</h2>" not in analyze([plain], tmp_path / "plain").html.read_text()
    with sqlite3.connect(plain) as db:  # a visit whose record has no replay counts stores NULL
        assert db.execute("SELECT COUNT(*) FROM visits WHERE replay_misses IS NOT NULL").fetchone()[0] == 0


def test_store_writes_a_visits_replay_counts(tmp_path):
    from harness.plan import make_plan
    from harness.sitelist import Site
    from harness.store import Store

    store = Store(tmp_path / "s.sqlite")
    plan = list(make_plan([Site("a.test", 1, "top")], 1, ["wired"], [("near", "do53")], seed=1))
    store.add_study("s", "s", 1, {"study": {}}, plan)
    record = {
        "visit_id": "v1",
        "started_at": "2026-01-01T00:00:00Z",
        "error_class": "Successful",
        "detail": "",
        "paper_2019": "Successful",
        "counted": True,
        "on_load_ms": 900.0,
        "har_path": None,
        "replay_misses": 5,
        "replay_fuzzy": 7,
        "replay_errors": [{"url": "https://a.test/x", "reason": "header 'x y' cannot be sent"}],
        "replay_filled": 3,
        "replay_dns_misses": ["gone.a.test", "ads.b.test"],
    }
    store.complete("s", plan[0], record)
    columns = "replay_misses, replay_fuzzy, replay_errors, replay_filled, replay_dns_misses"
    row = store.db.execute(f"SELECT {columns} FROM visits").fetchone()
    kept = json.loads(store.db.execute("SELECT record FROM visits").fetchone()[0])["replay_errors"]
    store.close()
    assert tuple(row) == (5, 7, 1, 3, 2) and kept == record["replay_errors"]
    shown = CliRunner().invoke(main, ["status", str(tmp_path / "s.sqlite")])
    assert "replayed web: 1 visits, 5 misses, 2 DNS misses (names not in the archive), 1 answers not given" in (
        shown.output
    )


def test_bodies_past_what_nginx_holds_are_the_replay_servers(tmp_path, monkeypatch):
    """nginx holds the front's bodies in memory: those that would pass `MAX_BODIES` are left to the server."""
    address_of = {"www.a.test": "192.0.2.9", "img.cdn.test": "192.0.2.9"}
    every = file_answers(ExchangeIndex([_front_record()]), address_of, tmp_path, wait=True)
    monkeypatch.setattr(replayfront, "MAX_BODIES", 120)
    held = file_answers(ExchangeIndex([_front_record()]), address_of, tmp_path, wait=True)
    assert {a.key for a in held} < {a.key for a in every} and held
    assert sum(a.length for a in held) == (tmp_path / "replay-bodies").stat().st_size <= 120
