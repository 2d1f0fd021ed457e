"""One command's worth of analysis: figures (PNG and PDF), tables (Markdown, CSV, LaTeX) and one HTML report."""

from __future__ import annotations

import base64
import html
import io
import time
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib.pyplot as plt
import pandas as pd

from analysis import figures, tables
from analysis.bytecost import DEFAULT_MODEL, load_sizes
from analysis.pairs import configurations, grid, grid_frame
from analysis.results import Results, ResultsError, load
from analysis.settings import DEFAULT_PROFILE, AnalysisSettings, load_settings


@dataclass
class Report:
    """What was written, for the caller to print."""

    out: Path
    html: Path
    figures: list[Path] = field(default_factory=list)
    tables: list[Path] = field(default_factory=list)
    seconds: float = 0.0


def analyze(stores: list[Path], out: Path, profile: Path = DEFAULT_PROFILE, byte_model: Path = DEFAULT_MODEL) -> Report:
    """Read the stores and write every figure and table, and report.html, under ``out``."""
    started = time.monotonic()
    settings = load_settings(profile)
    results = load(stores)
    if results.empty:
        raise ResultsError(
            f"{', '.join(results.sources)}: no visit has been recorded yet "
            f"({results.planned} planned): nothing to analyse"
        )
    report = Report(out=out, html=out / "report.html")
    sections: list[str] = []
    (out / "figures").mkdir(parents=True, exist_ok=True)
    visits, timings = results.visits, results.timings
    networks = list(dict.fromkeys(list(visits["network"].astype(str)) + list(timings["network"].astype(str))))

    sections.append(_summary(results, settings))
    for network in networks:
        label = settings.labels.network(network)
        parts = [f"<h2>{html.escape(label)}</h2>"]
        if (timings["network"] == network).any():
            fig = figures.resolution_cdf(timings, network, settings)
            parts.append(_figure(report, fig, f"resolution-cdf-{network}", f"Resolution times, {label}"))
        sub = visits[visits["network"] == network]
        if not sub.empty:
            order = configurations(visits)
            cells = grid(visits, network, settings, order)
            frame = grid_frame(cells, settings.labels)
            report.tables += tables.write_table(
                frame,
                out / "tables" / f"pairs-{network}",
                f"Paired page-load differences, {label} (row minus column, ms)",
            )
            fig = figures.grid_figure(cells, order, network, settings)
            parts.append(_figure(report, fig, f"grid-{network}", f"Pairwise grid, {label}"))
            parts.append(_verdicts(frame))
        sections.append("\n".join(parts))

    if not visits.empty:
        parts = ["<h2>Protocol against protocol, per resolver</h2>"]
        for resolver in dict.fromkeys(visits["resolver"].astype(str)):
            if visits[visits["resolver"] == resolver]["protocol"].nunique() > 1:
                fig = figures.protocol_figure(visits, resolver, settings)
                parts.append(_figure(report, fig, f"protocols-{resolver}", settings.labels.resolver(resolver)))
        sections.append("\n".join(parts))
        parts = ["<h2>Success and errors</h2>"]
        for taxonomy in tables.TAXONOMIES:
            frame = tables.outcome_table(visits, taxonomy, settings)
            caption = f"Outcome of visits per network, resolver and protocol ({taxonomy} taxonomy, % of visits)"
            report.tables += tables.write_table(frame, out / "tables" / f"outcomes-{taxonomy}", caption)
            parts.append(f"<h3>{html.escape(caption)}</h3>" + frame.to_html(index=False, float_format="%.2f"))
        frame = tables.success_differences(visits, settings)
        caption = (
            f"Success-rate differences ({settings.statistics.confidence:.0%} Newcombe intervals, percentage points)"
        )
        report.tables += tables.write_table(frame, out / "tables" / "success-differences", caption)
        parts.append(f"<h3>{html.escape(caption)}</h3>" + frame.to_html(index=False, float_format="%.2f"))
        sections.append("\n".join(parts))

    fig = figures.byte_cost_figure(load_sizes(byte_model), settings)
    sections.append("<h2>Byte cost</h2>" + _figure(report, fig, "byte-cost", "Bytes a client sends for r queries"))
    report.html.write_text(_page(sections, settings))
    report.seconds = time.monotonic() - started
    return report


def _figure(report: Report, fig: plt.Figure, name: str, caption: str) -> str:
    """Save PNG and PDF; return the PNG inline for the report (self-contained: no file references)."""
    png, pdf = report.out / "figures" / f"{name}.png", report.out / "figures" / f"{name}.pdf"
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110)
    png.write_bytes(buffer.getvalue())
    fig.savefig(pdf)
    plt.close(fig)
    report.figures += [png, pdf]
    data = base64.b64encode(buffer.getvalue()).decode("ascii")
    return (
        f'<figure><img alt="{html.escape(caption)}" src="data:image/png;base64,{data}">'
        f"<figcaption>{html.escape(caption)} ({png.name}, {pdf.name})</figcaption></figure>"
    )


def _verdicts(frame: pd.DataFrame) -> str:
    cols = ["row", "column", "pairs", "median_ms", "ci_low_ms", "ci_high_ms", "wilcoxon_p", "verdict"]
    shown = frame[frame["row"] < frame["column"]][cols]  # each unordered pair once
    return (
        "<details><summary>statistics of every pair</summary>"
        + shown.to_html(index=False, float_format="%.3g")
        + "</details>"
    )


def _summary(results: Results, settings: AnalysisSettings) -> str:
    v = results.visits
    env = results.environment.drop_duplicates(["key", "value"])
    facts = "".join(f"<li>{html.escape(k)}: {html.escape(', '.join(g['value']))}</li>" for k, g in env.groupby("key"))
    checks = results.link_checks
    problems = int(checks["problem"].notna().sum()) if not checks.empty else 0
    return (
        f"<p>Stores: {html.escape(', '.join(results.sources))}. {len(v)} visits done of {results.planned} planned; "
        f"{int((v['error_class'] == 'Successful').sum())} successful; "
        f"{int((~v['counted'].fillna(False)).sum())} harness failures (not counted); "
        f"{len(results.timings)} timed queries; {len(checks)} link checks, {problems} with a problem.</p>"
        f"<p>Reading: {html.escape(settings.source)}. A pair is <em>indistinguishable</em> only when its "
        f"{settings.statistics.confidence:.0%} interval lies within ±{settings.grid.indistinguishable_ms:g} ms.</p>"
        f"<details><summary>environment</summary><ul>{facts}</ul></details>"
    )


def _page(sections: list[str], settings: AnalysisSettings) -> str:
    style = (
        "body{font-family:sans-serif;max-width:1400px;margin:auto;padding:1em}img{max-width:100%}"
        "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px}"
        "figure{margin:1em 0}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>dnsstudy report</title>"
        f"<style>{style}</style></head><body><h1>dnsstudy report</h1>{''.join(sections)}</body></html>\n"
    )


__all__ = ["Report", "ResultsError", "analyze"]
