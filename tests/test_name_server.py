"""The client namespace's fixed name server (harness/name_server.py), led by NAT to each arm's server."""

from __future__ import annotations

import contextlib
import errno
import json
import socket
import threading

import dns.message
import pytest
from pyroute2.netlink.exceptions import NetlinkError

from harness import name_server, netns
from harness.arms.evidence import resolver_counters
from harness.errors import HarnessError
from harness.name_server import NAME_SERVER
from tests.helpers import in_ns

SOURCE_PORT = 53053  # every query from this port: one connection-tracking entry, unless a change forgets it


def ask(namespace: str) -> str:
    """One query to the fixed name server, from `SOURCE_PORT`: dig's answer section."""
    done = in_ns(namespace, "dig", "+notcp", "+tries=1", "+time=2", "-b", f"0.0.0.0#{SOURCE_PORT}",
                 f"@{NAME_SERVER}", "google.com", "A", "+short")  # fmt: skip
    return done.stdout.strip()


def queries(lab, name: str) -> int:
    return sum(resolver_counters(lab.resolver(name).control_config).values())


@pytest.fixture
def loopback_server(lab):
    """A DNS server on 127.0.0.1:53 of the client namespace (as a stub listens) answering every query with
    192.0.2.53; the queries it got."""
    namespace, got = lab.client_side().namespace, []
    with netns.entered(namespace):
        server = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        server.bind(("127.0.0.1", 53))
    server.settimeout(0.2)
    stop = threading.Event()

    def serve() -> None:
        while not stop.is_set():
            try:
                wire, peer = server.recvfrom(4096)
            except TimeoutError:
                continue
            query = dns.message.from_wire(wire)
            got.append(query.question[0].name.to_text())
            answer = dns.message.make_response(query)
            answer.answer.append(dns.rrset.from_text(query.question[0].name, 60, "IN", "A", "192.0.2.53"))
            server.sendto(answer.to_wire(), peer)

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield got
    stop.set()
    thread.join()
    server.close()


@pytest.mark.lab
def test_the_fixed_name_server_leads_where_each_arm_says_even_from_the_same_port(lab, loopback_server):
    client = lab.client_side()
    near, far = lab.resolver("near"), lab.resolver("far")
    try:
        client.set_system_resolver(near.address)
        assert client.nameservers() == [NAME_SERVER]
        before = queries(lab, "near"), queries(lab, "far")
        assert ask(client.namespace)
        assert (queries(lab, "near"), queries(lab, "far")) == (before[0] + 1, before[1])
        # The same source port again, now to the other resolver: its connection-tracking entry (which still
        # names the first) was forgotten at the change, so the query goes where the arm says.
        client.set_system_resolver(far.address)
        assert ask(client.namespace)
        assert (queries(lab, "near"), queries(lab, "far")) == (before[0] + 1, before[1] + 1)
        client.set_system_resolver("127.0.0.1")  # a stub's address: redirected to loopback
        assert ask(client.namespace) == "192.0.2.53" and loopback_server == ["google.com."]
        assert (queries(lab, "near"), queries(lab, "far")) == (before[0] + 1, before[1] + 1)
    finally:
        client.restore_system_resolver()
    # Between visits the namespace resolves through the lab's resolver, as before any arm.
    assert client.nameservers() == [NAME_SERVER] and ask(client.namespace)
    assert name_server.led_to(client.namespace) == client.system_resolver


@pytest.mark.lab
def test_without_the_nat_a_query_to_the_fixed_name_server_reaches_no_server(lab):
    """A query the NAT did not lead anywhere goes nowhere (link-local): no lab resolver receives it."""
    client = lab.client_side()
    client.restore_system_resolver()  # the NAT to the lab's resolver, as between visits
    before = queries(lab, "near"), queries(lab, "far")
    name_server.remove(client.namespace)
    try:
        answer = ask(client.namespace)
        assert not any(line[:1].isdigit() for line in answer.splitlines()), answer  # no address came back
    finally:
        client.restore_system_resolver()
    assert (queries(lab, "near"), queries(lab, "far")) == before


class _Tracking:
    """Connection tracking as pyroute2 gives it: entries to dump, each delete answered by ``errors`` in turn."""

    def __init__(self, errors: list[int]):
        self.errors, self.deleted = errors, 0

    def __enter__(self) -> _Tracking:
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    def dump_entries(self, tuple_orig: object) -> list[str]:
        return ["entry"] * len(self.errors)

    def delete(self, entry: str) -> None:
        if code := self.errors.pop(0):
            raise NetlinkError(code)
        self.deleted += 1


@pytest.mark.parametrize(("errors", "deleted"), [([0, errno.ENOENT, 0], 2), ([0, errno.EPERM], None)])
def test_an_entry_gone_since_the_dump_is_not_an_error_any_other_failure_is_one_line(monkeypatch, errors, deleted):
    monkeypatch.setattr(name_server.netns, "entered", lambda namespace: contextlib.nullcontext())
    monkeypatch.setattr(name_server, "Conntrack", lambda: _Tracking(errors))
    if deleted is not None:
        assert name_server.forget_queries("ns-x") == deleted
    else:
        with pytest.raises(HarnessError, match="cannot delete the connection tracking of DNS in namespace ns-x"):
            name_server.forget_queries("ns-x")


def test_the_server_is_read_back_changed_only_when_another_and_the_table_made_where_there_is_none(monkeypatch):
    """What the namespace holds is read back (another process may have changed it), not remembered."""
    state: dict = {"table": False, "server": ""}
    scripts: list[str] = []

    def nft(namespace: str, args: list[str], script: str | None = None) -> str:
        if args[:2] == ["-j", "list"]:
            if not state["table"]:
                raise HarnessError("nft in namespace ns-y failed: No such file or directory")
            elem = [[NAME_SERVER, state["server"]]] if state["server"] else []
            return json.dumps({"nftables": [{"metainfo": {}}, {"map": {"name": "lead", "elem": elem}}]})
        assert script is not None
        scripts.append("table" if "delete table" in script else "map")
        state["table"], state["server"] = True, script.rsplit(": ", 1)[1].split(" ")[0]
        return ""

    monkeypatch.setattr(name_server.netns, "nft", nft)
    monkeypatch.setattr(name_server, "forget_queries", lambda namespace: 7)
    lead = name_server.lead_to
    assert [lead("ns-y", "10.0.0.1"), lead("ns-y", "10.0.0.1"), lead("ns-y", "127.0.0.1")] == [7, 0, 7]
    assert scripts == ["table", "map"] and name_server.led_to("ns-y") == "127.0.0.1"
    state["server"] = "10.0.0.2"  # another process led it elsewhere: this one's wish is not taken as done
    assert lead("ns-y", "127.0.0.1") == 7 and state["server"] == "127.0.0.1"
    state["table"] = False  # the namespace made anew: the table too
    lead("ns-y", "127.0.0.1")
    assert scripts[-1] == "table" and name_server.led_to("ns-y") == "127.0.0.1"
    with pytest.raises(ValueError):
        lead("ns-y", "10.0.0.1; flush ruleset")
