"""The reused browser's and resolver connection's logic that touches no network: policies and counter readings."""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
import subprocess
import sys
import time

import pytest

from harness.arms.base import BrowserDns, DnsArm
from harness.arms.do53 import Do53Arm
from harness.arms.evidence import ClientCount, ResolverConnections, client_counter_names
from harness.browser.base import PageLoad, SessionPolicy
from harness.browser.chromium import Chromium
from harness.browser.chromium_netlog import read_netlog
from harness.browser.chromium_reused import descendants, describe_launch, launch_settings, renderer_cpu_s
from harness.browser.firefox import Firefox
from harness.browser.reused import _carries_a_query, _endpoint, dns_queries_in_flight, in_background
from harness.browser.session import FirefoxSession
from harness.errors import HarnessError
from harness.visit import Visitor, _Observed


def test_a_session_policy_names_its_mode_and_refuses_nonsense():
    assert not SessionPolicy().reused and SessionPolicy("reused", 200, 2048).reused
    with pytest.raises(HarnessError, match="browser session 'shared': choose one of fresh, reused"):
        SessionPolicy("shared")
    with pytest.raises(HarnessError, match="must be >= 0"):
        SessionPolicy("reused", restart_after=-1)


def test_quic_transports_count_initial_datagrams_and_tcp_ones_count_syns():
    names = client_counter_names()
    assert {"doq_initials", "doh3_initials"} <= set(names)
    assert not {"do53_initials", "dot_initials", "doh_initials"} & set(names)


@pytest.mark.parametrize(
    ("protocol", "packets", "warm", "expected"),
    [
        ("dot", {"dot_resolver": 20, "dot_connections": 1}, False, (1, False)),  # cold: the first query opened it
        ("dot", {"dot_resolver": 20, "dot_connections": 0}, True, (0, True)),  # warm, and it stayed open
        ("doh", {"doh_resolver": 20, "doh_connections": 2}, True, (2, None)),  # warm, yet new ones: cannot say
        ("doq", {"doq_resolver": 20, "doq_initials": 2}, False, (None, False)),  # QUIC: Initials, not handshakes
        ("doh3", {"doh3_resolver": 20, "doh3_initials": 0}, True, (None, True)),
        ("do53", {"do53_resolver": 20, "do53_connections": 20}, False, (None, None)),  # plain DNS: no connection
        ("dot", {"dot_resolver": 0, "dot_connections": 0}, True, (None, None)),  # nothing reached the resolver
    ],
)
def test_the_resolver_connection_is_read_from_the_client_counters(protocol, packets, warm, expected):
    seen = ResolverConnections.count(protocol, packets, warm)
    assert (seen.handshakes, seen.first_query_open) == expected


def test_a_reused_chromium_reads_its_visit_s_part_of_the_net_log(tmp_path):
    # The log as a running Chromium leaves it: the constants, then one event a line; a visit began at `since`.
    types = {"HOST_RESOLVER_DNS_TASK": 1, "DNS_CONFIG_CHANGED": 2}
    head = json.dumps({"constants": {"logEventTypes": types}})[:-1] + ',\n"events": [\n'
    config = {"type": 2, "source": {"id": 1}, "params": {"nameservers": ["10.0.0.53:53"], "secure_dns_mode": 0}}
    answered = {"type": 1, "source": {"id": 2}, "params": {"results": ["x"]}}
    before = head + json.dumps(config) + ",\n" + json.dumps(answered) + ",\n"
    log = tmp_path / "netlog.json"
    log.write_text(before + json.dumps({**answered, "source": {"id": 3}}) + ",\n" + '{"type": 1, "sou')
    whole = read_netlog(log)
    assert whole is not None and whole.answered["built-in"] == 2 and whole.config["nameservers"]
    visit = read_netlog(log, since=len(before), config=whole.config)
    assert visit is not None and visit.answered["built-in"] == 1 and visit.summary()["config_secure_dns_mode"] == "off"
    # A visit that began in the middle of a line leaves that line to the visit before.
    assert read_netlog(log, since=len(before) - 5).answered["built-in"] == 1  # type: ignore[union-attr]
    # A part that begins before the events array is the whole log.
    assert read_netlog(log, since=5).answered["built-in"] == 2  # type: ignore[union-attr]
    # Only the constants and the visit's part are read, whatever the constants' size (read in blocks).
    big = head.replace('{"constants": {', '{"constants": {"padding": "' + "x" * 200_000 + '", ', 1)
    log.write_text(big + before[len(head) :] + json.dumps({**answered, "source": {"id": 3}}) + ",\n")
    visit = read_netlog(log, since=len(big) + len(before) - len(head), config=whole.config)
    assert visit is not None and visit.answered["built-in"] == 1 and visit.config["nameservers"]


def test_a_reused_chromium_s_part_of_the_net_log_ends_where_its_flush_was_seen(tmp_path):
    # What the browser writes after the flush (the visit's tab closing while its part is parsed) is left out.
    types = {"HOST_RESOLVER_DNS_TASK": 1}
    head = json.dumps({"constants": {"logEventTypes": types}})[:-1] + ',\n"events": [\n'
    line = [json.dumps({"type": 1, "source": {"id": n}, "params": {"results": ["x"]}}) + ",\n" for n in range(4)]
    log = tmp_path / "netlog.json"
    log.write_text(head + line[0] + line[1] + line[2] + line[3])
    since, flushed = len(head) + len(line[0]), len(head) + len(line[0]) + len(line[1]) + len(line[2])
    visit = read_netlog(log, since=since, until=flushed)
    assert visit is not None and visit.answered["built-in"] == 2
    # A line the end cuts is left out; a part with no whole line is no log at all.
    assert read_netlog(log, since=since, until=flushed - 3).answered["built-in"] == 1  # type: ignore[union-attr]
    assert read_netlog(log, since=since, until=since + 5) is None
    assert read_netlog(log, until=flushed).answered["built-in"] == 3  # type: ignore[union-attr]  # the whole log's


def test_a_reused_chromium_whose_flush_was_not_seen_reads_what_was_written_without_a_second_flush(tmp_path):
    from harness.browser.chromium_reused import ReusedChromiumSession

    head = json.dumps({"constants": {"logEventTypes": {"HOST_RESOLVER_DNS_TASK": 1}}})[:-1] + ',\n"events": [\n'
    lines = [json.dumps({"type": 1, "source": {"id": n}, "params": {"results": ["x"]}}) + ",\n" for n in range(3)]
    (tmp_path / "netlog.json").write_text(head + "".join(lines))
    session = object.__new__(ReusedChromiumSession)  # only what reading the part needs
    flushes: list[float] = []
    found: list = []
    session.__dict__.update(
        _work=tmp_path, _netlog_config={"nameservers": []}, _netlog_from=len(head) + len(lines[0]), _source="bidi"
    )
    session.__dict__.update(
        close_tab_at_collection=False, _sandbox=lambda: "", _report_netlog=lambda f, s: found.append(f)
    )
    session.__dict__.update(_flush=lambda wait: flushes.append(wait))  # not seen within its wait: None
    session._read_netlog(None)  # type: ignore[arg-type]  # no driver is used
    assert len(flushes) == 1, flushes  # one wait, not two
    assert found[0] is not None and found[0].answered["built-in"] == 2  # the part as written, from the visit's start


def test_work_in_background_hands_its_end_or_its_error_to_whoever_awaits_it():
    done: list[str] = []
    assert in_background(lambda: done.append("closed"), "test").result(timeout=5) is None and done == ["closed"]

    def fails() -> None:
        raise RuntimeError("BiDi browser.removeUserContext: no reply within 10 s")

    with pytest.raises(RuntimeError, match="no reply"):
        in_background(fails, "test").result(timeout=5)


class _RecordingDriver:
    """What a WebDriver session was asked, in order (logic only: no browser)."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def execute(self, command: str, params: dict) -> None:
        self.calls.append(f"{command} {params['context']}")

    def execute_script(self, source: str, *args) -> str:
        self.calls.append(f"script {source}")
        return source

    def execute_async_script(self, source: str, *args) -> str:
        return self.execute_script(source)


def test_firefox_s_chrome_scripts_in_one_block_switch_the_context_once_and_return_to_the_page_s():
    driver = _RecordingDriver()
    assert FirefoxSession._in_chrome(driver, "a") == "a"  # type: ignore[arg-type]  # records what it is asked
    assert driver.calls == ["SET_CONTEXT chrome", "script a", "SET_CONTEXT content"]
    driver.calls.clear()
    with FirefoxSession.chrome_context(driver):  # type: ignore[arg-type]
        FirefoxSession._in_chrome(driver, "b")  # type: ignore[arg-type]
        with FirefoxSession.chrome_context(driver):  # type: ignore[arg-type]
            FirefoxSession._in_chrome_async(driver, "c")  # type: ignore[arg-type]
        FirefoxSession._in_chrome(driver, "d")  # type: ignore[arg-type]
    assert driver.calls == ["SET_CONTEXT chrome", "script b", "script c", "script d", "SET_CONTEXT content"]
    driver.calls.clear()
    with pytest.raises(RuntimeError), FirefoxSession.chrome_context(driver):  # type: ignore[arg-type]
        raise RuntimeError("a script failed")
    FirefoxSession._in_chrome(driver, "e")  # type: ignore[arg-type]  # after a failure: back in the page's, anew
    assert driver.calls == ["SET_CONTEXT chrome", "SET_CONTEXT content"] + ["SET_CONTEXT chrome", "script e"] + [
        "SET_CONTEXT content"
    ]


def test_a_reused_chromium_s_launch_settings_name_what_a_restart_changes():
    off = launch_settings(["--headless"], {"dns_over_https": {"mode": "off", "templates": ""}}, ["10.0.0.53"])
    stub = launch_settings(["--headless"], {"dns_over_https": {"mode": "off", "templates": ""}}, ["127.0.0.1"])
    doh = launch_settings(["--x"], {"dns_over_https": {"mode": "secure", "templates": "https://d/q"}}, ["10.9.9.9"])
    assert len({off, stub, doh}) == 3
    assert describe_launch(off) == "built-in resolver on 10.0.0.53"
    assert describe_launch(doh) == "secure DNS https://d/q"


def test_launch_groups_follow_what_each_browser_fixes_at_launch():
    arms = [(p, r) for r in ("near", "far") for p in ("do53", "dot", "doh", "doq", "doh3")]
    assert {Firefox.launch_group(p, r) for p, r in arms} == {""}  # Firefox takes each arm's settings running
    groups = {(p, r): Chromium.launch_group(p, r) for p, r in arms}
    # Chromium: the built-in resolver on each resolver, secure DNS per resolver, and the stub for DoT, DoQ, DoH3.
    assert len(set(groups.values())) == 5
    assert {groups[(p, r)] for p in ("dot", "doq", "doh3") for r in ("near", "far")} == {"stub"}
    assert groups[("do53", "near")] != groups[("do53", "far")] != groups[("doh", "far")] != groups[("doh", "near")]


class _Browser:
    """A stand-in for the visit's browser: whether it started anew (its `session_ordinal`), what was asked of it."""

    def __init__(self, reused: bool, ordinal: int, own_names: frozenset[str] = frozenset()):
        self.session, self.own_names = SessionPolicy("reused" if reused else "fresh"), own_names
        self.ordinal, self.session_ordinal = ordinal, 0
        self.calls: list[str] = []

    def start(self, arm) -> None:
        self.session_ordinal = self.ordinal
        self.calls.append("start")

    def start_failure(self) -> None:
        return None

    def warm_resolver(self, name: str) -> None:
        self.calls.append("warm")

    def stop(self) -> None:
        self.calls.append("stop")


class _Arm:
    """An arm whose reset is counted; whether it needs one is `DnsArm`'s own rule, on the stub's start time."""

    protocol = "dot"
    connection_unopened = DnsArm.connection_unopened

    def __init__(self, fails: bool = False, stub_started_at: float | None = None):
        self.resets, self.fails, self.stub_started_at = 0, fails, stub_started_at

    def reset_connection(self) -> int:
        self.resets += 1
        if self.fails:
            raise HarnessError("the stub did not listen")
        return 2


def _prepare(
    browser: _Browser, connection: str, arm: _Arm, counted: ClientCount | None = None
) -> tuple[bool, int | None]:
    """`Visitor._prepare` (before the counters start), then `_reset_connection` (once they run, having counted
    ``counted`` since their last reading), as `_browse` calls them: whether the browser was started before the
    window, and the connections the reset closed."""
    visitor = Visitor.__new__(Visitor)  # no place, no root: these read the fields set here alone
    visitor.browser, visitor.session, visitor.resolver_connection = browser, browser.session, connection  # type: ignore[assignment]
    seen = _Observed("http://x/", "id", "now", PageLoad(), None, None, {}, counted=counted)
    prepared = visitor._prepare(arm, seen)  # type: ignore[arg-type]
    browser.calls.append("counters")
    if prepared:
        visitor._reset_connection(arm, seen)  # type: ignore[arg-type]
    arm.decided = seen.connection_reset  # type: ignore[attr-defined]
    return prepared, seen.connections_closed


@pytest.mark.parametrize(
    ("reused", "ordinal", "connection", "resets", "calls"),
    [
        (True, 1, "cold", 1, ["start", "counters"]),  # a new reused browser, cold: it may ask through the arm
        (True, 2, "cold", 0, ["start", "counters"]),  # the same browser again: its start asked nothing
        (True, 2, "chromium", 1, ["start", "counters"]),  # ... unless it asks names of its own (Chromium)
        (True, 1, "warm", 0, ["start", "warm", "counters"]),  # warm: the warm-up opens the connection on purpose
        (False, 1, "warm", 0, ["start", "warm", "counters"]),
        (False, 1, "cold", 0, ["counters"]),  # a fresh cold browser starts inside the counted window, as before
    ],
)
def test_a_cold_visit_in_a_new_reused_browser_gets_a_new_connection(reused, ordinal, connection, resets, calls):
    own = frozenset({"update.example"}) if connection == "chromium" else frozenset()
    connection = "cold" if connection == "chromium" else connection
    browser, arm = _Browser(reused, ordinal, own), _Arm()
    prepared, closed = _prepare(browser, connection, arm)
    assert prepared is (calls != ["counters"]) and browser.calls == calls
    # The reset comes after the counters start (the browser's own lookups until then are not the visit's), and
    # the record says what it closed; None where none ran.
    assert arm.resets == resets and closed == (2 if resets else None)


@pytest.mark.parametrize(
    ("protocol", "started", "packets", "decided"),
    [
        ("dot", 2.0, {}, "unopened"),  # the stub started after the counters' last reading, and opened nothing
        ("dot", 2.0, {"dot_connections": 1}, "reset"),  # it opened a connection (the browser's own lookups)
        ("dot", 2.0, {"dot_resolver": 3}, "unopened"),  # packets of a connection closing (the last visit's stub)
        ("dot", 0.5, {}, "reset"),  # started before the counting began: its traffic may not all be counted
        ("dot", None, {}, "reset"),  # no stub: a connection the browser holds can predate any count
        ("dot", 2.0, None, "reset"),  # the counting table was made anew: nothing counted before the window
        ("doq", 2.0, {"doq_resolver": 2}, "unopened"),  # QUIC: a CONNECTION_CLOSE is no handshake...
        ("doq", 2.0, {"doq_initials": 1}, "reset"),  # ... an Initial is
        ("doh3", 2.0, {"doh3_fallback": 1}, "reset"),  # and so is a SYN to its TCP twin
    ],
)
def test_a_cold_visit_s_stub_is_restarted_unless_the_counters_prove_it_opened_no_connection(
    protocol, started, packets, decided
):
    arm = _Arm(stub_started_at=started)
    arm.protocol = protocol
    counted = None if packets is None else ClientCount(packets, since=1.0)
    _, closed = _prepare(_Browser(True, 2, frozenset({"update.example"})), "cold", arm, counted)
    assert arm.decided == decided  # type: ignore[attr-defined]
    assert arm.resets == (decided == "reset") and closed == (2 if decided == "reset" else None)


def test_plain_dns_never_needs_its_connection_reset():
    assert Do53Arm.connection_unopened(Do53Arm.__new__(Do53Arm), None)  # a query is a datagram of its own


def test_a_connection_that_cannot_be_reset_ends_the_visit_s_browser_and_says_why():
    browser = _Browser(True, 1)
    with pytest.raises(HarnessError, match="did not listen"):
        _prepare(browser, "cold", _Arm(fails=True))
    assert browser.calls == ["start", "counters", "stop"]


def test_a_process_s_descendants_and_their_cpu_time_are_read_from_proc():
    """What the renderers' idle wait reads: the browser's descendants (a grandchild here) and their CPU time, a
    thread's other than the first counted while it runs. The spinning is a child's: this process's threads come
    and go (a thread that ends takes its time along), so its own sum may fall while a thread of it spins."""
    spin = "import time\nend = time.monotonic() + 20\nwhile time.monotonic() < end: pass\n"
    script = f"import subprocess, threading; threading.Thread(target=exec, args=({spin!r},)).start(); "
    script += "subprocess.run(['sleep', '30'])"
    child = subprocess.Popen([sys.executable, "-c", script], start_new_session=True)
    try:
        deadline = time.monotonic() + 5
        while len(descendants(os.getpid())) < 2 and time.monotonic() < deadline:
            time.sleep(0.01)
        below = descendants(os.getpid())
        assert child.pid in below and len(below) >= 2, below  # the child and its sleep
        assert os.getpid() not in below
        before = renderer_cpu_s([child.pid])[child.pid]
        deadline, cpu = time.monotonic() + 10, {}
        while time.monotonic() < deadline:  # its spinning thread, not the first, is counted as it runs
            cpu = renderer_cpu_s([child.pid, 999_999_999])
            if cpu[child.pid] - before >= 0.1:
                break
            time.sleep(0.02)
        assert cpu[child.pid] - before >= 0.1 and 999_999_999 not in cpu, (before, cpu)
        (sleeper,) = descendants(child.pid)  # not any other process below this one: CI's carry busy ones
        assert renderer_cpu_s([sleeper])[sleeper] < 0.5  # it waits
    finally:
        os.killpg(child.pid, signal.SIGKILL)  # the child, its thread and its sleep
        child.wait()


def test_sockets_are_read_from_proc_in_either_family():
    word = "0100007F" if sys.byteorder == "little" else "7F000001"  # 127.0.0.1 in host byte order
    mapped = "FFFF0000" if sys.byteorder == "little" else "0000FFFF"
    assert _endpoint(f"{word}:0035") == ("127.0.0.1", 53)
    assert _endpoint(f"0000000000000000{mapped}{word}:01BB") == ("127.0.0.1", 443)
    before = dns_queries_in_flight(os.getpid(), os.getuid())
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as query:
        query.connect(("127.0.0.1", 53))  # a query's socket: connected, nothing sent
        assert dns_queries_in_flight(os.getpid(), os.getuid()) == before + 1
        assert dns_queries_in_flight(os.getpid(), os.getuid() + 1) == 0


def test_only_an_established_doh_connection_holding_unacknowledged_data_carries_a_query():
    word = "010200C0" if sys.byteorder == "little" else "C0000201"  # 192.0.2.1 in host byte order
    server = {("192.0.2.1", 443)}

    def tcp(state: str, tx_queue: int, uid: int = 1000, port: str = "01BB") -> list[str]:
        return ["0:", "0100007F:D431", f"{word}:{port}", state, f"{tx_queue:08X}:00000000", "00:0", "0", str(uid)]

    assert _carries_a_query(tcp("01", 37), "tcp", 1000, server)  # a query sent, not acknowledged yet
    assert not _carries_a_query(tcp("01", 0), "tcp", 1000, server)  # answered or idle
    assert not _carries_a_query(tcp("02", 1), "tcp", 1000, server)  # SYN_SENT: its SYN counts as one byte
    assert not _carries_a_query(tcp("04", 1), "tcp", 1000, server)  # FIN_WAIT1: its FIN
    assert not _carries_a_query(tcp("01", 37, uid=1001), "tcp", 1000, server)
    assert not _carries_a_query(tcp("01", 37, port="0050"), "tcp", 1000, server)


def test_a_doh_server_is_where_the_browser_s_own_client_sends_over_tcp():
    assert BrowserDns("doh", "https://dns.example/dns-query", "192.0.2.1").doh_server() == ("192.0.2.1", 443)
    assert BrowserDns("doh", "https://dns.example:8443/q", "2001:0db8::1").doh_server() == ("2001:db8::1", 8443)
    assert BrowserDns("doh", "https://dns.example/q", "192.0.2.1", http3=True).doh_server() is None
    assert BrowserDns().doh_server() is None


def test_a_dns_wait_that_ran_out_reaches_the_store_and_the_report_s_summary(tmp_path):
    from analysis.report import analyze
    from harness.plan import make_plan
    from harness.sitelist import Site
    from harness.store import CompletedVisit, Store
    from tests.synthetic import make_store

    store = Store(tmp_path / "s.sqlite")
    plan = list(make_plan([Site(f"s{i}.test", i + 1, "top") for i in range(4)], 1, ["wired"], [("near", "do53")], 1))
    store.add_study("s", "s", 1, {"study": {}}, plan)
    readies = [  # two waits recorded, queries left in one; both settled; a fresh browser; a record from before
        {"renderers": 1, "dns_in_flight_before": 0, "dns_in_flight_after": 2},
        {"dns_in_flight_before": 0, "dns_in_flight_after": 0},
        None,
        {"renderers": 1},
    ]
    base = {"error_class": "Successful", "detail": "", "paper_2019": "Successful", "counted": True}
    records = [
        {**base, "visit_id": f"v{i}", "started_at": "2026-11-29T00:00:00Z", "on_load_ms": 900.0, "browser_ready": r}
        for i, r in enumerate(readies)
    ]
    store.complete_many("s", [CompletedVisit(v, r) for v, r in zip(plan, records, strict=True)])
    rows = store.db.execute("SELECT dns_unsettled FROM visits ORDER BY ordinal").fetchall()
    store.close()
    assert [row[0] for row in rows] == [2, 0, None, None]

    synthetic = make_store(tmp_path / "r.sqlite", lambda *_: ("Successful", 1000.0, "Successful"), sites=6)
    quiet = analyze([synthetic], tmp_path / "quiet").html.read_text()
    assert "DNS wait" not in quiet  # no visit recorded the waits: nothing to say
    with sqlite3.connect(synthetic) as db:
        db.execute("UPDATE visits SET dns_unsettled = CASE WHEN rank = 1 THEN 3 ELSE 0 END")
    page = analyze([synthetic], tmp_path / "report").html.read_text()
    assert "2 of 12 reused browsers' visits ended a DNS wait with queries in flight" in page


def test_a_renewed_resolver_connection_and_chromium_s_own_lookups_reach_the_store_and_the_environment(tmp_path):
    from analysis.report import analyze
    from harness.plan import make_plan
    from harness.sitelist import Site
    from harness.store import CompletedVisit, Store
    from tests.synthetic import make_store

    store = Store(tmp_path / "s.sqlite")
    plan = list(make_plan([Site(f"s{i}.test", i + 1, "top") for i in range(4)], 1, ["wired"], [("near", "dot")], 1))
    store.add_study("s", "s", 1, {"study": {}}, plan)
    recorded = [  # Chromium's first visit (renewed) and a later one (own lookups, none open); Firefox; from before
        ("reset", {"values": {"dns": {"own_lookups_before_page": 0}}}),
        ("unopened", {"values": {"dns": {"own_lookups_before_page": 2}}}),
        (None, {"values": {"network.trr.mode": 3}}),
        (None, None),
    ]
    base = {"error_class": "Successful", "detail": "", "paper_2019": "Successful", "counted": True}
    records = [
        {**base, "visit_id": f"v{i}", "started_at": "2026-11-30T00:00:00Z", "on_load_ms": 900.0}
        | {"resolver_connection_reset": reset, "browser_dns": dns}
        for i, (reset, dns) in enumerate(recorded)
    ]
    store.complete_many("s", [CompletedVisit(v, r) for v, r in zip(plan, records, strict=True)])
    rows = store.db.execute("SELECT resolver_connection_reset, own_lookups_before_page FROM visits ORDER BY ordinal")
    assert rows.fetchall() == [("reset", 0), ("unopened", 2), (None, None), (None, None)]
    store.close()

    synthetic = make_store(tmp_path / "r.sqlite", lambda *_: ("Successful", 1000.0, "Successful"), sites=6)
    assert "renewed in the counted window" not in analyze([synthetic], tmp_path / "quiet").html.read_text()
    with sqlite3.connect(synthetic) as db:
        db.execute("UPDATE visits SET resolver_connection_reset = CASE WHEN rank = 1 THEN 'reset' ELSE 'unopened' END")
        db.execute("UPDATE visits SET own_lookups_before_page = CASE WHEN rank = 2 THEN 1 ELSE 0 END")
    page = analyze([synthetic], tmp_path / "report").html.read_text()
    assert (
        "resolver connection renewed in the counted window: 2 reset, 10 unopened, "
        "2 of 12 Chromium visits began with lookups of the browser&#x27;s own names" in page
    )
