"""Study files, Tranco lists and the schedule: validation with errors that name the file, line and key."""

from __future__ import annotations

import zipfile
from pathlib import Path

import pytest

from harness.errors import HarnessError
from harness.paths import PROJECT_ROOT
from harness.schedule import DAY_S, estimate, round_start
from harness.sitelist import fetch_tranco, load_site_list, load_tranco
from harness.study import load_study

GOOD = """
name = "mini"
description = "a small study"
target = "lab"
seed = 7
rounds = 2
networks = ["wired", "4g"]
resolvers = ["near", "far"]
protocols = ["do53", "dot", "doh"]

[sites]
list = "{list}"

[[sites.select]]
group = "top"
ranks = [1, 4]

[[sites.select]]
group = "tail"
ranks = [99001, 99010]
every = 5
"""


def write_study(tmp_path: Path, text: str, name: str = "mini.toml") -> Path:
    path = tmp_path / name
    path.write_text(text.replace("{list}", str(PROJECT_ROOT / "tranco" / "paper-2019.csv")))
    return path


def test_the_shipped_studies_load_with_the_reference_design():
    paper = load_study("paper-2019")
    assert paper.study.target == "internet" and paper.study.duration_days == 7
    assert [s.rank for s in paper.sites[:2]] == [1, 2] and paper.sites[1000].rank == 99001
    assert {s.group for s in paper.sites[:1000]} == {"top"} and {s.group for s in paper.sites[1000:]} == {"tail"}
    # Cloudflare, Google and Quad9 over three protocols, and the host's own resolver over Do53 only.
    assert len(paper.study.configurations) == 10 and ("default", "dot") not in paper.study.configurations
    assert paper.visit_count == 2000 * 4 * 10 == len(paper.plan())
    demo = load_study("lab-demo")
    assert set(demo.study.networks) == {"wired", "4g", "4g-lossy", "3g"} and len(demo.study.resolvers) >= 2
    assert set(demo.study.protocols) == {"do53", "dot", "doh", "doq"}  # the paper's three, and DoQ beyond it
    assert demo.visit_count == 128 and demo.study.browser_dns.endswith("dns-current.toml")
    # Reused, warm-started browsers (issue 41), both, each block's part of a browser after the other's.
    assert demo.study.browsers == ["firefox", "chromium"] and [s.rank for s in demo.sites] == [1, 99001]
    assert demo.study.browsers_apart
    assert (demo.study.browser_session, demo.study.resolver_connection) == ("reused", "cold")
    assert paper.study.browser_dns.endswith("dns-2019.toml")
    # The reference design: a new browser for every visit, its first query opening the resolver connection.
    assert (paper.study.browser_session, paper.study.resolver_connection) == ("fresh", "cold")
    assert paper.study.browser_settle_s == 0
    assert not paper.study.page_http3 and not demo.study.page_http3  # HTTP/2 over TCP for the page, as the paper


def test_the_paper_csv_is_the_lab_list_with_its_ranks():
    ranked = load_tranco(PROJECT_ROOT / "tranco" / "paper-2019.csv")
    plain = load_site_list(PROJECT_ROOT / "tranco" / "paper-2019-sites.txt", 1000)
    assert list(ranked.ranks.values()) == [s.domain for s in plain]
    assert (
        min(ranks := list(ranked.ranks)) == 1 and ranks[999] == 1000 and ranks[1000] == 99001 and max(ranks) == 100000
    )


def test_a_study_resolves_its_selections(tmp_path):
    loaded = load_study(str(write_study(tmp_path, GOOD)))
    assert [s.rank for s in loaded.sites] == [1, 2, 3, 4, 99001, 99006]
    assert loaded.visit_count == 6 * 2 * 2 * 6 == len(loaded.plan())
    assert loaded.plan() == loaded.plan()  # deterministic from the seed


@pytest.mark.parametrize(
    "change, message",
    [
        (("rounds = 2", "rounds = 2\ncolour = 1"), r"mini.toml:7: colour: unknown key"),
        (
            ('networks = ["wired", "4g"]', 'networks = ["wired", "5g"]'),
            r"mini.toml:\d+: networks: .*no network profile '5g'",
        ),
        (
            ('resolvers = ["near", "far"]', 'resolvers = ["near", "near"]'),
            r"mini.toml:\d+: resolvers: .*'near' is listed twice",
        ),
        (
            ('protocols = ["do53", "dot", "doh"]', 'protocols = ["do53", "dnscrypt"]'),
            r"mini.toml:\d+: protocols.1: .*no browser arm for protocol 'dnscrypt' \(have: do53, dot, doh",
        ),
        (("ranks = [1, 4]", "ranks = [4, 1]"), r"mini.toml:\d+: sites.select.0.ranks: .*first <= last"),
        (
            ("ranks = [1, 4]", "ranks = [200001, 200010]"),
            r"mini.toml:\d+: sites.select.0.ranks: the list .* has no site ranked 200001-200010",
        ),
        (
            ("ranks = [99001, 99010]", "ranks = [3, 10]"),
            r"mini.toml:\d+: sites.select.1.ranks: rank 3 is also in selection 0",
        ),
        (('target = "lab"', 'target = "internet"'), r"mini.toml:\d+: resolvers: no resolver profile 'near'"),
        (("seed = 7", 'seed = "seven"'), r"mini.toml:5: seed: Input should be a valid integer"),
        (
            ("[sites]\n", '[sites]\ntranco_id = "X5Y7N"\n'),
            r"mini.toml:\d+: sites: give exactly one of 'list' \(a file\) and 'tranco_id'$",
        ),
        (
            ("every = 5\n", 'every = 5\n[[faults]]\nname = "melt:dot"\nresolver = "near"\n'),
            r"mini.toml:\d+: faults.0.name: .*unknown lab fault 'melt:dot' \(have: drop:dot, ",
        ),
        (
            ("every = 5\n", 'every = 5\n[[faults]]\nname = "drop:dot"\nresolver = "elsewhere"\n'),
            r"mini.toml:\d+: faults: .*resolver 'elsewhere' is not one of the study's resolvers",
        ),
        (
            ("seed = 7\n", 'seed = 7\nbrowser_dns = "profiles/firefox/dns-1999.toml"\n'),
            r"mini.toml:\d+: browser_dns: .*no such file: profiles/firefox/dns-1999.toml",
        ),
        (("seed = 7\n", 'seed = 7\nbrowser_session = "shared"\n'), r"mini.toml:\d+: browser_session: .*'fresh'"),
        (("seed = 7\n", 'seed = 7\nresolver_connection = "hot"\n'), r"mini.toml:\d+: resolver_connection: .*'warm'"),
        (
            ("seed = 7\n", 'seed = 7\npage_http3 = "maybe"\n'),
            r"mini.toml:\d+: page_http3: Input should be a valid bool",
        ),
        (
            ("seed = 7\n", 'seed = 7\nbrowser_session = "reused"\nbrowser_settle_s = 3\n'),
            r"mini.toml:\d+: browser_settle_s: .*a reused browser does not settle",
        ),
        (
            ("seed = 7\n", "seed = 7\nbrowser_settle_s = -1\n"),
            r"mini.toml:\d+: browser_settle_s: Input should be greater than or equal to 0",
        ),
        (
            ("every = 5\n", "every = 5\n[browser_restart]\nvisits = -1\n"),
            r"mini.toml:\d+: browser_restart.visits: Input should be greater than or equal to 0",
        ),
    ],
)
def test_a_study_with_a_mistake_gets_one_line_naming_file_line_and_key(tmp_path, change, message):
    old, new = change
    path = write_study(tmp_path, GOOD.replace(old, new, 1))
    with pytest.raises(HarnessError, match=message) as error:
        load_study(str(path))
    assert "\n" not in str(error.value)


def test_a_missing_list_or_study_is_named(tmp_path):
    path = write_study(tmp_path, GOOD.replace("{list}", "/nonexistent/list.csv"))
    with pytest.raises(HarnessError, match=r"mini.toml:\d+: sites.list: no such file: /nonexistent/list.csv"):
        load_study(str(path))
    with pytest.raises(HarnessError, match="no study 'nosuch' .*lab-demo"):
        load_study("nosuch")


@pytest.mark.parametrize(
    "text, message",
    [
        ("1,a.com\n2,b.com,extra\n", r"list.csv:2: expected 'rank,domain', got 3 field"),
        ("1,a.com\nx,b.com\n", r"list.csv:2: rank must be a positive integer, got 'x'"),
        ("1,a.com\n3,b.com\n2,c.com\n", r"list.csv:3: rank 2 after rank 3: ranks must increase"),
        ("1,a.com\n2,b.com\n3,a.com\n", r"list.csv:3: a.com is already on line 1"),
        ("1,a.com\n2,not a domain\n", r"list.csv:2: not a domain name: 'not a domain'"),
        ("1,a.com\n2,xn--.com\n", r"list.csv:2: not a domain name"),
        ("", r"list.csv: the list has no rows"),
    ],
)
def test_a_malformed_tranco_list_is_refused_naming_the_line(tmp_path, text, message):
    path = tmp_path / "list.csv"
    path.write_text(text)
    with pytest.raises(HarnessError, match=message):
        load_tranco(path)


def test_tranco_lists_from_csv_and_zip_with_ids_and_idns(tmp_path):
    rows = "1,google.com\n2,Bücher.de\n3,EXAMPLE.org\n"
    path = tmp_path / "tranco_X5Y7N.csv"
    path.write_text("\ufeff" + rows)  # a byte-order mark, as spreadsheet exports write
    ranked = load_tranco(path)
    assert ranked.list_id == "X5Y7N"
    assert ranked.ranks == {1: "google.com", 2: "xn--bcher-kva.de", 3: "example.org"}
    assert ranked.converted_idns == ["Bücher.de -> xn--bcher-kva.de"]
    archive = tmp_path / "tranco_X5Y7N-1m.csv.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("top-1m.csv", rows)
    assert load_tranco(archive).ranks == ranked.ranks
    with pytest.raises(HarnessError, match="the file name says list X5Y7N, the study says AAAAA"):
        load_tranco(archive, "AAAAA")
    empty = tmp_path / "empty.zip"
    with zipfile.ZipFile(empty, "w") as z:
        z.writestr("readme.txt", "no csv")
    with pytest.raises(HarnessError, match="expected one CSV in the zip"):
        load_tranco(empty)
    (tmp_path / "latin1.csv").write_bytes("1,b\xfccher.de\n".encode("latin-1"))
    with pytest.raises(HarnessError, match="latin1.csv: not UTF-8"):
        load_tranco(tmp_path / "latin1.csv")


def test_a_tranco_id_is_read_from_the_cache_and_never_fetched_again(tmp_path):
    (tmp_path / "Q7K2P.csv").write_text("1,google.com\n2,facebook.com\n")
    assert fetch_tranco("Q7K2P", tmp_path) == tmp_path / "Q7K2P.csv"
    with pytest.raises(HarnessError, match="not a Tranco list ID"):
        fetch_tranco("../etc", tmp_path)
    # Not cached and no list by that ID reachable (offline here; unknown online): a clear error, no half file.
    with pytest.raises(HarnessError, match="cannot download Tranco list ZZZZ9"):
        fetch_tranco("ZZZZ9", tmp_path)
    assert not (tmp_path / "ZZZZ9.csv").exists()


def test_a_wall_clock_stepped_back_behind_the_first_start_holds_no_round_that_need_not_wait(tmp_path):
    # Found by the chaos run (benchmarks/chaos.py): the wall clock stepped back 564 s after the coordinator's
    # first start, and it queued nothing more, round 0 of a study without a duration "starting later".
    first_start, stepped_back = 1000.0, 1000.0 - 564
    spread = load_study(str(write_study(tmp_path, GOOD.replace("rounds = 2", "rounds = 4\nduration_days = 2"))))
    at_once = load_study(str(write_study(tmp_path, GOOD)))
    assert stepped_back >= round_start(spread, 0, first_start)
    assert all(stepped_back >= round_start(at_once, r, first_start) for r in range(2))
    assert stepped_back < round_start(spread, 1, first_start)  # a later round of a spread study still waits


def test_the_schedule_spreads_rounds_and_says_whether_the_plan_fits(tmp_path):
    text = GOOD.replace("rounds = 2", "rounds = 4\nduration_days = 2")
    loaded = load_study(str(write_study(tmp_path, text)))
    assert round_start(loaded, 0, 1000.0) == 0.0 and round_start(loaded, 3, 1000.0) == 1000.0 + 1.5 * DAY_S
    unknown = estimate(loaded, {"wired": [3.0]})
    assert unknown.fits is None and unknown.unmeasured == ["4g"] and "no measured visit time" in unknown.summary()
    per_network = len(loaded.sites) * 6  # visits per network per round
    fast = estimate(loaded, {"wired": [3.0, 3.0, 30.0], "4g": [4.0]})
    assert fast.seconds_per_visit == {"wired": 3.0, "4g": 4.0}
    assert fast.total_s == pytest.approx(4 * (per_network * 7.0 + 2 * (200 * 0.01 + 1.5 * 2.0 + 1)))
    assert fast.fits and "fits in the study's 2.0 days" in fast.summary()
    slow = estimate(loaded, {"wired": [3000.0], "4g": [4000.0]})
    assert slow.fits is False and "does NOT fit" in slow.summary()


def test_the_stub_idle_timeout_is_a_study_option_that_reaches_the_dot_arm(tmp_path):
    from pathlib import Path as P

    from harness.arms import ClientSide, Resolver, make_arm

    loaded = load_study(str(write_study(tmp_path, GOOD + "\n[arms]\nstub_idle_timeout_ms = 2500\n")))
    assert loaded.study.arms.stub_idle_timeout_ms == 2500
    assert load_study(str(write_study(tmp_path, GOOD, "plain.toml"))).study.arms.stub_idle_timeout_ms == 10_000
    resolver = Resolver("near", "198.18.1.53", "near.dns.lab.test", "https://near.dns.lab.test/dns-query")
    client = ClientSide("x-client", P("/run/dnsstudy/x"), P("/run/dnsstudy/x/ca.pem"), "198.18.1.60")
    arm = make_arm("dot", resolver, client, idle_timeout_ms=loaded.study.arms.stub_idle_timeout_ms)
    assert "idle_timeout: 2500" in arm.config() and arm.describe()["idle_timeout_ms"] == 2500  # type: ignore[attr-defined]


def test_a_lab_study_naming_a_site_the_lab_does_not_serve_is_refused_in_one_line(tmp_path):
    """The lab would answer NXDOMAIN for it: a DNS error that says nothing about the protocol."""
    from click.testing import CliRunner

    from harness.cli import main
    from harness.lab.config import load_lab_config
    from harness.lab.lab import Lab
    from harness.study import check_sites

    served = load_site_list(PROJECT_ROOT / "tranco" / "paper-2019-sites.txt", 1000)
    listing = tmp_path / "mixed.csv"
    foreign = ["not-in-the-lab.example", "nor-this.example"]
    domains = [served[0].domain, *foreign, served[1].domain, served[2].domain]
    listing.write_text("".join(f"{i},{d}\n" for i, d in enumerate(domains, 1)))
    text = GOOD.replace("{list}", str(listing)).replace("ranks = [99001, 99010]\nevery = 5", "ranks = [5, 5]")
    path = tmp_path / "foreign.toml"
    path.write_text(text)
    loaded = load_study(str(path))
    with pytest.raises(HarnessError) as error:
        check_sites(loaded, Lab(load_lab_config()))
    message = str(error.value)
    assert "\n" not in message and "does not serve 2 of the study's 5 sites" in message
    assert all(name in message for name in foreign) and message.startswith(f"{path}:")
    check_sites(load_study(str(write_study(tmp_path, GOOD))), Lab(load_lab_config()))  # the lab's own sites pass
    refused = CliRunner().invoke(main, ["study", "check", str(path)])
    assert refused.exit_code == 2 and "not-in-the-lab.example" in refused.output


def test_the_browsers_dns_profile_and_lab_faults_are_study_keys(tmp_path):
    text = GOOD.replace("seed = 7\n", 'seed = 7\nbrowser_dns = "profiles/firefox/dns-2019.toml"\n')
    text += '[[faults]]\nname = "drop:dot"\nresolver = "far"\n'
    study = load_study(str(write_study(tmp_path, text))).study
    assert study.browser_dns == "profiles/firefox/dns-2019.toml"
    assert [(f.name, f.resolver) for f in study.faults] == [("drop:dot", "far")]
    plain = load_study(str(write_study(tmp_path, GOOD, "plain.toml"))).study
    assert plain.browser_dns == "profiles/firefox/dns-current.toml" and plain.faults == []
    internet = text.replace('target = "lab"', 'target = "internet"').replace('["near", "far"]', '["cloudflare"]')
    with pytest.raises(HarnessError, match=r"net.toml:\d+: faults: .*only a lab study applies lab faults"):
        load_study(str(write_study(tmp_path, internet, "net.toml")))


@pytest.mark.parametrize(
    "header", ["rank,domain", "Rank,Domain", "RANK,DOMAIN", "\ufeffrank,domain", '"rank","domain"']
)
def test_a_tranco_list_with_a_header_line_is_read_without_it(tmp_path, header):
    path = tmp_path / "tranco_X5Y7N.csv"
    path.write_text(f"{header}\r\n1,google.com\r\n2,facebook.com\r\n", encoding="utf-8")
    assert load_tranco(path).ranks == {1: "google.com", 2: "facebook.com"}
    archive = tmp_path / "tranco_X5Y7N-1m.csv.zip"
    with zipfile.ZipFile(archive, "w") as z:
        z.writestr("top-1m.csv", f"{header}\n1,google.com\n2,facebook.com\n")
    assert load_tranco(archive).ranks == {1: "google.com", 2: "facebook.com"}


@pytest.mark.parametrize(
    "text, message",
    [
        # Only the first line may be the header, and only exactly `rank,domain`.
        ("1,a.com\nrank,domain\n2,b.com\n", r"list.csv:2: rank must be a positive integer, got 'rank'"),
        ("\nrank,domain\n1,a.com\n", r"list.csv:2: rank must be a positive integer, got 'rank'"),
        ("rank,site\n1,a.com\n", r"list.csv:1: rank must be a positive integer, got 'rank'"),
        ("rank,domain,extra\n1,a.com\n", r"list.csv:1: expected 'rank,domain', got 3 field"),
        ("rank , domain\n1,a.com\n", r"list.csv:1: rank must be a positive integer, got 'rank'"),
        ("rank,domain\n", r"list.csv: the list has no rows"),
        ("rank,domain\n1,a.com\nx,b.com\n", r"list.csv:3: rank must be a positive integer, got 'x'"),
    ],
)
def test_anything_but_a_first_header_line_is_still_refused_naming_the_line(tmp_path, text, message):
    path = tmp_path / "list.csv"
    path.write_text(text)
    with pytest.raises(HarnessError, match=message):
        load_tranco(path)
