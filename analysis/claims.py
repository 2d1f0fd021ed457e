"""Prior studies' claims checked against stores: per claim the source's figure, the store's, and a verdict.

A verdict reads the store's interval (analysis/claim_measures.py) against
the region the claim says the figure lies in (analysis/claim_files.py):

- holds: the interval lies inside the region and, for a direction (greater,
  less), the claim's test rejects "no difference" after the source's claims
  are adjusted together;
- contradicted: the interval lies wholly outside the region and the
  adjusted test rejects the claim's value;
- inconclusive: neither, or fewer units than the claim needs; with the units
  a decision would need at the store's own estimate (the power model of
  analysis/power.py for medians, the normal approximation for shares);
- not measured: the store lacks a condition, named.

A source's claims are one family, adjusted together as a grid's cells are
(Holm unless the study chose otherwise: analysis/methods.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd
from scipy import stats

from analysis.claim_files import Claim, ClaimSource
from analysis.claim_measures import MAPPED, Estimate, Evidence, NotMeasured, measure
from analysis.methods import choose_adjustment
from analysis.power import Plan, sites_needed
from analysis.results import Results
from analysis.settings import AnalysisSettings
from analysis.significance import adjust

HOLDS, CONTRADICTED, INCONCLUSIVE, NOT_MEASURED = "holds", "contradicted", "inconclusive", "not measured"
#: The most units a needed sample is looked for up to (beyond: "no feasible sample").
MOST_UNITS = 10**7


@dataclass(frozen=True)
class Verdict:
    """One claim read against the stores: what was measured, kept apart from what was concluded."""

    source: str
    claim: Claim
    mapping: list[str]  # "cloudflare=far": the source's names this claim used, as the store names them
    estimate: Estimate | None = None
    missing: str = ""  # why not measured
    p_adjusted: float | None = None
    adjustment: str = ""
    family: int = 0
    verdict: str = NOT_MEASURED
    needed: int | None = None  # inconclusive: the units a decision would need (None: no feasible number)
    why: str = ""  # what the verdict rests on, in a few words

    def line(self) -> str:
        """The verdict line: claim, verdict, the source's figure, the store's, the mapping."""
        head = f"{self.claim.id}: {self.verdict.upper()}"
        source = f"source: {self.claim.figure} ({self.claim.citation})"
        mapped = f"mapping {', '.join(self.mapping)}" if self.mapping else "no names mapped"
        if self.estimate is None:
            return f"{head} ({self.missing}); {source}; {mapped}"
        e = self.estimate
        interval = f"[{e.low:+.2f}, {e.high:+.2f}]" if math.isfinite(e.low + e.high) else "[too few for an interval]"
        store = (
            f"store: {e.value:+.2f} {e.scale} {interval} at {e.units:,} {e.unit}, "
            f"p {_p(e.p_value)}, {self.adjustment}-adjusted {_p(self.p_adjusted)} over {self.family}"
        )
        return f"{head} ({self.why}); {source}; {store}; {mapped}"


def _p(value: float | None) -> str:
    return "-" if value is None else f"{value:.2g}"


def region(claim: Claim) -> tuple[float, float]:
    """The claim's region for the figure, as (low, high); open ends for greater and less."""
    v, t = claim.value, claim.tolerance
    return {
        "greater": (v, math.inf),
        "less": (-math.inf, v),
        "within": (v - t, v + t),
        "at_most": (-math.inf, v + t),
        "at_least": (v - t, math.inf),
    }[claim.expect]


def check_source(source: ClaimSource, evidence: Evidence, adjustment: str, confidence: float) -> list[Verdict]:
    """Every claim of ``source`` against the evidence, their tests adjusted together (``adjustment``)."""
    measured: list[Verdict] = []
    for claim in source.claims:
        mapping = _mapping_of(claim, evidence)
        try:
            measured.append(Verdict(source.name, claim, mapping, estimate=measure(claim, evidence)))
        except NotMeasured as exc:
            measured.append(Verdict(source.name, claim, mapping, missing=str(exc)))
    p_values = [v.estimate.p_value if v.estimate else None for v in measured]
    adjusted = adjust(p_values, adjustment)
    family = sum(p is not None for p in adjusted)
    return [
        _decide(replace(v, p_adjusted=p, adjustment=adjustment, family=family), evidence, confidence)
        if v.estimate
        else v
        for v, p in zip(measured, adjusted, strict=True)
    ]


def _mapping_of(claim: Claim, evidence: Evidence) -> list[str]:
    """The source's names of networks, resolvers and browser lives the claim uses: "cloudflare=far" where a study or the
    command line maps it, "3g (as named)" where the stores are read under the source's own name."""
    names = dict.fromkeys(
        f"{value}={evidence.mapping[value.lower()]}" if value.lower() in evidence.mapping else f"{value} (as named)"
        for side in claim.sides()
        for key in MAPPED
        if (value := getattr(side, key)) is not None
    )
    return list(names)


def _decide(v: Verdict, evidence: Evidence, confidence: float) -> Verdict:
    """The verdict of a measured claim from its interval, its adjusted p-value and its sample."""
    e, claim = v.estimate, v.claim
    assert e is not None
    low, high = region(claim)
    alpha = 1 - confidence
    rejects = v.p_adjusted is not None and v.p_adjusted < alpha
    inside = low <= e.low and e.high <= high and (claim.expect not in ("greater", "less") or rejects)
    outside = (e.high < low or e.low > high) and rejects
    if e.units < claim.min_sample:
        needed = max(claim.min_sample, _needed(v, evidence, confidence) or claim.min_sample)
        return replace(
            v,
            verdict=INCONCLUSIVE,
            needed=needed,
            why=f"{e.units} {e.unit}, the claim needs {claim.min_sample}; a decision needs about {needed:,}",
        )
    if inside:
        return replace(v, verdict=HOLDS, why=f"interval inside {_region_text(claim)}")
    if outside:
        return replace(v, verdict=CONTRADICTED, why=f"interval outside {_region_text(claim)}")
    estimated = _needed(v, evidence, confidence)
    text = f"a decision needs about {estimated:,} {e.unit}" if estimated else "no feasible sample decides it"
    return replace(v, verdict=INCONCLUSIVE, needed=estimated, why=f"interval meets {_region_text(claim)}; {text}")


def _region_text(claim: Claim) -> str:
    low, high = region(claim)
    if claim.expect == "greater":
        return f"> {low:+g}"
    if claim.expect == "less":
        return f"< {high:+g}"
    if claim.expect == "at_most":
        return f"<= {high:+g}"
    if claim.expect == "at_least":
        return f">= {low:+g}"
    return f"[{low:+g}, {high:+g}]"


def _needed(v: Verdict, evidence: Evidence, confidence: float) -> int | None:
    """The units with which the claim would be decided, if the truth were the store's estimate: the distance
    from the estimate to the region's nearer edge (to the far edge for "within" while inside) detected at the
    power the analysis profile plans for, at the family's level."""
    e, claim = v.estimate, v.claim
    assert e is not None
    low, high = region(claim)
    power = evidence.settings.power.power if evidence.settings.power else 0.8
    family = max(v.family, 1)
    if claim.expect in ("greater", "less"):
        distance = abs(e.value - claim.value)  # deciding either way is rejecting the boundary
    else:
        edges = [x for x in (low, high) if math.isfinite(x)]
        distance = min(abs(e.value - x) for x in edges)
    if distance == 0:
        return None
    if e.spread is not None and claim.expect in ("greater", "less"):
        plan = Plan(sites=e.units, rounds=e.pairs_per_site, family=family, confidence=confidence, power=power)
        return sites_needed(distance, plan, e.spread, most=MOST_UNITS)
    return _normal_needed(e, distance, family, confidence, power)


def _normal_needed(e: Estimate, distance: float, family: int, confidence: float, power: float) -> int | None:
    """The normal approximation: the interval's half-width shrinks as the square root of the units; enough
    units put the edge ``distance`` away at z(level) + z(power) standard errors."""
    z_interval = stats.norm.ppf(0.5 + confidence / 2)
    se = (e.high - e.low) / (2 * z_interval)
    if not math.isfinite(se):  # no interval to scale
        return None
    if se <= 0:
        return e.units
    z = stats.norm.ppf(1 - (1 - confidence) / (2 * family)) + stats.norm.ppf(power)
    needed = math.ceil(e.units * (z * se / distance) ** 2)
    return needed if needed <= MOST_UNITS else None


@dataclass
class ClaimReport:
    """Every source's verdicts, and the mapping they were read with."""

    verdicts: list[Verdict] = field(default_factory=list)
    mapping: dict[str, str] = field(default_factory=dict)
    adjustment: str = ""

    def counts(self) -> dict[str, int]:
        out = dict.fromkeys((HOLDS, CONTRADICTED, INCONCLUSIVE, NOT_MEASURED), 0)
        for v in self.verdicts:
            out[v.verdict] += 1
        return out


def study_mapping(study_options: dict[str, dict]) -> dict[str, str]:
    """The source names the crawls' studies map (`[analysis] claims_map`), lower-cased; a later study's
    mapping of a name wins (the command line's `--map` wins over all)."""
    mapping: dict[str, str] = {}
    for options in study_options.values():
        mapping |= {str(k).lower(): str(v) for k, v in (options.get("claims_map") or {}).items()}
    return mapping


def check_claims(
    results: Results,
    settings: AnalysisSettings,
    sources: list[ClaimSource],
    overrides: dict[str, str] | None = None,
    bench: Path | None = None,
) -> ClaimReport:
    """Every claim of ``sources`` against ``results`` (and the resolver benchmarks' records in ``bench``), the
    source's names mapped by the studies and then by ``overrides``."""
    mapping = study_mapping(results.study_options) | {k.lower(): v for k, v in (overrides or {}).items()}
    adjustment, _ = choose_adjustment(results.study_options, settings.statistics.adjustment)
    evidence = Evidence(results, settings, mapping, bench)
    confidence = settings.statistics.confidence
    verdicts = [v for source in sources for v in check_source(source, evidence, adjustment, confidence)]
    return ClaimReport(verdicts, mapping, adjustment)


def verdict_frame(report: ClaimReport) -> pd.DataFrame:
    """One row per claim: the source's figure, the store's with its interval, the verdict and the mapping."""
    rows = []
    for v in report.verdicts:
        e = v.estimate
        rows.append(
            {
                "source": v.source,
                "claim": v.claim.id,
                "statement": v.claim.statement,
                "citation": v.claim.citation,
                "source figure": v.claim.figure,
                "store figure": None if e is None else round(e.value, 2),
                "ci low": None if e is None else round(e.low, 2),
                "ci high": None if e is None else round(e.high, 2),
                "unit": "" if e is None else e.scale,
                "units": None if e is None else f"{e.units:,} {e.unit}",
                "p_value": None if e is None else e.p_value,
                "p_adjusted": v.p_adjusted,
                "verdict": v.verdict,
                "why": v.why or v.missing,
                "needed": v.needed,
                "mapping": ", ".join(v.mapping),
            }
        )
    return pd.DataFrame(rows)
