"""The report's section on prior studies' claims, and the lines `dnsstudy claims` prints."""

from __future__ import annotations

import html
from pathlib import Path

from analysis import tables
from analysis.claim_files import ClaimSource, load_sources
from analysis.claims import ClaimReport, check_claims, verdict_frame
from analysis.formats import number
from analysis.results import Results
from analysis.settings import AnalysisSettings
from analysis.significance import ADJUSTMENT_NAMES

HEADING = "Claims of prior studies"
#: How to read a verdict, in the report and the command's output alike (docs/analysis.md, "Claims").
READING = (
    "holds: the 95 % interval lies inside what the claim says and, for a direction, the test of no difference "
    "rejects after the source's claims are adjusted together; contradicted: the interval lies wholly outside it "
    "and the adjusted test rejects the claim's value; inconclusive: neither (or fewer units than the claim "
    "needs), with the units a decision would need if the store's estimate were the truth; not measured: the "
    "stores lack a condition, named. A verdict is about these stores' conditions (networks, resolvers, "
    "browsers, pages as mapped), not about the source's."
)


def lines(report: ClaimReport, sources: list[ClaimSource]) -> list[str]:
    """What `dnsstudy claims` prints: per source its citation, then a verdict line per claim; then the tally."""
    out = []
    for source in sources:
        mine = [v for v in report.verdicts if v.source == source.name]
        out.append(f"{source.name}: {source.source}")
        out += [f"  {v.line()}" for v in mine]
    counts = ", ".join(f"{n} {verdict}" for verdict, n in report.counts().items())
    mapping = ", ".join(f"{k}={v}" for k, v in sorted(report.mapping.items())) or "none"
    method = ADJUSTMENT_NAMES.get(report.adjustment, report.adjustment)
    out.append(f"{len(report.verdicts)} claims: {counts}; mapping {mapping}; {method}-adjusted within each source")
    return out


def section_of(results: Results, settings: AnalysisSettings, out: Path) -> tuple[str, list[Path]]:
    """The report's section: every source's claims against ``results``, as the crawls' studies map the names."""
    sources = load_sources()
    return section(check_claims(results, settings, sources), sources, out)


def section(report: ClaimReport, sources: list[ClaimSource], out: Path) -> tuple[str, list[Path]]:
    """The report's section (HTML) and the table files it wrote: one table per source, the reference first."""
    frame = verdict_frame(report)
    written: list[Path] = []
    parts = [f"<h2>{HEADING}</h2>", f"<p>{html.escape(READING)}</p>"]
    mapping = ", ".join(f"{k} = {v}" for k, v in sorted(report.mapping.items())) or "none"
    parts.append(f"<p>The sources' names mapped onto the stores': {html.escape(mapping)}.</p>")
    formats = {c: number("{:.2g}") for c in ("p_value", "p_adjusted")}
    for source in sources:
        mine = frame[frame["source"] == source.name].drop(columns="source")
        caption = f"Claims of {source.source}: the source's figure, the stores' with its 95 % interval, the verdict"
        written += tables.write_table(mine, out / "tables" / f"claims-{source.name}", caption)
        parts.append(f"<h3>{html.escape(source.source)}</h3>")
        parts.append(
            "<ul>"
            + "".join(f"<li>{html.escape(v.line())}</li>" for v in report.verdicts if v.source == source.name)
            + "</ul>"
        )
        parts.append(
            f"<details><summary>{html.escape(caption)}</summary>"
            f"{mine.to_html(index=False, float_format='%.2f', formatters=formats, na_rep='')}</details>"
        )
        if source.notes:
            parts.append(f"<p class='missing'>Notes: {html.escape(source.notes)}</p>")
    return "\n".join(parts), written
