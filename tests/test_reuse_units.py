"""The reused browser's and resolver connection's logic that touches no network: policies and counter readings."""

from __future__ import annotations

import pytest

from harness.arms.evidence import ResolverConnections, client_counter_names
from harness.browser.base import SessionPolicy
from harness.errors import HarnessError


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
