"""Input bounds: every bad input is refused in one line naming the file, line or key, and the value. No network.

Domains (site lists), rank ranges and rounds (studies), page-shape labels (profiles/web/) and resolver
addresses (profiles/resolvers/, /etc/resolv.conf).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from harness import resolvers
from harness.errors import HarnessError
from harness.lab.pageshape import load_page_shape
from harness.paths import PROJECT_ROOT
from harness.resolvers import host_resolver, load_resolver
from harness.sitelist import ascii_domain, load_site_list, load_tranco
from harness.study import MAX_PLANNED_VISITS, load_study
from tests.test_study import GOOD, write_study

LONG_LABEL = "a" * 64
LONG_NAME = ".".join(["a" * 63] * 4)  # 255 characters


def one_line(error: pytest.ExceptionInfo) -> str:
    """The error's message, which must be a single line."""
    message = str(error.value)
    assert "\n" not in message, message
    return message


# -- domains ---------------------------------------------------------------


@pytest.mark.parametrize(
    "name, problem",
    [
        ("example.com\n", r"control character U\+000A at position 11"),  # `$` in a regex let this one through
        ("\nexample.com", r"control character U\+000A at position 0"),
        ("exa\x00mple.com", r"control character U\+0000"),
        ("\x1b[31mred.com", r"control character U\+001B"),
        ("exa mple.com", r"whitespace U\+0020"),
        (" example.com", r"whitespace U\+0020 at position 0"),
        ("exa\u2028mple.com", r"whitespace U\+2028"),
        ("ex\u200bample.com", r"format character U\+200B"),  # UTS 46 would drop it and change the name silently
        ("b\u00fccher\u00ad.de", r"format character U\+00AD"),
        ("xn--zz.com", r"IDNA: Invalid A-label"),
        ("xn--.com", r"IDNA: Malformed A-label"),
        ("ab--cd.com", r"IDNA: Label has disallowed hyphens"),
        ("\u0663.com", r"IDNA: .*directionality"),
        ("ex\u200dample.com", r"IDNA: Joiner U\+200D not allowed"),
        (f"{LONG_LABEL}.com", r"label 'a{64}': 64 characters, more than 63"),
        (f"{LONG_LABEL}.b\u00fccher.de", r"IDNA: Label too long"),
        (LONG_NAME, r"255 characters, more than 253"),
        ("a..com", r"label '': empty"),
        ("com", r"a registered domain has at least two labels"),
        ("a_b.com", r"label 'a_b': must be lower-case letters, digits and inner hyphens"),
        ("-a.com", r"label '-a'"),
    ],
)
def test_a_bad_domain_is_refused_saying_why(name, problem):
    with pytest.raises(ValueError, match=rf"^not a domain name: .* \({problem}") as error:
        ascii_domain(name)
    assert repr(name) in one_line(error)


@pytest.mark.parametrize(
    "name, expected",
    [
        ("example.com", ("example.com", False)),
        ("EXAMPLE.com.", ("example.com", False)),  # one root dot is the same name
        ("xn--bcher-kva.de", ("xn--bcher-kva.de", False)),
        ("B\u00fccher.de", ("xn--bcher-kva.de", True)),
        (".".join(["a" * 63] * 3) + "." + "a" * 61, (".".join(["a" * 63] * 3) + "." + "a" * 61, False)),  # 253
    ],
)
def test_good_domains_pass(name, expected):
    assert ascii_domain(name) == expected


@pytest.mark.parametrize(
    "row, problem",
    [
        ('"example.com\n"', r"control character U\+000A"),
        ('"exa\x07mple.com"', r"control character U\+0007"),
        (" example.com", r"whitespace U\+0020"),
        ("xn--zz.com", r"IDNA: Invalid A-label"),
        (f"{LONG_LABEL}.com", r"64 characters, more than 63"),
        (LONG_NAME, r"255 characters, more than 253"),
    ],
)
def test_a_tranco_row_with_a_bad_domain_is_refused_naming_file_and_line(tmp_path, row, problem):
    path = tmp_path / "list.csv"
    path.write_text(f"1,a.com\n2,{row}\n3,c.com\n")
    with pytest.raises(HarnessError, match=rf"list.csv:2: not a domain name: .*{problem}") as error:
        load_tranco(path)
    one_line(error)


@pytest.mark.parametrize(
    "line, problem",
    [
        ("exa\x0cmple.com", r"control character U\+000C"),  # splitlines() would have split the line here
        ("example.com\x0b", r"control character U\+000B"),
        ("ex\u200bample.com", r"format character U\+200B"),
        ("Example.com", r"write it as example.com"),
        ("b\u00fccher.de", r"write it as xn--bcher-kva.de"),
        (f"{LONG_LABEL}.com", r"64 characters, more than 63"),
    ],
)
def test_a_plain_list_line_with_a_bad_domain_is_refused_naming_file_and_line(tmp_path, line, problem):
    path = tmp_path / "list.txt"
    path.write_text(f"a.com\r\n{line}  # a comment\nc.com\n")
    with pytest.raises(HarnessError, match=rf"list.txt:2: not a lower-case ASCII domain name: .*{problem}") as error:
        load_site_list(path, 1)
    one_line(error)


def test_a_plain_list_keeps_its_crlf_comments_and_blank_lines(tmp_path):
    path = tmp_path / "list.txt"
    path.write_text("# sites\r\na.com\r\n\r\n  b.com\t# second\r\n")
    assert [(s.domain, s.rank, s.group) for s in load_site_list(path, 1)] == [("a.com", 1, "top"), ("b.com", 2, "tail")]


# -- rank ranges and rounds -------------------------------------------------


def test_a_huge_rank_range_is_walked_over_the_list_not_the_range(tmp_path):
    text = GOOD.replace("ranks = [1, 4]", "ranks = [1, 1000000000000000000]\nevery = 500")
    text = text.split('[[sites.select]]\ngroup = "tail"')[0]  # one selection: the whole list
    loaded = load_study(str(write_study(tmp_path, text)))
    assert [s.rank for s in loaded.sites] == [1, 501, 99001, 99501]


def test_a_huge_rank_range_beyond_the_list_is_refused_naming_the_key(tmp_path):
    text = GOOD.replace("ranks = [1, 4]", "ranks = [100001, 1000000000000000000]")
    with pytest.raises(HarnessError, match=r"mini.toml:\d+: sites.select.0.ranks: the list .* has no site ranked "):
        load_study(str(write_study(tmp_path, text)))


def test_huge_rounds_are_refused_before_any_plan_exists(tmp_path):
    text = GOOD.replace("rounds = 2", "rounds = 1000000000000")
    with pytest.raises(HarnessError) as error:
        load_study(str(write_study(tmp_path, text)))
    assert one_line(error).endswith(
        f"mini.toml:6: rounds: Input should be less than or equal to {MAX_PLANNED_VISITS} (got 1000000000000)"
    )


def test_a_plan_over_the_maximum_is_refused_naming_rounds_and_the_product(tmp_path):
    text = GOOD.replace("rounds = 2", f"rounds = {MAX_PLANNED_VISITS}")
    with pytest.raises(HarnessError) as error:
        load_study(str(write_study(tmp_path, text)))
    assert one_line(error).endswith(
        f"mini.toml:6: rounds: {MAX_PLANNED_VISITS} rounds x 6 sites x 2 networks x 6 (resolver, protocol) pairs "
        f"plan {MAX_PLANNED_VISITS * 72:,} visits, more than the maximum {MAX_PLANNED_VISITS:,} a study may plan "
        "(split it into several studies)"
    )


# -- page-shape labels -------------------------------------------------------


@pytest.mark.parametrize(
    "label, message",
    [
        ('"cdn\\" IN A 192.0.2.1"', r"labels.0: not a DNS label: must be lower-case letters.* \(got 'cdn\" IN A"),
        ('"Cdn"', r"labels.0: not a DNS label: must be lower-case .*\(got 'Cdn'\)"),
        ('"a.b"', r"labels.0: not a DNS label: must be lower-case .*\(got 'a.b'\)"),
        ('"-x"', r"labels.0: not a DNS label: must be lower-case .*\(got '-x'\)"),
        ('"cdn\\n"', r"labels.0: not a DNS label: must be lower-case .*\(got 'cdn\\n'\)"),
        (f'"{LONG_LABEL}"', r"labels.0: not a DNS label: 64 characters, more than 63"),
        ('""', r"labels.0: not a DNS label: empty \(got ''\)"),
        ('"static"', r"labels: 'static' is listed twice"),
    ],
)
def test_a_bad_page_shape_label_is_refused_naming_file_line_and_key(tmp_path, label, message):
    text = (PROJECT_ROOT / "profiles" / "web" / "page-shape.toml").read_text()
    assert text.count('labels = ["cdn", "static"') == 1
    path = tmp_path / "shape.toml"
    path.write_text(text.replace('labels = ["cdn"', f"labels = [{label}, " + '"cdn"'))
    with pytest.raises(HarnessError, match=rf"shape.toml:\d+: third_party.{message}") as error:
        load_page_shape(str(path))
    one_line(error)


# -- resolvers ---------------------------------------------------------------

PROFILE = """description = "a resolver"
source = "the tests"
address = "{address}"
tls_name = "dns.example"
doh_uri = "{doh_uri}"
"""


@pytest.fixture
def resolver_dir(tmp_path, monkeypatch) -> Path:
    """An empty profiles/resolvers of the test's own."""
    directory = tmp_path / "resolvers"
    directory.mkdir()
    monkeypatch.setattr(resolvers, "RESOLVER_DIR", directory)
    return directory


@pytest.mark.parametrize(
    "address, doh_uri, message",
    [
        (
            "2606:4700:4700::1111",
            "https://dns.example/dns-query",
            r"v6.toml:3: address: IPv6 resolvers are not supported yet .*: give the resolver's IPv4 address "
            r"\(got '2606:4700:4700::1111'\)$",
        ),
        (
            "192.0.2.1",
            "https://[2606:4700:4700::1111]/dns-query",
            r"v6.toml:5: doh_uri: IPv6 resolvers are not supported yet .* \(got 'https://\[2606:4700:4700::1111\]",
        ),
        ("dns.example", "https://dns.example/", r"v6.toml:3: address: not an IP address.* \(got 'dns.example'\)$"),
    ],
)
def test_an_ipv6_resolver_profile_is_refused_in_one_line(resolver_dir, address, doh_uri, message):
    (resolver_dir / "v6.toml").write_text(PROFILE.format(address=address, doh_uri=doh_uri))
    with pytest.raises(HarnessError, match=message) as error:
        load_resolver("v6")
    one_line(error)


def test_a_study_naming_an_ipv6_resolver_fails_at_load_not_in_the_crawl(tmp_path, resolver_dir):
    (resolver_dir / "v6.toml").write_text(PROFILE.format(address="2001:db8::53", doh_uri="https://dns.example/"))
    text = GOOD.replace('target = "lab"', 'target = "internet"').replace('["near", "far"]', '["v6"]')
    with pytest.raises(HarnessError, match=r"mini.toml:\d+: resolvers: .*v6.toml:3: address: IPv6 resolvers") as e:
        load_study(str(write_study(tmp_path, text)))
    one_line(e)


@pytest.mark.parametrize(
    "nameserver, message",
    [
        ("2001:db8::53", r"resolv.conf: nameserver: IPv6 resolvers are not supported yet .*\(got '2001:db8::53'\)"),
        ("fe80::1%eth0", r"resolv.conf: nameserver: IPv6 resolvers are not supported yet"),
        ("dns.example", r"resolv.conf: nameserver: not an IP address \(got 'dns.example'\)"),
    ],
)
def test_an_ipv6_or_garbled_host_resolver_is_refused_in_one_line(tmp_path, nameserver, message):
    conf = tmp_path / "resolv.conf"
    conf.write_text(f"nameserver {nameserver}\nnameserver 192.0.2.53\n")
    with pytest.raises(HarnessError, match=message) as error:
        host_resolver(conf)
    one_line(error)
