"""The protocol registry: every consumer reads it, and a new arm needs no edit anywhere else (fast, no lab)."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from harness import protocols
from harness.arms import ClientSide, DnsArm, Resolver, browser_protocols, make_arm
from harness.arms.base import register_arm, unregister_arm
from harness.arms.evidence import client_counter_names, forbidden_counters, required_counters
from harness.cli import main
from harness.protocols import Protocol
from harness.resolvers import protocols_of
from harness.study import load_study
from harness.timer import TimerSettings, timer_argv, timer_protocols
from tests.synthetic import make_store
from tests.test_study import GOOD, write_study

RESOLVER = Resolver(
    "near",
    "198.18.1.53",
    "near.dns.lab.test",
    "https://near.dns.lab.test/dns-query",
    doq_port=8853,
    doh3_uri="https://near.dns.lab.test:8443/dns-query",
)
CLIENT = ClientSide("x-client", Path("/run/dnsstudy/x"), Path("/run/dnsstudy/x/ca.pem"), "198.18.1.60")


def _choices(*command: str) -> tuple[str, ...]:
    """The --protocol choices of a CLI command, as its parser sees them."""
    cmd: click.Command = main
    for name in command:
        assert isinstance(cmd, click.Group), cmd
        cmd = cmd.commands[name]
    option = next(p for p in cmd.params if p.name in ("protocol", "protocols"))
    assert isinstance(option.type, click.Choice), option.type
    return tuple(option.type.choices)


def _study_with(tmp_path: Path, protocol_list: str, timer: str = "") -> Path:
    text = GOOD.replace('protocols = ["do53", "dot", "doh"]', f"protocols = {protocol_list}") + timer
    return write_study(tmp_path, text)


def test_the_registry_is_ordered_and_names_every_protocol_once():
    names = protocols.names()
    assert names[0] == "do53" and len(names) == len(set(names))
    assert set(browser_protocols()) <= set(names) and set(timer_protocols()) <= set(names)
    assert protocols.plain_protocols() == ["do53"]
    with pytest.raises(ValueError, match="registered twice"):
        protocols.register_protocol(Protocol("dot", rank=1, port=8530, carrier="tcp", encrypted=True))


def test_every_browser_protocol_is_accepted_by_every_consumer(tmp_path):
    counters = set(client_counter_names())
    for name in browser_protocols():
        arm = make_arm(name, RESOLVER, CLIENT)
        assert arm.protocol == name
        assert name in _choices("visit")
        assert load_study(str(_study_with(tmp_path, f'["{name}"]'))).study.protocols == [name]
        required, forbidden = required_counters(name, arm.uses_stub), forbidden_counters(name, arm.uses_stub)
        assert set(required) <= counters and set(forbidden) <= counters and not set(required) & set(forbidden)
        assert f"{name}_resolver" in required
        assert name in protocols_of("near")


def test_every_timer_protocol_is_accepted_by_every_consumer(tmp_path):
    for name in timer_protocols():
        argv = timer_argv(name, RESOLVER, Path("/ca.pem"), TimerSettings())
        assert argv[argv.index("--protocol") + 1] == name
        assert name in _choices("timer")
        timer = f'\n[timer]\nprotocols = ["{name}"]\n'
        assert load_study(str(_study_with(tmp_path, '["do53"]', timer))).study.timer.protocols == [name]


def test_the_store_carries_the_order_and_the_analysis_follows_it(tmp_path):
    import json
    import sqlite3

    from analysis.pairs import configurations
    from analysis.results import load
    from harness.store import Store

    browser = browser_protocols()
    scrambled = [("r", p) for p in reversed(browser)]
    store = make_store(
        tmp_path / "s.sqlite", lambda *a: ("Successful", 1000.0, "Successful"), sites=4, configurations=scrambled
    )
    # Written before meta.protocols existed: the default analysis profile's label order.
    assert configurations(load(store).visits) == [("r", p) for p in browser]
    Store(store).record_protocols()
    assert configurations(load(store).visits) == [("r", p) for p in browser]
    # Whatever order the store records is the order the analysis shows.
    db = sqlite3.connect(store)
    with db:
        db.execute("UPDATE meta SET value = ? WHERE key = 'protocols'", (json.dumps(list(reversed(browser))),))
    db.close()
    assert configurations(load(store).visits) == scrambled


@pytest.fixture
def dummy_arm():
    """A transport registered by the test alone, as a new arm module would register it."""
    proto = Protocol("dummy", rank=99, port=5300, carrier="udp", encrypted=True)

    @register_arm(proto)
    class DummyArm(DnsArm):
        def start(self) -> None:
            self.client.set_system_resolver(self.resolver.address)

    yield DummyArm
    _unregister_dummy()


def _unregister_dummy() -> None:
    unregister_arm("dummy")
    protocols.unregister("dummy")


def test_a_new_arm_appears_in_the_cli_the_study_and_the_proofs_without_other_edits(dummy_arm, tmp_path):
    assert "dummy" in browser_protocols() and "dummy" in _choices("visit")
    refused = CliRunner().invoke(main, ["visit", "https://x.test/", "--protocol", "dnscrypt"])
    assert refused.exit_code == 2 and "dummy" in refused.output  # the choices offered include it
    assert load_study(str(_study_with(tmp_path, '["do53", "dummy"]'))).study.protocols == ["do53", "dummy"]
    assert isinstance(make_arm("dummy", RESOLVER, CLIENT), dummy_arm)
    assert "dummy_resolver" in client_counter_names()
    assert "dummy_connections" in forbidden_counters("do53", uses_stub=False)  # other arms may not use it
    assert "dummy" not in timer_protocols()  # an arm alone gives no timer
    _unregister_dummy()
    assert "dummy" not in _choices("visit")
    with pytest.raises(Exception, match="no browser arm for protocol 'dummy'"):
        load_study(str(_study_with(tmp_path, '["dummy"]')))
