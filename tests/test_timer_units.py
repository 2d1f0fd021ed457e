"""The timer wrapper's logic (records, command lines, HAR hostnames, bench settings), and the timer programs' own
refusals, input handling and clean-up, against a local socket. No lab."""

from __future__ import annotations

import gzip
import json
import os
import resource
import socket
import subprocess
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.place import Resolver
from harness.resolver_bench import load_bench_profile, with_loss
from harness.shaping.link_profile import load_link_profile
from harness.timer import BIN, TimerSettings, Timing, hostnames_from_hars, shuffled, timer_argv

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


# --- The timer programs themselves, without a lab: refusals, the input, getdns contexts. ---
# They need the built programs (scripts/setup.sh); each query goes to a UDP socket of the
# test's own that never answers, so it ends as a timeout.

PROGRAMS = ["dnstimer", "quictimer"]


def _program(name: str) -> str:
    path = BIN / name
    assert path.exists(), f"{path} is missing: run 'bash scripts/setup.sh'"
    return str(path)


@pytest.fixture
def sink():
    """A local UDP port where nothing answers: every query sent there times out."""
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        yield s.getsockname()[1]


def _argv(program: str, port: int, *extra: str) -> list[str]:
    argv = [_program(program), "--server", "127.0.0.1", "--port", str(port)]
    if program == "dnstimer":
        return argv + ["--protocol", "do53", *extra]
    return argv + ["--protocol", "doq", "--tls-name", "x.test", *extra]


def _records(stdout: str) -> list[dict]:
    return sorted((json.loads(line) for line in stdout.splitlines()), key=lambda r: r["index"])


@pytest.mark.parametrize("program", PROGRAMS)
@pytest.mark.parametrize(
    ("option", "value"),
    [
        ("--port", "4294967376"),  # was 80 in dnstimer, after an (int) cast
        ("--port", "70000"),
        ("--port", "0"),
        ("--port", "-1"),
        ("--port", "99999999999999999999"),
        ("--port", "http"),
        ("--concurrency", "4294967297"),  # was 1 in dnstimer
        ("--concurrency", "65536"),
        ("--concurrency", "0"),
        ("--concurrency", "-8"),
        ("--timeout-ms", "9223372036854775807"),
        ("--interval-ms", "nan"),
    ],
)
def test_out_of_range_numbers_are_refused_in_one_line(program, option, value, sink):
    proc = subprocess.run(_argv(program, sink, option, value), input="", capture_output=True, text=True, timeout=10)
    assert proc.returncode == 2 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1, proc.stderr
    assert proc.stderr.startswith(f"{program}: ") and option.lstrip("-") in proc.stderr and value in proc.stderr


@pytest.mark.parametrize("program", PROGRAMS)
def test_the_largest_port_and_concurrency_are_accepted(program, sink):
    proc = subprocess.run(
        _argv(program, sink, "--concurrency", "65535"), input="", capture_output=True, text=True, timeout=10
    )
    assert proc.returncode == 0 and proc.stderr == "" and proc.stdout == ""
    proc = subprocess.run(
        [*_argv(program, sink, "--timeout-ms", "200"), "--port", "65535"],
        input="a.lab.test\n",
        capture_output=True,
        text=True,
        timeout=10,
    )
    assert proc.returncode == 0 and [r["status"] for r in _records(proc.stdout)] == ["timeout"]


@pytest.mark.parametrize("program", PROGRAMS)
def test_a_refusal_quoting_a_newline_stays_one_line(program):
    proc = subprocess.run(
        [_program(program), "--protocol", "do\n53"], input="", capture_output=True, text=True, timeout=10
    )
    lines = proc.stderr.splitlines()
    assert proc.returncode == 2 and len(lines) == 1
    assert lines[0].startswith(f"{program}: unknown protocol 'do\\x0a53'")


@pytest.mark.parametrize("program", PROGRAMS)
def test_a_line_over_64_kib_is_an_invalid_record_and_reading_goes_on(program, sink):
    lines = [
        "a.lab.test",
        "x" * 70_000 + " AAAA",  # over 64 KiB: refused as a line
        "y" * 65_536,  # exactly 64 KiB: read, and refused as a name
        "",
        "b.lab.test TXT",
    ]
    proc = subprocess.run(
        _argv(program, sink, "--timeout-ms", "300", "--concurrency", "4"),
        input="\n".join(lines),  # the last line without its newline
        capture_output=True,
        text=True,
        timeout=20,
    )
    assert proc.returncode == 0, proc.stderr
    records = _records(proc.stdout)
    assert [r["index"] for r in records] == [0, 1, 2, 3]
    assert [r["status"] for r in records] == ["timeout", "invalid", "invalid", "timeout"]
    assert records[1]["error"] == "line longer than 65536 octets" and records[1]["duration_us"] is None
    assert records[2]["error"] == "name longer than 253 octets"
    assert records[1]["name"] == "x" * 255 and records[2]["name"] == "y" * 255  # a record keeps 255 octets of a name
    assert (records[0]["name"], records[3]["name"], records[3]["type"]) == ("a.lab.test", "b.lab.test", "TXT")


@pytest.mark.parametrize("program", PROGRAMS)
def test_unreadable_names_end_the_run_with_a_one_line_reason(program, sink, tmp_path):
    proc = subprocess.run(_argv(program, sink, str(tmp_path)), capture_output=True, text=True, timeout=10)
    assert proc.returncode == 1 and proc.stdout == ""
    assert len(proc.stderr.splitlines()) == 1 and "cannot read the names" in proc.stderr
    assert "directory" in proc.stderr.lower()


COUNT_CONTEXTS = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>
static long created, destroyed;
int getdns_context_create(void **ctx, int set_from_os)
{
    int (*real)(void **, int) = (int (*)(void **, int))dlsym(RTLD_NEXT, "getdns_context_create");
    int r = real(ctx, set_from_os);
    created += r == 0;
    return r;
}
void getdns_context_destroy(void *ctx)
{
    void (*real)(void *) = (void (*)(void *))dlsym(RTLD_NEXT, "getdns_context_destroy");
    destroyed += ctx != NULL;
    real(ctx);
}
__attribute__((destructor)) static void report(void)
{
    fprintf(stderr, "getdns contexts: %ld created, %ld destroyed\n", created, destroyed);
}
"""


def test_without_reuse_every_getdns_context_is_destroyed_past_1024_in_flight(sink, tmp_path):
    """1,500 queries in flight, each with a context of its own, all timing out together.

    Before: a fixed list of 1,024 spent contexts, so the rest leaked; and destroying one
    wiped the event loop all contexts share, so the others never finished (exit 3).
    """
    (tmp_path / "count.c").write_text(COUNT_CONTEXTS)
    subprocess.run(
        ["cc", "-shared", "-fPIC", "-o", str(tmp_path / "count.so"), str(tmp_path / "count.c"), "-ldl"], check=True
    )

    def enough_fds() -> None:  # a UDP socket per query in flight
        soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
        wanted = 4096 if hard == resource.RLIM_INFINITY else min(hard, 4096)
        resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, wanted), hard))

    n = 1500
    proc = subprocess.run(
        _argv("dnstimer", sink, "--no-reuse", "--concurrency", str(n), "--timeout-ms", "100"),
        input="".join(f"n{i}.lab.test\n" for i in range(n)),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "LD_PRELOAD": str(tmp_path / "count.so")},
        preexec_fn=enough_fds,
    )
    assert proc.returncode == 0, proc.stderr
    records = _records(proc.stdout)
    assert len(records) == n and {r["status"] for r in records} == {"timeout"}
    assert proc.stderr.splitlines() == [f"getdns contexts: {n + 1} created, {n + 1} destroyed"]  # + the shared one
