"""Prior studies' claims against synthetic stores whose truth is known (analysis/claims.py; fast, no lab)."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner
from scipy import stats

from analysis.claim_files import CLAIMS_DIR, REFERENCE, available, load_source, load_sources
from analysis.claim_measures import Evidence
from analysis.claims import CONTRADICTED, HOLDS, INCONCLUSIVE, NOT_MEASURED, check_claims, check_source
from analysis.results import load
from analysis.settings import load_settings
from analysis.stats import compare
from harness.cli import main
from tests.synthetic import make_store, ok

FIREFOX = 'browser = "firefox", browser_life = "fresh"'


def _source(tmp_path: Path, body: str, name: str = "test-source") -> Path:
    """A claim file of one or more claims (``body``: their TOML)."""
    path = tmp_path / f"{name}.toml"
    path.write_text(f'source = "A test study"\n{body}')
    return path


def _claim(claim_id: str, metric: str, expect: str, a: str, b: str | None, conditions: str, extra: str = "") -> str:
    side_b = f"b = {{ {b} }}\n" if b else ""
    return (
        f'[[claims]]\nid = "{claim_id}"\ncitation = "Table 9"\nstatement = "words"\nfigure = "+1"\n'
        f'metric = "{metric}"\nconditions = {{ {conditions} }}\na = {{ {a} }}\n{side_b}expect = "{expect}"\n'
        f"min_sample = 20\n{extra}"
    )


def _check(store: Path, source: Path, mapping: dict[str, str] | None = None, bench: Path | None = None):
    loaded = load_source(source)
    return check_claims(load(store), load_settings(), [loaded], mapping, bench).verdicts


def _store(tmp_path: Path, doh_extra_ms: float, doh_failures: int, sites: int = 40, rounds: int = 2) -> Path:
    """Sites on 3G through resolver "far": DoH's onLoad ``doh_extra_ms`` above Do53's (plus noise), and DoH
    failing with a DNS error at ``doh_failures`` of every 10 site-rounds."""
    rng = np.random.default_rng(5)
    base = rng.lognormal(7, 0.5, sites)
    noise = rng.normal(0, 20, (sites, rounds, 2))

    def outcome(network, round_, site, resolver, protocol):
        if protocol == "doh" and (site + round_) % 10 < doh_failures:
            return "DNS Error", None, "DNS Error"
        side = 1 if protocol == "doh" else 0
        return ok(base[site] + doh_extra_ms * side + noise[site, round_, side])

    path = tmp_path / f"store-{doh_extra_ms:g}-{doh_failures}.sqlite"
    return make_store(path, outcome, sites, rounds, ("3g",), (("far", "do53"), ("far", "doh")))


SUCCESS = _claim(
    "do53-more-success",
    "success_share",
    "greater",
    'protocol = "do53"',
    'protocol = "doh"',
    f'network = "3g", resolver = "cloudflare", {FIREFOX}',
)
ONLOAD = _claim(
    "doh-slower",
    "onload",
    "greater",
    'protocol = "doh"',
    'protocol = "do53"',
    f'network = "3g", resolver = "cloudflare", {FIREFOX}',
)
SAME = _claim(
    "doh-same",
    "onload",
    "within",
    'protocol = "doh"',
    'protocol = "do53"',
    f'network = "3g", resolver = "cloudflare", {FIREFOX}',
    "tolerance = 30\n",
)


def test_every_claim_file_loads_and_the_reference_study_comes_first():
    sources = load_sources()
    assert [s.name for s in sources][0] == REFERENCE == available()[0]
    assert {s.name for s in sources} == {"hounsel-2019", "tum-doq-2022", "tehran-loss", "kosek-2022", "sengupta-2023"}
    assert all(c.citation and c.figure and c.statement for s in sources for c in s.claims)


def test_a_store_built_for_the_claims_says_they_hold_with_the_mapping_shown(tmp_path):
    store = _store(tmp_path, doh_extra_ms=300, doh_failures=5)
    verdicts = _check(store, _source(tmp_path, SUCCESS + ONLOAD), {"cloudflare": "far"})
    assert [v.verdict for v in verdicts] == [HOLDS, HOLDS]
    assert verdicts[0].estimate.value == pytest.approx(50.0)  # Do53 all Successful, DoH half
    assert verdicts[1].estimate.low > 250 and verdicts[1].estimate.high < 350
    assert verdicts[0].estimate.units == 40 and verdicts[0].estimate.unit == "sites"
    assert "cloudflare=far" in verdicts[1].line() and "3g (as named)" in verdicts[1].line()
    assert verdicts[0].family == 2 and verdicts[0].adjustment == "holm"


def test_a_store_built_against_the_claims_says_contradicted(tmp_path):
    store = _store(tmp_path, doh_extra_ms=-300, doh_failures=5)
    flipped = SUCCESS.replace('"greater"', '"less"')  # "Do53 has fewer successes than DoH"
    verdicts = _check(store, _source(tmp_path, flipped + ONLOAD + SAME), {"cloudflare": "far"})
    assert [v.verdict for v in verdicts] == [CONTRADICTED, CONTRADICTED, CONTRADICTED]
    assert verdicts[0].estimate.low > 0
    assert verdicts[1].estimate.high < 0


def test_indistinguishable_holds_only_when_the_interval_lies_within_the_tolerance(tmp_path):
    store = _store(tmp_path, doh_extra_ms=0, doh_failures=0)
    verdict = _check(store, _source(tmp_path, SAME), {"cloudflare": "far"})[0]
    assert verdict.verdict == HOLDS
    assert -30 <= verdict.estimate.low and verdict.estimate.high <= 30


def test_a_missing_condition_is_not_measured_and_named(tmp_path):
    store = _store(tmp_path, doh_extra_ms=300, doh_failures=5)
    bytes_claim = _claim("bytes", "bytes", "less", 'protocol = "dot"', 'protocol = "do53"', "")
    verdicts = _check(store, _source(tmp_path, SUCCESS + bytes_claim))  # cloudflare not mapped
    assert [v.verdict for v in verdicts] == [NOT_MEASURED, NOT_MEASURED]
    assert verdicts[0].missing == "no visits with resolver 'cloudflare' (not mapped); the store has far"
    assert "bytes on the wire" in verdicts[1].missing
    mapped = _check(store, _source(tmp_path, SUCCESS), {"cloudflare": "near"})[0]
    assert mapped.missing == "no visits with resolver 'cloudflare' (mapped to 'near'); the store has far"
    quic = _claim("doq", "onload", "less", 'protocol = "doq"', 'protocol = "doh"', 'network = "3g"')
    assert _check(store, _source(tmp_path, quic))[0].missing.startswith("no visits with protocol 'doq'")


def test_benchmark_claims_read_the_bench_tables_and_are_not_measured_without_them(tmp_path):
    store = _store(tmp_path, doh_extra_ms=0, doh_failures=0)
    bench = tmp_path / "bench"
    bench.mkdir()
    quic = [1.05] * 20 + [2.1] * 40  # a third in about one RTT
    rows = [{"protocol": "doq", "ratio_cdf": quic}, {"protocol": "dot", "ratio_cdf": [2.0] * 60}]
    (bench / "handshake.json").write_text(json.dumps({"rows": rows, "notes": []}))
    loss = [
        {"loss_percent": 20, "protocol": "doq", "queries": 200, "success_rate": 0.985},
        {"loss_percent": 20, "protocol": "do53", "queries": 200, "success_rate": 0.738},
    ]
    (bench / "loss_sweep.json").write_text(json.dumps({"rows": loss, "notes": []}))
    claims = (
        _claim("fewer", "handshake_rtt", "less", 'protocol = "doq"', 'protocol = "dot"', "", "above_rtt = 1.5\n")
        + _claim("extra", "handshake_rtt", "greater", 'protocol = "doq"', None, "", "above_rtt = 1.5\n")
        + _claim("loss", "loss_success", "greater", 'protocol = "doq"', 'protocol = "do53"', "loss_percent = 20")
    )
    verdicts = _check(store, _source(tmp_path, claims), bench=bench)
    assert [v.verdict for v in verdicts] == [HOLDS, HOLDS, HOLDS]
    assert verdicts[0].estimate.value == pytest.approx(100 * (40 / 60 - 1))
    assert verdicts[1].estimate.value == pytest.approx(100 * 40 / 60) and verdicts[1].estimate.unit == "connections"
    assert verdicts[2].estimate.value == pytest.approx(100 * (197 - 148) / 200)
    missing = _check(store, _source(tmp_path, claims))
    assert {v.verdict for v in missing} == {NOT_MEASURED} and "--bench DIR" in missing[0].missing


def test_resolution_time_claims_pair_the_timers_lookups_by_name(tmp_path):
    durations = {("3g", "far", "do53"): [150_000 + 100 * i for i in range(30)]}
    durations[("3g", "far", "dot")] = [470_000 + 100 * i for i in range(30)]
    store = make_store(tmp_path / "t.sqlite", lambda *k: ok(1000), 4, timings=durations, networks=("3g",))
    claim = _claim(
        "slower",
        "resolution_time",
        "greater",
        'protocol = "dot"',
        'protocol = "do53"',
        'network = "3g", resolver = "cloudflare"',
    )
    verdict = _check(store, _source(tmp_path, claim), {"cloudflare": "far"})[0]
    assert verdict.verdict == HOLDS and verdict.estimate.value == pytest.approx(320.0)
    assert verdict.estimate.units == 30 and verdict.estimate.unit == "names"


def _paired_store(tmp_path: Path, differences: np.ndarray) -> Path:
    """One round per site on 3G: DoH's onLoad minus Do53's at site i is ``differences[i]`` exactly."""

    def outcome(network, round_, site, resolver, protocol):
        return ok(1000 + (differences[site] if protocol == "doh" else 0.0))

    return make_store(tmp_path / "p.sqlite", outcome, len(differences), 1, ("3g",), (("far", "do53"), ("far", "doh")))


def _simulated_sites(pilot: np.ndarray, settings, seed: int = 11, replicates: int = 150) -> int:
    """The fewest sites at which a store drawn from ``pilot`` (each site one of its pairs) says "holds" for a
    claim of a positive median 80 % of the time, by the claims' own rule: the interval above zero and the
    sign test below 0.05 (a family of one)."""
    reading = replace(settings.reading(), resamples=200)
    rng = np.random.default_rng(seed)

    def power(n: int) -> float:
        held = 0
        for _ in range(replicates):
            st = compare(rng.choice(pilot, n), reading)
            held += bool(st.ci_low_ms is not None and st.ci_low_ms > 0 and (st.p_value or 1) < 0.05)
        return held / replicates

    low, high = 20, 320
    while high - low > max(2, low // 20):
        middle = (low + high) // 2
        low, high = (low, middle) if power(middle) >= 0.8 else (middle, high)
    return high


def test_a_store_too_small_is_inconclusive_with_the_sample_simulation_finds(tmp_path):
    # 30 sites whose DoH - Do53 differences are the normal's quantiles, median 40 ms, sd 100 ms: the sign test
    # needs about 90 sites; 30 leave the interval across zero.
    differences = 40 + 100 * stats.norm.ppf((np.arange(30) + 0.5) / 30)
    store = _paired_store(tmp_path, differences)
    verdict = _check(store, _source(tmp_path, ONLOAD), {"cloudflare": "far"})[0]
    assert verdict.verdict == INCONCLUSIVE and verdict.estimate.low < 0 < verdict.estimate.high
    simulated = _simulated_sites(differences, load_settings())
    assert verdict.needed is not None
    assert abs(verdict.needed - simulated) <= 0.3 * simulated, (verdict.needed, simulated)


def test_fewer_units_than_the_claim_needs_is_inconclusive_even_with_a_clear_interval(tmp_path):
    store = _paired_store(tmp_path, np.full(12, 300.0) + np.arange(12))
    verdict = _check(store, _source(tmp_path, ONLOAD), {"cloudflare": "far"})[0]
    assert verdict.estimate.low > 0
    assert verdict.verdict == INCONCLUSIVE and verdict.needed >= 20 and "the claim needs 20" in verdict.why


def test_a_sources_claims_are_holm_adjusted_together(tmp_path):
    store = _store(tmp_path, doh_extra_ms=300, doh_failures=5)
    source = load_source(_source(tmp_path, SUCCESS + ONLOAD + SAME))
    evidence = Evidence(load(store), load_settings(), {"cloudflare": "far"})
    verdicts = check_source(source, evidence, "holm", 0.95)
    raw = [v.estimate.p_value if v.estimate else None for v in verdicts]
    assert None not in raw
    order = np.argsort(np.array(raw, dtype=float))
    expected = np.maximum.accumulate([(3 - i) * raw[j] for i, j in enumerate(order)])
    assert [verdicts[j].p_adjusted for j in order] == pytest.approx(np.minimum(expected, 1.0).tolist())


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (SUCCESS.replace('statement = "words"\n', ""), "claim 'do53-more-success': statement: Field required"),
        (SUCCESS.replace('"success_share"', '"joy"'), "claim 'do53-more-success': metric: Input should be"),
        (SAME.replace("tolerance = 30\n", ""), "claim 'doh-same': tolerance: 'within' needs the source's tolerance"),
        (SUCCESS.replace("network =", "netwrk ="), "claim 'do53-more-success': conditions.netwrk: Extra inputs"),
        (SUCCESS.replace("min_sample = 20", "min_sample = 1"), "claim 'do53-more-success': min_sample: Input should"),
        (SUCCESS + SUCCESS, "claim 'do53-more-success': id: named twice in the file"),
        (ONLOAD.replace('b = { protocol = "do53" }\n', ""), "claim 'doh-slower': b: onload is a paired difference"),
        (SUCCESS.replace("[[claims]]", "[[claims]\n"), "invalid TOML"),
    ],
)
def test_a_bad_claim_file_is_one_line_naming_the_file_the_claim_and_the_key(tmp_path, body, message):
    path = _source(tmp_path, body)
    with pytest.raises(ValueError) as caught:
        load_source(path)
    text = str(caught.value)
    assert text.startswith(f"{path}: ") and message in text and "\n" not in text


def test_an_unknown_source_names_the_known_ones():
    with pytest.raises(ValueError, match="no claim file for source 'nobody' .*have: hounsel-2019"):
        load_sources(["nobody"])


def test_the_command_prints_each_verdict_line_with_its_mapping_and_refuses_a_bad_map(tmp_path):
    store = _store(tmp_path, doh_extra_ms=300, doh_failures=5)
    runner = CliRunner()
    done = runner.invoke(main, ["claims", str(store), "--source", "hounsel-2019", "--map", "cloudflare=far"])
    assert done.exit_code == 0, done.output
    line = next(x for x in done.output.splitlines() if "3g-success-do53-over-doh" in x)
    assert "HOLDS" in line and "cloudflare=far" in line and "source: +4.84 pp" in line
    assert "not measured" in done.output.splitlines()[-1]
    bad = runner.invoke(main, ["claims", str(store), "--map", "cloudflare"])
    assert bad.exit_code != 0 and "--map 'cloudflare': expected NAME=STORE_NAME" in bad.output


def test_the_demo_study_maps_cloudflare_and_its_report_shows_the_reference_claims(tmp_path):
    from analysis.report import analyze
    from harness.study import load_study

    record = load_study("lab-demo").record()
    assert record["study"]["analysis"]["claims_map"]["cloudflare"] == "far"
    store = make_store(
        tmp_path / "demo.sqlite",
        lambda *k: ok(1000),
        2,
        1,
        ("3g",),
        (("far", "do53"), ("far", "doh")),
        config=record,
        browser_life="reused warm-started",  # the demo's browsers
    )
    report = analyze([store], tmp_path / "out")
    page = report.html.read_text()
    assert "Claims of prior studies" in page
    for claim in load_source(CLAIMS_DIR / f"{REFERENCE}.toml").claims:
        assert claim.id in page
    assert "cloudflare=far" in page and "INCONCLUSIVE" in page  # two sites decide nothing
    assert "fresh=reused warm-started" in page  # the paper's fresh browser read as the demo's, and said
    assert (tmp_path / "out" / "tables" / f"claims-{REFERENCE}.csv").exists()


def test_a_study_maps_claim_names_only_onto_its_own_resolvers_and_networks(tmp_path):
    from harness.errors import HarnessError
    from harness.study import load_study

    text = (Path(__file__).parent.parent / "profiles" / "studies" / "lab-demo.toml").read_text()
    path = tmp_path / "mapped.toml"
    path.write_text(text.replace('cloudflare = "far"', 'cloudflare = "cloudflare"'))
    with pytest.raises(HarnessError, match="claims_map.cloudflare: 'cloudflare' is none of the study's resolvers"):
        load_study(str(path))
    # a browser life only as the study's visits will record it: the demo's browsers are reused, not fresh
    path.write_text(text.replace('fresh = "reused warm-started"', 'fresh = "fresh"'))
    with pytest.raises(HarnessError, match="claims_map.fresh: 'fresh' is none of the study's resolvers or networks"):
        load_study(str(path))
