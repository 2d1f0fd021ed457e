"""One command's worth of analysis: figures (PNG and PDF), tables (Markdown, CSV, LaTeX) and one HTML report."""

from __future__ import annotations

import html
import time
from dataclasses import dataclass, field, replace
from pathlib import Path

import pandas as pd

from analysis import claim_report, figures, https_report, tables
from analysis.bytecost import DEFAULT_MODEL, load_sizes
from analysis.formats import number
from analysis.methods import choose_adjustment, family_sentence, interval_sentence
from analysis.metrics import Metric, file_stem
from analysis.pair_tables import disagreements, once, verdicts_table
from analysis.pairs import Configuration, configurations, grid, grid_frame
from analysis.replay import replay_table, replayed
from analysis.report_figures import ReportFigures
from analysis.results import Results, ResultsError, load
from analysis.settings import DEFAULT_PROFILE, AnalysisSettings, load_settings
from analysis.significance import ADJUSTMENT_NAMES, ADJUSTMENTS, HOLM
from analysis.stats import DAGGER

TIMER_FAILURES = "Resolution failures of the standalone timer (timeouts and errors, % of queries sent)"
TIMER_DETAILS = "Failed timer queries by status and error detail"


@dataclass
class Report:
    """What was written, for the caller to print."""

    out: Path
    html: Path
    figures: list[Path] = field(default_factory=list)
    tables: list[Path] = field(default_factory=list)
    seconds: float = 0.0
    adjustment: str = HOLM  # how each grid's verdicts were adjusted (analysis/methods.py)
    drawn: ReportFigures | None = None  # how the figures are saved and placed, while the report is written


def analyze(stores: list[Path], out: Path, profile: Path = DEFAULT_PROFILE, byte_model: Path = DEFAULT_MODEL) -> Report:
    """Read the stores and write every figure and table, and report.html, under ``out``.

    The grids, tables of pairs and protocol figures are drawn once per metric the profile names
    (`[grid] metrics`); the resolution CDFs, the success tables and the byte cost are not per metric."""
    started = time.monotonic()
    settings = load_settings(profile)
    results = load(stores)
    if results.empty:
        raise ResultsError(
            f"{', '.join(results.sources)}: no visit has been recorded yet "
            f"({results.planned} planned): nothing to analyse"
        )
    adjustment, chosen_by = choose_adjustment(results.study_options, settings.statistics.adjustment)
    report = Report(out=out, html=out / "report.html", adjustment=adjustment)
    with ReportFigures(out / "figures") as drawn:  # its workers end whatever happens
        report.drawn = drawn
        sections: list[str] = []
        (out / "figures").mkdir(parents=True, exist_ok=True)
        visits, timings = results.visits, results.timings
        networks = list(dict.fromkeys(list(visits["network"].astype(str)) + list(timings["network"].astype(str))))

        if not timings.empty:
            for name, frame, caption in [
                ("timer-failures", tables.timer_failures(timings, settings), TIMER_FAILURES),
                ("timer-failure-details", tables.timer_failure_details(timings, settings), TIMER_DETAILS),
            ]:
                report.tables += tables.write_table(frame, out / "tables" / name, caption)
        sections.append(_summary(results, settings) + _methods(report, chosen_by, settings))
        if not visits.empty:
            sections.append(_coverage(report, results, settings))
        sections += [_network(report, results, network, settings) for network in networks]

        if not visits.empty:
            sections.append(_protocols(report, results, settings))
            sections.append(_outcomes(report, visits, settings, heading=_outcomes_heading(visits)))
            sections += _apart(report, results, networks, settings)
            h3, written = https_report.section_of(visits, settings, out)  # none where no visit observed it
            report.tables += written
            sections += [h3] if h3 else []
        claimed, written = claim_report.section_of(results, settings, out)  # every source, as the studies map
        report.tables += written
        sections.append(claimed)

        fig = figures.byte_cost_figure(load_sizes(byte_model), settings)
        sections.append("<h2>Byte cost</h2>" + drawn.now(fig, "byte-cost", "Bytes a client sends for r queries"))
        report.html.write_text(drawn.fill(_page(sections, settings)))
        report.figures = drawn.paths
    report.seconds = time.monotonic() - started
    return report


def _outcomes_heading(visits: pd.DataFrame) -> str:
    """The heading of the success tables of every visit: they pool the browser lives and connections, if several."""
    if len(tables.session_modes(visits)) > 1:
        return "Success and errors, every browser life and resolver connection together (each one's apart below)"
    return "Success and errors"


def _network(report: Report, results: Results, network: str, settings: AnalysisSettings) -> str:
    """One network's section: its resolution CDF and timer failures, and its grids unless browser lives differ."""
    visits, timings, label = results.visits, results.timings, settings.labels.network(network)
    parts = [f"<h2>{html.escape(label)}</h2>"]
    if (timings["network"] == network).any():
        fig = figures.resolution_cdf(timings, network, settings)
        assert report.drawn is not None  # while the report is written
        parts.append(report.drawn.now(fig, f"resolution-cdf-{network}", f"Resolution times, {label}"))
        parts.append(_timer_failures(timings[timings["network"] == network], settings))
    if (visits["network"] == network).any() and visits["browser_session"].nunique() > 1:
        parts.append("<p>Browser lives differ: their grids are apart, under Browser life below.</p>")
    elif (visits["network"] == network).any():
        order = configurations(visits)
        parts += [_pairs(report, results, network, metric, order, settings) for metric in settings.grid.metric_list()]
    return "\n".join(parts)


def _apart(report: Report, results: Results, networks: list[str], settings: AnalysisSettings) -> list[str]:
    """The sections that read apart what the stores hold several of: replays, places, session modes, browsers."""
    visits, sections = results.visits, []
    if not replayed(visits).empty:
        sections.append(_replay(report, visits, settings))
    if visits["vantage_point"].nunique() > 1:
        sections.append(_vantage_points(report, results, networks, settings))
    if len(tables.session_modes(visits)) > 1:
        sections.append(_session_modes(report, results, networks, settings))
    if visits["browser"].nunique() > 1:
        lives = sorted(visits["browser_session"].astype(str).unique())
        for life in lives if len(lives) > 1 else [None]:
            mine = visits[visits["browser_session"].astype(str) == life] if life else visits
            sections.append(_browsers(report, replace(results, visits=mine), networks, settings, life))
    return sections


def _vantage_points(report: Report, results: Results, networks: list[str], settings: AnalysisSettings) -> str:
    """Configurations compared across vantage points: success and median onLoad side by side (each browser life
    in rows of its own), then each vantage point's own grids (the grids above pool every vantage point's pairs,
    each pair within one); with several browser lives, a vantage point's grids per life."""
    visits = results.visits
    frame = tables.side_by_side_table(visits, "vantage_point", settings)
    caption = "Per vantage point: counted visits, success % and median onLoad of Successful visits"
    report.tables += tables.write_table(frame, report.out / "tables" / "vantage-points", caption)
    parts = ["<h2>Vantage points</h2>", f"<h3>{html.escape(caption)}</h3>", frame.to_html(index=False)]
    lives = sorted(visits["browser_session"].astype(str).unique())
    for life in lives if len(lives) > 1 else [None]:
        mine = replace(results, visits=visits[visits["browser_session"].astype(str) == life]) if life else results
        tag, of = (f"-{life}", f", browser {life}") if life else ("", "")
        for place in sorted(mine.visits["vantage_point"].astype(str).unique()):
            parts += _grids_of(report, mine, "vantage_point", place, place + of, networks, settings, key_end=tag)
    return "\n".join(parts)


def _browsers(
    report: Report, results: Results, networks: list[str], settings: AnalysisSettings, life: str | None = None
) -> str:
    """The browsers compared: success and median onLoad side by side, each arm's difference from Do53 in each
    browser (one figure per metric), then each browser's own grids and success tables. The grids above pool
    both browsers' pairs, each pair within one browser. With several browser lives, one such section per
    ``life`` (the visits given are that life's), so that no table, figure or grid mixes two lives."""
    tag, of = (f"-{life}", f", browser {life}") if life else ("", "")
    frame = tables.side_by_side_table(results.visits, "browser", settings)
    caption = f"Per browser{of}: counted visits, success % and median onLoad of Successful visits"
    report.tables += tables.write_table(frame, report.out / "tables" / f"browsers{tag}", caption)
    parts = [f"<h2>Browsers{html.escape(of)}</h2>", f"<h3>{html.escape(caption)}</h3>", frame.to_html(index=False)]
    for metric in settings.grid.metric_list():
        if results.visits[metric.column].notna().any():
            fig = figures.browser_figure(results.visits, settings, metric)
            caption = f"{metric.label}: each arm minus its resolver's Do53, per browser{of}"
            parts.append(_drawn(report).now(fig, file_stem("browsers", metric, f"do53{tag}"), caption))
    for browser in sorted(results.visits["browser"].astype(str).unique()):
        name = settings.labels.browser(browser) + of
        parts += _grids_of(report, results, "browser", browser, name, networks, settings, key_end=tag)
        mine = results.visits[results.visits["browser"].astype(str) == browser]
        heading = f"Success and errors, {name}"
        parts.append(_outcomes(report, mine, settings, suffix=f"-{browser}{tag}", heading=heading))
    return "\n".join(parts)


def _grids_of(
    report: Report,
    results: Results,
    column: str,
    value: str,
    name: str,
    networks: list[str],
    settings: AnalysisSettings,
    key_end: str = "",
) -> list[str]:
    """The grids of the visits whose ``column`` is ``value`` (a vantage point, a browser), network by network;
    ``key_end`` ends their files' names."""
    order, parts = configurations(results.visits), []
    mine = replace(results, visits=results.visits[results.visits[column].astype(str) == value])
    for network in networks:
        if not (mine.visits["network"] == network).any():
            continue
        parts.append(f"<h3>{html.escape(name)}, {html.escape(settings.labels.network(network))}</h3>")
        parts += [
            _pairs(report, mine, network, metric, order, settings, key=f"{network}-{value}{key_end}")
            for metric in settings.grid.metric_list()
        ]
    return parts


def _session_modes(report: Report, results: Results, networks: list[str], settings: AnalysisSettings) -> str:
    """Browser life (`browser_session`: fresh, fresh settled N s, reused warm-started) and resolver connection side
    by side per arm (warm against cold; unpaired medians: visits are paired within one mode only), then each browser
    life's own grids where there are several (the network sections then draw none: grids never mix lives)."""
    visits = results.visits
    frame = tables.session_table(visits, settings)
    caption = (
        "Per browser life and resolver connection: counted visits, median onLoad of Successful visits, median "
        "new resolver connections, % of visits whose first query used an open connection; warm - cold: the "
        "difference of the medians (visits of two modes are never paired)"
    )
    report.tables += tables.write_table(frame, report.out / "tables" / "session-modes", caption)
    parts = ["<h2>Browser life and resolver connection</h2>", f"<h3>{html.escape(caption)}</h3>"]
    parts.append(frame.to_html(index=False))
    lives = sorted(visits["browser_session"].astype(str).unique())
    for life in lives if len(lives) > 1 else []:
        parts += _grids_of(report, results, "browser_session", life, f"browser {life}", networks, settings)
    # The success tables above the sections pool the modes; each mode's own follow (their success differences
    # compare protocols within one mode).
    mode_of = visits["browser_session"].astype(str) + " " + visits["resolver_connection"].astype(str)
    for mode in tables.session_modes(visits):
        heading = f"Success and errors, browser {mode} connection"
        parts.append(_outcomes(report, visits[mode_of == mode], settings, suffix=f"-{mode}", heading=heading))
    return "\n".join(parts)


def _pairs(
    report: Report,
    results: Results,
    network: str,
    metric: Metric,
    order: list[Configuration],
    settings: AnalysisSettings,
    key: str | None = None,
) -> str:
    """One metric's grid on one network: its table of pairs, figure, marked pairs and every pair's statistics,
    after a note of the Successful visits that lack the metric. When none has it there is no grid (every cell
    would say "no pairs"), only a sentence saying why."""
    label = settings.labels.network(network)
    sub = results.visits[results.visits["network"] == network]
    missing, successful = tables.without_metric(sub, metric)
    head = f"<h3>{html.escape(metric.label)}</h3>"
    if successful and missing == successful:
        return head + f'<p class="missing">{html.escape(_all_missing(results, label, metric, successful))}</p>'
    cells = grid(results.visits, network, settings, order, metric, report.adjustment)
    family, reading = [c.statistics for c in once(cells)], settings.reading()
    report.tables += tables.write_table(
        grid_frame(cells, settings.labels),
        report.out / "tables" / file_stem("pairs", metric, key or network),
        f"Paired {metric.label} differences, {label} (row minus column, {metric.unit}; shares of pairs with the "
        f"row slower or faster by more than {settings.grid.large_difference_ms:g} ms; sign_disagrees: the "
        f"median and the mean have opposite signs, and the verdict reads the median only; "
        f"{interval_sentence(family, reading)}; p_value: sign test of a zero median by site; "
        f"{family_sentence(family, reading)}, p_adjusted)",
    )
    caption = f"Pairwise grid of {metric.label}, {label}"
    name = file_stem("grid", metric, key or network)
    note = ""
    if missing:
        note = (
            f'<p class="missing">{missing} of {successful} Successful visits on {html.escape(label)} have no '
            f"{html.escape(metric.label)}: they are left out of this grid's pairs (and only this grid's).</p>"
        )
    return "".join(
        [
            head,
            note,
            _drawn(report).later(figures.grid_figure, cells, order, network, settings, name=name, caption=caption),
            disagreements(cells, settings),
            verdicts_table(cells, settings),
        ]
    )


def _all_missing(results: Results, where: str, metric: Metric, successful: int) -> str:
    """Why a metric has no grid: the stores that predate its column, or else a browser that reported none."""
    stores = results.lacking.get(metric.column, [])
    why = (
        f"{', '.join(stores)} {'predates' if len(stores) == 1 else 'predate'} the {metric.column} column"
        if stores
        else "the browser reported none"
    )
    return f"No {metric.label} grid for {where}: the metric is missing from all {successful} Successful visits ({why})."


def _protocols(report: Report, results: Results, settings: AnalysisSettings) -> str:
    """Protocol against protocol per resolver (Fig. 4), once per metric that any Successful visit has."""
    visits = results.visits
    parts = ["<h2>Protocol against protocol, per resolver</h2>"]
    resolvers = [
        r
        for r in dict.fromkeys(visits["resolver"].astype(str))
        if visits[visits["resolver"] == r]["protocol"].nunique() > 1
    ]
    for metric in settings.grid.metric_list():
        missing, successful = tables.without_metric(visits, metric)
        if successful and missing == successful:
            parts.append(
                f'<p class="missing">{html.escape(_all_missing(results, "any network", metric, successful))}</p>'
            )
            continue
        for resolver in resolvers:
            fig = figures.protocol_figure(visits, resolver, settings, metric)
            caption = f"{settings.labels.resolver(resolver)}, {metric.label}"
            parts.append(_drawn(report).now(fig, file_stem("protocols", metric, resolver), caption))
    return "\n".join(parts)


def _outcomes(
    report: Report, visits: pd.DataFrame, settings: AnalysisSettings, suffix: str = "", heading: str = ""
) -> str:
    """The success and error tables in both taxonomies, and the success-rate differences (not per metric);
    ``suffix`` ends their files' names (a browser's tables: "-chromium")."""
    parts = [f"<h2>{html.escape(heading or 'Success and errors')}</h2>"]
    for taxonomy in tables.TAXONOMIES:
        frame = tables.outcome_table(visits, taxonomy, settings)
        caption = f"Outcome of visits per network, resolver and protocol ({taxonomy} taxonomy, % of visits)"
        report.tables += tables.write_table(frame, report.out / "tables" / f"outcomes-{taxonomy}{suffix}", caption)
        parts.append(f"<h3>{html.escape(caption)}</h3>" + frame.to_html(index=False, float_format="%.2f"))
    frame = tables.success_differences(visits, settings, report.adjustment)
    caption = (
        f"Success-rate differences (percentage points; {settings.statistics.confidence:.0%} intervals from a "
        f"bootstrap of sites, each resampled with all its visits and, measured at several vantage points, with all "
        f"of them ({settings.statistics.resamples:,} resamples, {settings.statistics.interval} percentiles); sites: "
        f"the units resampled; p_value: by site (cluster-robust); p_adjusted: "
        f"{ADJUSTMENT_NAMES[report.adjustment]}-adjusted over the {len(frame)} rows "
        f"of this table ({ADJUSTMENTS[report.adjustment]} {1 - settings.statistics.confidence:.0%}); differs: the "
        f"interval clear of zero and p_adjusted below {1 - settings.statistics.confidence:g})"
    )
    report.tables += tables.write_table(frame, report.out / "tables" / f"success-differences{suffix}", caption)
    formats = {c: number("{:.2g}") for c in ("p_value", "p_adjusted") if c in frame.columns}
    parts.append(
        f"<h3>{html.escape(caption)}</h3>" + frame.to_html(index=False, float_format="%.2f", formatters=formats)
    )
    return "\n".join(parts)


def _replay(report: Report, visits: pd.DataFrame, settings: AnalysisSettings) -> str:
    """Misses, fuzzy matches, errors and filled bodies per site of visits to a replayed web; the sites past the
    threshold, or with an answer not given as recorded, named."""
    threshold = settings.replay.misses_per_visit
    frame = replay_table(visits, threshold)
    caption = (
        "Replayed web: requests the archive could not answer (misses), names it does not hold (DNS misses), "
        "answered with another query string "
        "(fuzzy), not answered as recorded (errors) and answered with a body made up at import (filled), per "
        f"site; flagged: more than {threshold:g} misses per visit, or any error"
    )
    report.tables += tables.write_table(frame, report.out / "tables" / "replay-misses", caption)
    flagged = [str(s) for s in frame.loc[frame["flagged"], "site"]]
    verdict = (
        f"<p class='warning'>{len(flagged)} site{'s' if len(flagged) != 1 else ''} passed the threshold or met "
        f"replay errors, their replayed pages differ from the recorded ones: {html.escape(', '.join(flagged))}</p>"
        if flagged
        else f"<p>No site passed {threshold:g} misses per visit or met a replay error.</p>"
    )
    return (
        f"<h2>Replay</h2>{verdict}<details><summary>{html.escape(caption)}</summary>"
        f"{frame.to_html(index=False, float_format='%.2f')}</details>"
    )


def _coverage(report: Report, results: Results, settings: AnalysisSettings) -> str:
    """How many Successful visits lack each of the profile's metrics: a sentence per metric, and the counts per
    network and configuration (also written as the `metric-coverage` table)."""
    metrics = settings.grid.metric_list()
    items = []
    for metric in metrics:
        missing, successful = tables.without_metric(results.visits, metric)
        stores = results.lacking.get(metric.column)
        why = f"; {', '.join(stores)} predate{'s' if len(stores) == 1 else ''} its column" if stores else ""
        items.append(
            f"<li>{html.escape(metric.label)}: {missing} of {successful} Successful visits lack it{html.escape(why)}"
            "</li>"
        )
    frame = tables.metric_coverage(results.visits, metrics, settings)
    caption = "Successful visits per network and configuration, and how many of them lack each metric"
    report.tables += tables.write_table(frame, report.out / "tables" / "metric-coverage", caption)
    return (
        f"<h2>Metrics</h2><p>Grids are drawn for {', '.join(html.escape(m.label) for m in metrics)}. A Successful "
        f"visit without a metric is left out of that metric's pairs only.</p><ul>{''.join(items)}</ul>"
        f"<details><summary>{html.escape(caption)}</summary>{frame.to_html(index=False)}</details>"
    )


def _timer_failures(timings: pd.DataFrame, settings: AnalysisSettings) -> str:
    """One network's timer failure rates, and its failed queries by error detail, beside its resolution CDF."""
    rates = tables.timer_failures(timings, settings).drop(columns="network")
    why = tables.timer_failure_details(timings, settings).drop(columns="network")
    text = "<h3>Resolution failures (timeouts and errors, % of queries sent)</h3>" + rates.to_html(
        index=False, float_format="%.2f"
    )
    if not why.empty:
        text += "<details><summary>failed queries by error detail</summary>"
        text += why.to_html(index=False, float_format="%.2f") + "</details>"
    return text


def _methods(report: Report, chosen_by: str, settings: AnalysisSettings) -> str:
    """How intervals, p-values and verdicts are made, and which adjustment the grids use and why."""
    method, level = report.adjustment, 1 - settings.statistics.confidence
    return (
        f"<p>Statistics: the site (in a browser) is the unit; a site measured at several vantage points is one "
        f"unit where they are read together (each vantage point's own grids read the site there). Intervals come "
        f"from a bootstrap that resamples sites with all their rounds and vantage points "
        f"({settings.statistics.resamples:,} resamples, {settings.statistics.interval} percentiles); where every "
        f"site has one pair in a cell, that is resampling pairs (each table's <code>resampled</code> column says "
        f"which). The median is the middle value, or the mean of the two middle ones, in the estimate and in every "
        f"resample. The p-value is the sign test of a zero median by site (a site's sign sum as likely positive "
        f"as negative); success-rate differences are by site too. The verdicts of each grid are one family, "
        f"adjusted together by {ADJUSTMENT_NAMES[method]}'s method ({ADJUSTMENTS[method]} {level:.0%}; "
        f"{html.escape(chosen_by)}): a pair is <em>row slower</em> or <em>row faster</em> when its interval "
        f"excludes zero and its adjusted p-value is below {level:g}. Both p-values are in every table.</p>"
    )


def _summary(results: Results, settings: AnalysisSettings) -> str:
    v = results.visits
    env = results.environment.drop_duplicates(["key", "value"])
    facts = "".join(f"<li>{html.escape(k)}: {html.escape(', '.join(g['value']))}</li>" for k, g in env.groupby("key"))
    http3 = v["page_http3"].astype(str).map(lambda s: f"HTTP/3 {s or 'unrecorded'}")
    lives = v.assign(page_http3=http3).groupby(
        ["browser", "browser_session", "resolver_connection", "page_http3"], observed=True
    )
    facts += (
        "<li>browser, browser life, resolver connection, page's HTTP/3: "
        f"{html.escape(tables.counted_list(lives.size()))}</li>"
    ) + _renewed_connections(v)
    checks = results.link_checks
    problems = int(checks["problem"].notna().sum()) if not checks.empty else 0
    failed, sent = tables.failure_counts(results.timings["status"])
    return (
        f"<p>Stores: {html.escape(', '.join(results.sources))}. {len(v)} visits done of {results.planned} planned; "
        f"{int((v['error_class'] == 'Successful').sum())} successful; "
        f"{int((~v['counted'].fillna(False)).sum())} harness failures (not counted); "
        f"{_dns_unsettled(v)}"
        f"{len(results.timings)} timed queries ({failed} failed of {sent} sent); "
        f"{len(checks)} link checks, {problems} with a problem.</p>"
        f"<p>Reading: {html.escape(settings.source)}. A pair is <em>indistinguishable</em> only when its "
        f"{settings.statistics.confidence:.0%} interval lies within ±{settings.grid.indistinguishable_ms:g} ms. "
        f"Verdicts and shades read the median; {DAGGER} marks a pair whose mean has the opposite sign.</p>"
        f"<details><summary>environment</summary><ul>{facts}</ul></details>"
    )


def _dns_unsettled(visits: pd.DataFrame) -> str:
    """How many reused browsers' visits ended a wait for late DNS queries with some still in flight (the part
    of the summary that says so; nothing where no visit recorded the waits)."""
    recorded = visits["dns_unsettled"].dropna()
    if recorded.empty:
        return ""
    unsettled = int((recorded > 0).sum())
    return f"{unsettled} of {len(recorded)} reused browsers' visits ended a DNS wait with queries in flight; "


def _renewed_connections(visits: pd.DataFrame) -> str:
    """The environment's line on cold visits of reused browsers whose resolver connection was renewed once the
    counters ran, and on Chromium's lookups of its own names before the page's (nothing where none recorded it)."""
    renewed = visits["resolver_connection_reset"].dropna().astype(str)
    own = visits["own_lookups_before_page"].dropna()
    if renewed.empty and own.empty:
        return ""
    parts = [f"{n} {kind}" for kind, n in renewed.value_counts().sort_index().items()]
    if not own.empty:
        began = int((own > 0).sum())
        parts.append(f"{began} of {len(own)} Chromium visits began with lookups of the browser's own names")
    return f"<li>resolver connection renewed in the counted window: {html.escape(', '.join(parts))}</li>"


def _page(sections: list[str], settings: AnalysisSettings) -> str:
    style = (
        "body{font-family:sans-serif;max-width:1400px;margin:auto;padding:1em}img{max-width:100%}"
        "table{border-collapse:collapse;font-size:12px}td,th{border:1px solid #ccc;padding:2px 6px}"
        f"figure{{margin:1em 0}}.disagree{{border-left:4px dashed {figures.DISAGREE};padding-left:.8em}}"
    )
    return (
        f"<!doctype html><html><head><meta charset='utf-8'><title>dnsstudy report</title>"
        f"<style>{style}</style></head><body><h1>dnsstudy report</h1>{''.join(sections)}</body></html>\n"
    )


__all__ = ["Report", "ResultsError", "analyze"]


def _drawn(report: Report) -> ReportFigures:
    """The report's figures (set while `analyze` writes it)."""
    assert report.drawn is not None
    return report.drawn
