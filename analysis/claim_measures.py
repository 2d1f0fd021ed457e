"""The store's figure for a claim: one reader per metric family, each with its interval, test and unit.

Every interval comes from the analysis's one bootstrap of units
(analysis/resampling.py): page-load metrics and shares of visits resample
sites, as the grids and success tables do; the timer's lookups resample
names; the resolver benchmarks' handshakes and queries are each their own
unit. A claim's p-value tests "the figure equals the claim's value" with the
test the grids use for that kind of figure (the sign test by site for
medians, the cluster-robust rate test for shares), so a source's claims can
be adjusted together (analysis/claims.py).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.claim_files import Claim, Conditions
from analysis.metrics import get_metric
from analysis.pairs import load_time_table, paired, site_codes, units
from analysis.power import PilotSpread
from analysis.resampling import draw_resamples
from analysis.results import Results
from analysis.settings import AnalysisSettings
from analysis.significance import rate_difference_test, rate_test
from analysis.stats import compare, rate_differences, rate_share
from analysis.tables import INFRASTRUCTURE

#: A claim's condition key -> the visits column it reads (the source's names mapped onto the store's first).
VISIT_COLUMNS = {"network": "network", "resolver": "resolver", "protocol": "protocol", "browser": "browser"}
#: The condition keys whose values a study maps (`[analysis] claims_map`, `--map`): the others are the tool's own.
#: A browser life is mapped too (the paper's "fresh" read as "reused warm-started"), never silently: the verdict
#: line shows it, so a claim about fresh browsers checked in running ones says so.
MAPPED = ("network", "resolver", "browser_life")


class NotMeasured(Exception):
    """The store (or the benchmark records given) lacks a condition the claim needs; the message names it."""


@dataclass(frozen=True)
class Estimate:
    """The store's figure for a claim, in the claim's unit, with its interval and the test of the claim's value."""

    value: float
    low: float
    high: float
    p_value: float | None
    units: int  # what the interval resampled: sites, names, connections, queries
    unit: str
    scale: str  # "pp", "ms"
    spread: PilotSpread | None = None  # a paired figure's differences: the power model plans from them
    pairs_per_site: int = 1


@dataclass
class Evidence:
    """What claims are checked against: the stores read, the bench records given, the mapping, the reading."""

    results: Results
    settings: AnalysisSettings
    mapping: dict[str, str] = field(default_factory=dict)  # the source's name -> the store's
    bench: Path | None = None  # a `dnsstudy bench --results` directory
    _tables: dict[tuple, Paired] = field(default_factory=dict)

    def name(self, key: str, value: str) -> str:
        """The store's name for a condition's value: mapped for networks, resolvers and browser lives, else as it is."""
        return self.mapping.get(value.lower(), value) if key in MAPPED else value

    def table(self, visits: pd.DataFrame, network: str, metric: str, key: tuple) -> Paired:
        """A metric's table of pairs on one network (analysis.pairs) with its rows' units, computed once for all
        the claims read against it."""
        if (network, metric, key) not in self._tables:
            table = load_time_table(visits, network, metric)
            self._tables[(network, metric, key)] = Paired(table, *site_codes(table))
        return self._tables[(network, metric, key)]


@dataclass(frozen=True)
class Paired:
    """A table of pairs, each row's unit (code) and each unit's stratum."""

    table: pd.DataFrame
    codes: np.ndarray
    strata: np.ndarray


def measure(claim: Claim, evidence: Evidence) -> Estimate:
    """The store's figure for ``claim``, or NotMeasured naming what is missing."""
    reader = READERS[claim.metric]
    return reader(claim, evidence)


def select(visits: pd.DataFrame, side: Conditions, evidence: Evidence) -> pd.DataFrame:
    """The visits under ``side``'s conditions; NotMeasured names the first condition no visit meets."""
    mask = np.ones(len(visits), dtype=bool)
    for key, column in [*VISIT_COLUMNS.items(), ("browser_life", "browser_session")]:
        wanted = getattr(side, key)
        if wanted is None:
            continue
        name = evidence.name(key, wanted)
        here = (visits[column] == name).to_numpy(dtype=bool)  # on the categories: a million visits in ms
        if not here.any():
            raise NotMeasured(_missing(key, wanted, name, visits[column]))
        mask &= here
    if not mask.any():
        raise NotMeasured(f"no visits under {_describe(side, evidence)} together")
    return visits[mask]


def _missing(key: str, wanted: str, name: str, column: pd.Series) -> str:
    """'no visits with resolver 'cloudflare' (mapped to 'far'); the store has near, far'."""
    mapped = f" (mapped to '{name}')" if name != wanted else " (not mapped)" if key in MAPPED else ""
    have = ", ".join(sorted(map(str, column.dropna().unique()))) or "none"  # unique first: a million categories
    return f"no visits with {key} '{wanted}'{mapped}; the store has {have}"


def _describe(side: Conditions, evidence: Evidence) -> str:
    return ", ".join(f"{k} {evidence.name(k, str(v))}" for k, v in side.model_dump(exclude_none=True).items())


def _paired_metric(claim: Claim, evidence: Evidence) -> Estimate:
    """Median of paired a - b differences of a page-load metric (sites resampled, the sign test by site), pooled
    over the resolvers both sides share when they name none."""
    a, b = claim.sides()
    assert b is not None
    visits = evidence.results.visits
    for side in (a, b):
        select(visits, side, evidence)  # names the missing condition
    if a.network is None or a.network != b.network:
        raise NotMeasured("a paired figure needs one network named for both sides")
    network = evidence.name("network", a.network)
    common = visits
    for key, column in (("browser", "browser"), ("browser_life", "browser_session")):
        if getattr(a, key) is not None and getattr(a, key) == getattr(b, key):
            common = common[(common[column] == evidence.name(key, getattr(a, key))).to_numpy(dtype=bool)]
    found = evidence.table(common, network, claim.metric, (a.browser, a.browser_life))
    chunks = []
    for left, right in _configuration_pairs(a, b, visits, evidence):
        d, mask = paired(found.table, left, right)
        chunks.append((d, found.codes[mask]))
    d = np.concatenate([c[0] for c in chunks])
    sites = np.concatenate([c[1] for c in chunks])
    if not len(d):
        raise NotMeasured(
            f"no {get_metric(claim.metric).short} pairs of {_describe(a, evidence)} with {_describe(b, evidence)}"
        )
    return _median_estimate(d, sites, found.strata, claim, evidence, "sites")


def _configuration_pairs(
    a: Conditions, b: Conditions, visits: pd.DataFrame, evidence: Evidence
) -> list[tuple[tuple[str, str], tuple[str, str]]]:
    """The (resolver, protocol) of a against b: one pair when both name their resolver, else one per resolver
    of the store (the same resolver on both sides, its protocols compared)."""
    if a.protocol is None or b.protocol is None:
        raise NotMeasured("a paired figure needs a protocol named for both sides")
    if a.resolver and b.resolver:
        return [
            (
                (evidence.name("resolver", a.resolver), a.protocol),
                (evidence.name("resolver", b.resolver), b.protocol),
            )
        ]
    resolvers = sorted(map(str, visits["resolver"].dropna().unique()))
    return [((r, a.protocol), (r, b.protocol)) for r in resolvers]


def _median_estimate(
    d: np.ndarray, sites: np.ndarray, strata: np.ndarray | None, claim: Claim, evidence: Evidence, unit: str
) -> Estimate:
    """The median of ``d`` and its interval from resampling ``sites`` (within ``strata``), tested against the
    claim's value (the sign test of d - value by site)."""
    reading = evidence.settings.reading()
    codes, sites = np.unique(sites, return_inverse=True)
    strata = np.zeros(len(codes), dtype=int) if strata is None else np.asarray(strata)[codes]
    resamples = draw_resamples(strata, reading.resamples, reading.seed)
    st = compare(d - claim.value, reading, sites, resamples)
    n_units = int(len(codes))
    assert st.median_ms is not None  # d has a pair at least
    share = evidence.settings.power.default.site_share if evidence.settings.power else 0.5
    # Too few pairs for an interval (the profile's min_pairs, two sites): an unbounded one, which decides nothing.
    low, high = -math.inf, math.inf
    if st.ci_low_ms is not None and st.ci_high_ms is not None:
        low, high = st.ci_low_ms, st.ci_high_ms
    return Estimate(
        value=st.median_ms + claim.value,
        low=low + claim.value,
        high=high + claim.value,
        p_value=st.p_value,
        units=n_units,
        unit=unit,
        scale="ms",
        spread=PilotSpread.of(d, sites, share, "the store's own pairs"),
        pairs_per_site=max(1, round(len(d) / n_units)),
    )


def _shares(claim: Claim, evidence: Evidence) -> Estimate:
    """A share of counted visits (Successful, or one error class), of a or of a - b, sites resampled."""
    visits = evidence.results.visits
    counted = visits[visits["error_class"].astype(str) != INFRASTRUCTURE]
    sides = [select(counted, side, evidence) for side in claim.sides()]
    frames, hits = [], []
    for which, (side, rows) in enumerate(zip(claim.sides(), sides, strict=True)):
        wanted = "Successful" if claim.metric == "success_share" else side.error_class
        frames.append(rows.assign(_side=which))
        hits.append((rows["error_class"].astype(str) == wanted).to_numpy(dtype=float))
    both = pd.concat(frames, ignore_index=True)
    codes, strata = units(both)
    return _share_estimate(np.concatenate(hits), both["_side"].to_numpy(), codes, strata, claim, evidence, "sites")


def _share_estimate(
    hit: np.ndarray,
    side: np.ndarray,
    codes: np.ndarray,
    strata: np.ndarray,
    claim: Claim,
    evidence: Evidence,
    unit: str,
) -> Estimate:
    """A share (of side 0), or the difference of two (side 0 - side 1), in percentage points, from rows that each
    hit or not and belong to a unit (``codes``, resampled within ``strata``)."""
    reading = evidence.settings.reading()
    n_units = int(codes.max()) + 1 if len(codes) else 0
    k = 2 if claim.b is not None else 1
    flat = codes * k + side
    successes = np.bincount(flat, weights=hit, minlength=n_units * k).reshape(n_units, k)
    tallies = np.bincount(flat, minlength=n_units * k).astype(float).reshape(n_units, k)
    resamples = draw_resamples(strata, reading.resamples, reading.seed)
    target = claim.value / 100
    if k == 2:
        d, low, high = rate_differences(successes, tallies, [(0, 1)], resamples, reading)[0]
        p = rate_difference_test(successes[:, 0], tallies[:, 0], successes[:, 1], tallies[:, 1], target)
    else:
        d, low, high = rate_share(successes[:, 0], tallies[:, 0], resamples, reading)
        p = rate_test(successes[:, 0], tallies[:, 0], target)
    if math.isnan(low):
        raise NotMeasured(f"too few {unit} for an interval ({n_units})")
    used = int(np.count_nonzero(tallies.sum(axis=1)))
    return Estimate(100 * d, 100 * low, 100 * high, p, used, unit, "pp")


def _resolution_time(claim: Claim, evidence: Evidence) -> Estimate:
    """The timer's answered lookups paired by name (each name's median under a minus under b): names resampled,
    the sign test by name."""
    timings = evidence.results.timings
    if timings.empty:
        raise NotMeasured("the store has no timer records")
    a, b = claim.sides()
    assert b is not None
    durations = []
    for side in (a, b):
        rows = timings[timings["status"].astype(str) == "ok"]
        for key in ("network", "resolver", "protocol"):
            wanted = getattr(side, key)
            if wanted is not None:
                name = evidence.name(key, wanted)
                here = rows[rows[key].astype(str) == name]
                if here.empty:
                    raise NotMeasured(_missing(key, wanted, name, timings[key]).replace("visits", "timer records"))
                rows = here
        durations.append(rows.groupby(rows["name"].astype(str))["duration_us"].median() / 1000)
    joined = pd.concat(durations, axis=1, join="inner").dropna()
    if joined.empty:
        raise NotMeasured("no name was timed under both sides")
    d = (joined.iloc[:, 0] - joined.iloc[:, 1]).to_numpy(dtype=float)
    return _median_estimate(d, np.arange(len(d)), None, claim, evidence, "names")


def _bench_rows(evidence: Evidence, name: str) -> list[dict]:
    """The rows of a resolver benchmark's table (`dnsstudy bench` writes <name>.json in its --results directory)."""
    if evidence.bench is None:
        raise NotMeasured(f"no resolver benchmark records given (the {name} bench's table: --bench DIR)")
    path = evidence.bench / f"{name}.json"
    try:
        return list(json.loads(path.read_text(encoding="utf-8"))["rows"])
    except OSError:
        raise NotMeasured(f"no {path} (run `dnsstudy bench {name.split('_')[0]}`)") from None
    except (ValueError, KeyError, TypeError) as exc:
        raise NotMeasured(f"{path}: not a bench table ({exc})") from None


def _bench_share(claim: Claim, evidence: Evidence, rows_of, unit: str) -> Estimate:
    """A share over a benchmark's units (each its own), of a or of a - b: ``rows_of(side)`` gives its 0/1 hits."""
    hits = [rows_of(side) for side in claim.sides()]
    hit = np.concatenate(hits)
    side = np.concatenate([np.full(len(h), i) for i, h in enumerate(hits)])
    codes = np.arange(len(hit))
    return _share_estimate(hit, side, codes, np.zeros(len(hit), dtype=int), claim, evidence, unit)


def _handshakes(claim: Claim, evidence: Evidence) -> Estimate:
    """The share of new connections whose handshake took more than ``above_rtt`` RTTs (`bench handshake`)."""
    rows = _bench_rows(evidence, "handshake")
    threshold = claim.above_rtt or 0.0

    def hits(side: Conditions) -> np.ndarray:
        mine = [r for r in rows if r.get("protocol") == side.protocol]
        ratios = [float(x) for r in mine for x in r.get("ratio_cdf") or []]
        if not ratios:
            raise NotMeasured(f"no {side.protocol} handshakes in {evidence.bench}/handshake.json")
        return (np.asarray(ratios) > threshold).astype(float)

    return _bench_share(claim, evidence, hits, "connections")


def _loss_success(claim: Claim, evidence: Evidence) -> Estimate:
    """The share of queries answered at one loss level (`bench loss`), each query a unit."""
    rows = _bench_rows(evidence, "loss_sweep")

    def hits(side: Conditions) -> np.ndarray:
        mine = [r for r in rows if r.get("protocol") == side.protocol and r.get("loss_percent") == side.loss_percent]
        if not mine or not mine[0].get("queries"):
            raise NotMeasured(
                f"no {side.protocol} queries at {side.loss_percent:g} % loss in {evidence.bench}/loss_sweep.json"
            )
        queries = int(mine[0]["queries"])
        answered = round(float(mine[0]["success_rate"] or 0) * queries)
        return np.r_[np.ones(answered), np.zeros(queries - answered)]

    return _bench_share(claim, evidence, hits, "queries")


def _bytes(claim: Claim, evidence: Evidence) -> Estimate:
    raise NotMeasured(
        "bytes on the wire: no store or benchmark record measures them (the report's byte cost is the model "
        "of profiles/analysis/byte-cost.toml, not a measurement)"
    )


READERS = {
    "success_share": _shares,
    "error_share": _shares,
    "onload": _paired_metric,
    "fcp": _paired_metric,
    "resolution_time": _resolution_time,
    "handshake_rtt": _handshakes,
    "loss_success": _loss_success,
    "bytes": _bytes,
}
