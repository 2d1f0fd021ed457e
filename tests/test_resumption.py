"""TLS session resumption: the lab option, the timers' --resume and `resumed` record, and `bench resumption`.

The unit tests need no lab. The lab tests use the session lab (no tickets) and private labs with
`tls_resumption`; timing bounds count round trips on a shaped link, with wide margins.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.lab.config import LabConfig, load_lab_config
from harness.lab.unbound import DOT_PORT, nodelay_env, openssl_conf
from harness.resolver_bench import BenchProfile, Resumption, load_bench_profile, resumption, resumption_rows, run
from harness.timer import TimerSettings, Timing, time_names, timer_argv
from tests.test_timer_units import CA, LAB, RECORD

ROOT = Path(__file__).resolve().parent.parent
TLS_PROTOCOLS = ["dot", "doh", "doq", "doh3"]


def _timing(**changes: object) -> Timing:
    return Timing.from_json(json.dumps({**RECORD, **changes}))


def _with_resumption(config: LabConfig) -> LabConfig:
    return LabConfig(settings=config.settings.model_copy(update={"tls_resumption": True}), source=config.source)


# -- no lab --------------------------------------------------------------------


def test_records_without_the_resumption_fields_still_parse():
    old = _timing()  # RECORD predates the fields
    assert (old.resume, old.resumed, old.zero_rtt) == (False, None, None)
    new = _timing(resume=True, resumed=True, zero_rtt=False)
    assert (new.resume, new.resumed, new.zero_rtt) == (True, True, False)


@pytest.mark.parametrize("protocol", TLS_PROTOCOLS)
def test_resume_reaches_both_timers_only_when_asked(protocol):
    assert "--resume" in timer_argv(protocol, LAB, CA, TimerSettings(reuse=False, resume=True))
    assert "--resume" not in timer_argv(protocol, LAB, CA, TimerSettings(reuse=False))


def test_the_option_defaults_to_no_tickets_and_turns_them_and_nodelay_on():
    assert "NumTickets = 0" in openssl_conf(False) and "NumTickets = 0" not in openssl_conf(True)
    assert "NumTickets = 2" in openssl_conf(True)
    assert not load_lab_config().settings.tls_resumption
    assert load_lab_config("profiles/lab/resumption.toml").settings.tls_resumption
    env = nodelay_env()
    assert Path(env["LD_PRELOAD"]).name == "nodelay.so" and Path(env["LD_PRELOAD"]).is_file()
    assert env["DNSSTUDY_NODELAY_PORTS"] == str(DOT_PORT)


def test_resumption_rows_count_each_sample_where_it_belongs():
    rtt = 50.0
    cold = [
        _timing(tcp_setup_us=50_000, tls_setup_us=50_000, duration_us=150_000, resumed=False),
        _timing(tcp_setup_us=50_000, tls_setup_us=60_000, duration_us=160_000, resumed=False),
        _timing(tcp_setup_us=50_000, tls_setup_us=10_000, duration_us=90_000, resumed=True),  # not cold
        _timing(status="error", duration_us=5_000_000, tcp_setup_us=None, tls_setup_us=None),  # no answer
    ]
    resumed = [
        _timing(tcp_setup_us=None, tls_setup_us=1_000, duration_us=50_000, resumed=True, zero_rtt=True),
        _timing(tcp_setup_us=None, tls_setup_us=3_000, duration_us=54_000, resumed=True, zero_rtt=True),
        _timing(tcp_setup_us=None, tls_setup_us=50_000, duration_us=100_000, resumed=False),  # refused
    ]
    cold_row, resumed_row = resumption_rows("doq", rtt, cold, resumed)
    assert (cold_row["kind"], cold_row["samples"], cold_row["resumed"], cold_row["zero_rtt"]) == ("cold", 4, 1, 0)
    assert (cold_row["handshake_ms"], cold_row["handshake_rtts"], cold_row["answer_rtts"]) == (105.0, 2.1, 3.1)
    assert (resumed_row["kind"], resumed_row["samples"], resumed_row["resumed"], resumed_row["zero_rtt"]) == (
        "resumed",
        3,
        2,
        2,
    )
    assert (resumed_row["handshake_ms"], resumed_row["handshake_rtts"], resumed_row["answer_rtts"]) == (2.0, 0.04, 1.04)
    none = resumption_rows("dot", rtt, [], [])
    assert all(r["samples"] == 0 and r["handshake_rtts"] is None and r["answer_rtts"] is None for r in none)


def test_bench_resumption_is_configured_and_refuses_a_lab_without_tickets():
    from harness.lab.lab import Lab

    profile = load_bench_profile()
    assert profile.resumption is not None and profile.resumption.protocols == TLS_PROTOCOLS
    with pytest.raises(HarnessError, match="tls_resumption"):
        run("resumption", Lab(load_lab_config()), [LAB], profile)
    older = BenchProfile.model_validate(profile.model_dump(exclude={"resumption"}))  # a profile copied before
    with pytest.raises(HarnessError, match=r"no \[resumption\] section"):
        run("resumption", Lab(_with_resumption(load_lab_config())), [LAB], older)


# -- lab -----------------------------------------------------------------------


@pytest.mark.lab
@pytest.mark.parametrize("protocol", TLS_PROTOCOLS)
def test_without_the_option_unbound_never_resumes(lab, protocol):
    """Tickets off: DoT and DoH are never resumed, even when the timer offers sessions.

    dnsproxy (DoQ, DoH3) has no switch for tickets: it resumes whenever a client offers a session.
    """
    client, near = lab.client_side(), lab.resolver("near")
    names = ["www.lab.test"] * 4
    offered = time_names(client, protocol, near, names, TimerSettings(reuse=False, resume=True))
    assert all(t.ok and t.new_connection and t.resume for t in offered), offered
    expected = [False] * 4 if protocol in ("dot", "doh") else [False, True, True, True]
    assert [t.resumed for t in offered] == expected
    plain = time_names(client, protocol, near, names, TimerSettings(reuse=False))
    assert [t.resumed for t in plain] == [False] * 4


@pytest.mark.lab
def test_with_the_option_every_protocol_resumes_and_the_first_dot_answer_is_not_held(lab_config, private_lab):
    the_lab = private_lab(config=_with_resumption(lab_config))
    client, near = the_lab.client_side(), the_lab.resolver("near")
    names = ["www.lab.test"] * 4
    for protocol in TLS_PROTOCOLS:
        offered = time_names(client, protocol, near, names, TimerSettings(reuse=False, resume=True))
        assert all(t.ok and t.new_connection for t in offered), (protocol, offered)
        assert [t.resumed for t in offered] == [False, True, True, True], protocol  # the first gets the ticket
        zero_rtt = [False, True, True, True] if protocol == "doq" else [False] * 4
        assert [t.zero_rtt for t in offered] == zero_rtt, protocol
        # Without --resume nothing is offered: not even the session getdns keeps for its upstream.
        plain = time_names(client, protocol, near, names, TimerSettings(reuse=False))
        assert [t.resumed for t in plain] == [False] * 4, protocol
    # Reused connections open nothing: their queries say nothing about resumption.
    warm = time_names(client, "dot", near, names, TimerSettings(resume=True))
    assert [t.resumed for t in warm] == [False, None, None, None]
    # Tickets without TCP_NODELAY held every first DoT answer ~40 ms (docs/lab.md, "Resumption").
    cold = time_names(client, "dot", near, ["www.lab.test"] * 11, TimerSettings(reuse=False))[1:]
    after_handshake = [(t.duration_us or 0) - (t.tcp_setup_us or 0) - (t.tls_setup_us or 0) for t in cold]
    assert statistics.median(after_handshake) < 20_000, after_handshake


@pytest.mark.lab
def test_bench_resumption_counts_the_round_trips_resumption_saves(lab_config, private_lab):
    """On 4g-symmetric without loss: TLS 1.3 resumption keeps DoT and DoH at TCP + TLS = two RTTs and DoH3 at one
    (its POST waits for the handshake); only DoQ, with 0-RTT, drops its handshake from one RTT to none."""
    the_lab = private_lab(config=_with_resumption(lab_config))
    result = resumption(
        the_lab,
        the_lab.resolver("near"),
        Resumption(source="test", samples=4, protocols=TLS_PROTOCOLS, rtt_probes=30),
    )
    rows = {(r["protocol"], r["kind"]): r for r in result.rows}
    assert len(result.rows) == 2 * len(TLS_PROTOCOLS) and all(r["samples"] == 4 for r in result.rows)
    assert [rows[(p, "cold")]["resumed"] for p in TLS_PROTOCOLS] == [0, 0, 0, 0]
    assert [rows[(p, "resumed")]["resumed"] for p in TLS_PROTOCOLS] == [4, 4, 4, 4]
    assert [rows[(p, kind)]["zero_rtt"] for p in TLS_PROTOCOLS for kind in ("cold", "resumed")] == [
        0,
        0,
        0,
        0,
        0,
        4,
        0,
        0,
    ]
    for protocol, rtts in (("dot", 2), ("doh", 2), ("doh3", 1)):
        cold, resumed = rows[(protocol, "cold")]["handshake_rtts"], rows[(protocol, "resumed")]["handshake_rtts"]
        assert rtts - 0.4 < cold < rtts + 0.8 and rtts - 0.4 < resumed < rtts + 0.8, (protocol, cold, resumed)
    cold, resumed = rows[("doq", "cold")], rows[("doq", "resumed")]
    assert 0.6 < cold["handshake_rtts"] < 1.8 and resumed["handshake_rtts"] < 0.3, (cold, resumed)
    assert resumed["answer_rtts"] < cold["answer_rtts"] - 0.6, (cold, resumed)
    assert len(result.timings) == 2 * 4 * len(TLS_PROTOCOLS)
