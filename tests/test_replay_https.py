"""HTTPS records (RFC 9460) in record and replay: the archive's field, the rewrite for a replay lab, the zone.

Fast, no lab; the round trip in real labs is tests/test_replay_https_lab.py.
"""

from __future__ import annotations

import base64
import gzip
import hashlib
import json
from dataclasses import replace
from pathlib import Path

import dns.exception
import dns.message
import dns.rcode
import dns.rdatatype
import dns.rrset
import pytest
from click.testing import CliRunner

from harness.cli import main
from harness.errors import HarnessError
from harness.lab.config import load_lab_config
from harness.lab.replayweb import ReplayWeb
from harness.lab.zones import https_record_owners, replay_zone_file
from harness.replay import recorder
from harness.replay.archive import INDEX, VERSION, Archive, DnsAnswer, SiteRecord, write_site
from harness.replay.har_import import synthesize_dns
from harness.replay.https_rewrite import Rewritten, announces_h3, rewrite_https
from harness.replay.matching import response_headers
from tests.test_replay import _record

LAB = {"www.a.test": "10.0.0.5", "cdn.a.test": "10.0.0.6"}
#: The smallest ECHConfigList dnspython accepts: a length prefix and one 4-octet config.
ECH = base64.b64encode(b"\x00\x04\xfe\x0d\x00\x00").decode()


def _rewrite(text: str, owner: str = "www.a.test") -> Rewritten:
    return rewrite_https(text, owner, LAB.get)


@pytest.mark.parametrize(
    ("recorded", "published", "changes"),
    [
        # the synthetic lab's own record: its address is the lab's, HTTP/3 is not served
        ('1 . alpn="h3,h2" ipv4hint=192.0.2.1', '1 . alpn="h2" ipv4hint="10.0.0.5"', ("h3", "ipv4hint")),
        ('1 . alpn="h3,h2" ipv4hint=10.0.0.5', '1 . alpn="h2" ipv4hint="10.0.0.5"', ("h3",)),  # already the lab's
        ("1 . alpn=h2,h3-29,http/1.1", '1 . alpn="h2,http/1.1"', ("h3",)),  # drafts too
        ("1 . alpn=h3,h3-29 no-default-alpn", "1 .", ("h3", "alpn")),  # nothing left: no-default-alpn goes too
        ('1 . alpn="h3,h2" no-default-alpn', '1 . alpn="h2" no-default-alpn', ("h3",)),
        ("1 . alpn=h2 ipv6hint=2001:db8::1", '1 . alpn="h2"', ("ipv6hint",)),
        (f"1 . alpn=h2 ech={ECH}", '1 . alpn="h2"', ("ech",)),
        ("1 . alpn=h2 port=8443", '1 . alpn="h2"', ("port",)),
        ("1 . alpn=h2 port=443", '1 . alpn="h2" port="443"', ()),
        ("1 . alpn=h2 key65000=x", '1 . alpn="h2"', ("unknown_key",)),
        ("1 . alpn=h2 dohpath=/q{?dns}", '1 . alpn="h2"', ("unknown_key",)),
        (f"1 . mandatory=alpn,ech alpn=h2 ech={ECH}", '1 . mandatory="alpn" alpn="h2"', ("ech", "mandatory")),
        # everything goes: an empty ServiceMode record is still one (the name publishes a record)
        (
            f"1 . mandatory=alpn,ipv6hint alpn=h3 ipv6hint=::1 ech={ECH} port=8443 key65000=x",
            "1 .",
            ("unknown_key", "ipv6hint", "ech", "port", "h3", "alpn", "mandatory"),
        ),
        # a TargetName the zone has: kept, its hint the target's lab address
        ("2 cdn.a.test. alpn=h2 ipv4hint=192.0.2.9", '2 cdn.a.test. alpn="h2" ipv4hint="10.0.0.6"', ("ipv4hint",)),
        ("2 elsewhere.test. alpn=h2", None, ("dropped",)),  # one it has not: the browser would leave the lab
        ("0 cdn.a.test.", "0 cdn.a.test.", ()),  # AliasMode to a name of the zone
        ("0 elsewhere.test.", None, ("dropped",)),
        ("0 .", None, ("dropped",)),
    ],
)
def test_each_rewrite_rule(recorded, published, changes):
    assert _rewrite(recorded) == Rewritten(published, changes)


def test_a_hint_without_a_lab_address_is_dropped():
    """A ServiceMode record of a name the zone has no address for keeps no recorded address."""
    assert rewrite_https("1 . alpn=h2 ipv4hint=192.0.2.1", "nowhere.test", LAB.get) == Rewritten(
        '1 . alpn="h2"', ("ipv4hint",)
    )


@pytest.mark.parametrize("bad", ["garbage", "1 . alpn=", "1 . mandatory=alpn", ""])
def test_an_unreadable_record_is_a_value_error(bad):
    with pytest.raises(ValueError, match="not an HTTPS record's data"):
        _rewrite(bad)


# -- the archive ------------------------------------------------------


def _with_https(site: str = "a.test") -> SiteRecord:
    """The usual record, its CNAMEd name with two HTTPS records at the chain's end, one name asked and none."""
    record = _record(site)
    dns = dict(record.dns)
    www = f"www.{site}"
    records = ['1 . alpn="h3,h2" ipv4hint=192.0.2.1 ipv6hint=2001:db8::1', '2 . alpn="h3,h2" ipv4hint=192.0.2.1']
    dns[www] = replace(dns[www], https=records, https_ttl=60)
    dns["img.cdn.test"] = replace(dns["img.cdn.test"], https=[])
    return replace(record, dns=dns)


def test_the_archive_keeps_https_records_and_whether_they_were_asked(tmp_path):
    write_site(tmp_path, _with_https())
    assert json.loads((tmp_path / INDEX).read_text())["version"] == VERSION == 4
    loaded = Archive(tmp_path).load("a.test")
    assert loaded == _with_https()
    assert loaded.dns["www.a.test"].https_ttl == 60 and len(loaded.dns["www.a.test"].https or []) == 2
    assert loaded.dns["img.cdn.test"].https == []  # asked, none
    assert loaded.dns["static.b.test"].https is None  # not asked


def test_an_archive_before_version_4_loads_with_https_not_asked(tmp_path):
    """A version 3 site file (no `https` key) reads as "not asked", never as "none"; adding a site makes it 4."""
    write_site(tmp_path, _record("a.test"))
    path = tmp_path / "sites" / "a.test.json.gz"
    doc = json.loads(gzip.decompress(path.read_bytes()))
    for answer in doc["dns"].values():
        answer.pop("https", None)
        answer.pop("https_ttl", None)
    data = gzip.compress(json.dumps(doc).encode())
    path.write_bytes(data)
    index = json.loads((tmp_path / INDEX).read_text())
    index["version"] = 3
    index["sites"][0]["sha256"] = hashlib.sha256(data).hexdigest()
    (tmp_path / INDEX).write_text(json.dumps(index))
    loaded = Archive(tmp_path).load("a.test")
    assert all(d.https is None for d in loaded.dns.values())
    write_site(tmp_path, _record("b.test"))
    assert json.loads((tmp_path / INDEX).read_text())["version"] == 4
    assert Archive(tmp_path).load("a.test") == loaded


def test_a_har_import_makes_no_https_records_up():
    entries = [{"request": {"url": "https://www.a.test/"}, "serverIPAddress": "192.0.2.1"}]
    assert all(d.https is None and d.synthesized for d in synthesize_dns(entries).values())


def test_alt_svc_is_kept_in_the_archive_and_not_replayed(tmp_path):
    """The archive keeps the recorded Alt-Svc header; the replay does not send it (it would invite the browser
    to HTTP/3, which the replay web does not serve)."""
    write_site(tmp_path, _record())
    document = Archive(tmp_path).load("a.test").exchanges[0]
    assert ("Alt-Svc", "h3=':443'") in document.response_headers
    assert "alt-svc" not in {name for name, _ in response_headers(document)}


# -- the replay zone --------------------------------------------------


def _plan(directory: Path) -> ReplayWeb:
    config = load_lab_config().with_overrides(prefix="dsunit", subnet="198.18.250.0/23")
    return ReplayWeb.plan(config, directory)


def test_the_zone_publishes_rewritten_records_at_the_chain_s_end(tmp_path):
    write_site(tmp_path, _with_https())
    web = _plan(tmp_path)
    edge = web.records["edge.cdn.test"][1]  # www.a.test is a CNAME to edge.cdn.test, which owns the records
    zone = web.zone_lines()
    assert f'edge.cdn.test. 60 IN HTTPS 1 . alpn="h2" ipv4hint="{edge}"\n' in zone
    assert f'edge.cdn.test. 60 IN HTTPS 2 . alpn="h2" ipv4hint="{edge}"\n' in zone
    # what a visit's record reads as `published`: the owner, and the name whose chain ends there
    assert https_record_owners(zone) == {"edge.cdn.test", "www.a.test"}
    assert "www.a.test. 60 IN HTTPS" not in zone and "img.cdn.test" not in https_record_owners(zone)
    assert web.https_changes == {"published": 2, "h3": 2, "ipv4hint": 2, "ipv6hint": 1}
    assert web.https_summary() == "2 published at 1 names; rewritten: ipv4hint 2, ipv6hint 1, h3 2"


def test_a_replay_with_http3_keeps_h3_where_its_address_offers_it(tmp_path):
    """In a lab with `http3`, the address of a name whose record announced h3 offers HTTP/3 (the replay's front),
    so the record keeps h3; the rest of the rewrite is the same. Without `http3`, h3 goes."""
    assert announces_h3('1 . alpn="h3,h2"') and not announces_h3("1 . alpn=h2") and not announces_h3("x")
    assert rewrite_https('1 . alpn="h3,h2"', "www.a.test", LAB.get, frozenset({"10.0.0.5"})).changes == ()
    record = _with_https()
    page = replace(record.exchanges[0], response_headers=[("Content-Type", "text/html")])  # no Alt-Svc: the record
    write_site(tmp_path, replace(record, exchanges=[page, *record.exchanges[1:]]))
    config = load_lab_config("profiles/lab/http3.toml").with_overrides(prefix="dsunit", subnet="198.18.250.0/23")
    web = ReplayWeb.plan(config, tmp_path)
    edge = web.records["edge.cdn.test"][1]
    assert web.h3_served(True) == [edge]
    assert f'edge.cdn.test. 60 IN HTTPS 1 . alpn="h3,h2" ipv4hint="{edge}"\n' in web.zone_lines()
    assert web.https_changes["h3"] == 0 and _plan(tmp_path).https_changes["h3"] == 2


def test_a_resolver_without_https_records_reads_a_zone_without_the_archive_s(tmp_path):
    write_site(tmp_path, _with_https())
    web = _plan(tmp_path)
    assert " IN HTTPS " in web.zone_lines() and " IN HTTPS " not in web.zone_lines(https=False)
    assert web.zone_lines(https=False) == "".join(
        line for line in web.zone_lines().splitlines(True) if "HTTPS" not in line
    )
    config = load_lab_config("profiles/lab/https-records.toml")
    by_name = {r.name: r for r in config.settings.resolvers}
    assert replay_zone_file(tmp_path, by_name["near-bare"]).name == "root-bare.zone"
    assert {replay_zone_file(tmp_path, by_name[n]).name for n in ("near", "far")} == {"root.zone"}


def test_records_that_rewrite_to_the_same_are_published_once_and_dropped_ones_counted(tmp_path):
    record = _record()
    dns = dict(record.dns)
    texts = ["1 . alpn=h2 ipv6hint=::1", '1 . alpn="h2"', "0 elsewhere.test."]
    dns["static.b.test"] = replace(dns["static.b.test"], https=texts, https_ttl=30)
    write_site(tmp_path, replace(record, dns=dns))
    web = _plan(tmp_path)
    assert web.https == {"static.b.test": (['1 . alpn="h2"'], 30)}
    assert web.https_changes == {"published": 1, "ipv6hint": 1, "dropped": 1}


def test_a_record_that_cannot_be_read_stops_the_plan_in_one_line(tmp_path):
    record = _record()
    dns = dict(record.dns)
    dns["img.cdn.test"] = replace(dns["img.cdn.test"], https=["1 . alpn="])
    write_site(tmp_path, replace(record, dns=dns))
    with pytest.raises(HarnessError) as caught:
        _plan(tmp_path)
    message = str(caught.value)
    assert "\n" not in message and message.startswith(str(tmp_path / "sites" / "a.test.json.gz"))
    assert "site a.test, name img.cdn.test: HTTPS record '1 . alpn=': not an HTTPS record's data" in message


def test_no_records_asked_none_published(tmp_path):
    write_site(tmp_path, _record())
    web = _plan(tmp_path)
    assert web.https == {} and "HTTPS" not in web.zone_lines()
    assert web.https_summary() == "0 published at 0 names"


def test_a_dns_answer_without_https_is_not_asked():
    assert DnsAnswer("a.test").https is None


def test_archive_show_prints_a_name_s_https_records(tmp_path):
    write_site(tmp_path, _with_https())
    done = CliRunner().invoke(main, ["archive", "show", str(tmp_path)])
    assert done.exit_code == 0, done.output
    line = next(line for line in done.output.splitlines() if line.strip().startswith("www.a.test"))
    assert line.endswith(
        '; HTTPS 1 . alpn="h3,h2" ipv4hint=192.0.2.1 ipv6hint=2001:db8::1 | 2 . alpn="h3,h2" ipv4hint=192.0.2.1 (60 s)'
    )


def test_a_name_is_published_through_its_whole_chain_and_a_cname_loop_ends():
    zone = (
        "a.test. 60 IN CNAME b.test.\nb.test. 60 IN CNAME c.test.\nc.test. 60 IN HTTPS 1 . alpn=h2\n"
        "x.test. 60 IN CNAME y.test.\ny.test. 60 IN CNAME x.test.\n"
    )
    assert https_record_owners(zone) == {"a.test", "b.test", "c.test"}


# -- recording --------------------------------------------------------


def _reply(rcode: dns.rcode.Rcode = dns.rcode.NOERROR, *rrsets: str) -> dns.message.Message:
    reply = dns.message.make_response(dns.message.make_query("www.a.test", dns.rdatatype.HTTPS))
    reply.set_rcode(rcode)
    for text in rrsets:
        name, ttl, klass, kind, data = text.split(" ", 4)
        reply.answer.append(dns.rrset.from_text(name, int(ttl), klass, kind, data))
    return reply


@pytest.mark.parametrize(
    ("reply", "stored"),
    [
        (
            _reply(
                dns.rcode.NOERROR,
                "www.a.test. 120 IN CNAME edge.cdn.test.",
                'edge.cdn.test. 60 IN HTTPS 1 . alpn="h3,h2" ipv4hint=192.0.2.1',
            ),
            (['1 . alpn="h3,h2" ipv4hint="192.0.2.1"'], 60),  # the chain's end's, as dnspython prints it
        ),
        (_reply(dns.rcode.NOERROR), ([], 0)),  # asked, none
        (_reply(dns.rcode.NXDOMAIN), ([], 0)),
        (_reply(dns.rcode.SERVFAIL), (None, 0)),  # no answer: not recorded as "none"
        (dns.exception.Timeout(), (None, 0)),
    ],
)
def test_record_asks_each_name_s_https_records(monkeypatch, reply, stored):
    def ask(namespace: str, resolver: str, name: str, rdtype: object, timeout: float) -> dns.message.Message:
        assert rdtype == dns.rdatatype.HTTPS
        if isinstance(reply, Exception):
            raise reply
        return reply

    monkeypatch.setattr(recorder, "_ask", ask)
    assert recorder._https_records("ns", "192.0.2.53", "www.a.test", 1.0) == stored
