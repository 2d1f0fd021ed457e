"""Success and error tables per network, resolver and protocol (the reference study's Tables 2 and 3).

Two taxonomies: `strict` (our classes: a harness failure is its own class,
never a protocol's) and `paper-2019` (the reference study's grouping, in
which connection failures count as DNS errors). Percentages are of the
visits of each row; in `strict`, Infrastructure Failures are shown but
left out of the denominator, since they say nothing about the protocol.
"""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import numpy as np
import pandas as pd

from analysis.metrics import Metric
from analysis.pairs import configurations, units
from analysis.resampling import Resamples, draw_resamples
from analysis.settings import AnalysisSettings, Labels
from analysis.significance import adjust, rate_difference_test
from analysis.stats import Reading, rate_differences, wilson_interval

STRICT_ORDER = ["Successful", "Page-load Timeout", "DNS Error", "Selenium Error", "Other Error"]
INFRASTRUCTURE = "Infrastructure Failure"
TAXONOMIES = {"strict": "error_class", "paper-2019": "paper_2019"}
#: Timer statuses (docs/timer.md) of a query that was sent and got no answer: the transport's failures.
FAILED = ("timeout", "error")
#: The timer refused the name before sending anything.
NOT_SENT = "invalid"
NO_DETAIL = "(none)"
TIMER_DETAIL_COLUMNS = ["network", "resolver", "protocol", "status", "error", "queries", "% of sent"]


def outcome_table(visits: pd.DataFrame, taxonomy: str, settings: AnalysisSettings) -> pd.DataFrame:
    """One row per (network, resolver, protocol): visits, then the percentage of each class."""
    column = TAXONOMIES[taxonomy]
    labels = settings.labels
    rows = []
    order = configurations(visits)
    for network in _networks(visits):
        sub = visits[visits["network"] == network]
        for resolver, protocol in order:
            mine = sub[(sub["resolver"] == resolver) & (sub["protocol"] == protocol)]
            if mine.empty:
                continue
            classes = mine[column].astype(str)
            infrastructure = int((mine["error_class"].astype(str) == INFRASTRUCTURE).sum())
            counted = classes[mine["error_class"].astype(str) != INFRASTRUCTURE] if taxonomy == "strict" else classes
            row = {
                **configuration_row(labels, network, resolver, protocol),
                "visits": len(counted),
            }
            names = STRICT_ORDER + sorted(set(counted) - set(STRICT_ORDER))
            for name in names:
                row[f"{name} %"] = round(100 * (counted == name).mean(), 2) if len(counted) else float("nan")
            if taxonomy == "strict":
                row["infrastructure (not counted)"] = infrastructure
            rows.append(row)
    return pd.DataFrame(rows).fillna(0.0) if rows else pd.DataFrame()


def vantage_point_table(visits: pd.DataFrame, settings: AnalysisSettings) -> pd.DataFrame:
    """Per network and configuration (and browser life, if several), for each vantage point: counted visits,
    success % and median onLoad (ms)."""
    return side_by_side_table(visits, "vantage_point", settings)


def side_by_side_table(visits: pd.DataFrame, column: str, settings: AnalysisSettings) -> pd.DataFrame:
    """Per network and configuration, for each value of ``column`` (a vantage point, a browser): counted visits,
    success % and median onLoad (ms). Visits of several browser lives are never pooled: each life has its rows,
    named in a "browser life" column."""
    labels = settings.labels
    places = sorted(visits[column].astype(str).unique())
    lives = sorted(visits["browser_session"].astype(str).unique())
    rows = []
    for network in _networks(visits):
        sub = visits[(visits["network"] == network) & visits["counted"].fillna(False).astype(bool)]
        for resolver, protocol in configurations(visits):
            mine = sub[(sub["resolver"] == resolver) & (sub["protocol"] == protocol)]
            for life in lives:
                here = mine[mine["browser_session"].astype(str) == life]
                if here.empty:
                    continue
                row = configuration_row(labels, network, resolver, protocol)
                if len(lives) > 1:
                    row["browser life"] = life
                rows.append(row | _side_by_side_cells(here, column, places))
    return pd.DataFrame(rows)


def _side_by_side_cells(visits: pd.DataFrame, column: str, places: list[str]) -> dict[str, object]:
    """For each of ``places`` (values of ``column``): counted visits, success % and median onLoad (ms)."""
    row: dict[str, object] = {}
    for place in places:
        here = visits[visits[column].astype(str) == place]
        ok = here[here["error_class"] == "Successful"]
        row[f"{place} visits"] = len(here)
        row[f"{place} success %"] = round(_pct(len(ok), len(here)), 2) if len(here) else float("nan")
        row[f"{place} median onLoad ms"] = round(float(ok["on_load_ms"].median()), 1) if len(ok) else float("nan")
    return row


def configuration_row(labels: Labels, network: str, resolver: str, protocol: str) -> dict[str, object]:
    """A table row's first cells: the network, resolver and protocol, as the report names them."""
    return {
        "network": labels.network(network),
        "resolver": labels.resolver(resolver),
        "protocol": labels.protocol(protocol),
    }


def counted_list(counts: pd.Series) -> str:
    """ "a b (3 visits), c d (1 visit)" from counts indexed by tuples of names."""
    return ", ".join(f"{' '.join(map(str, k))} ({n} visit{'s' * (n != 1)})" for k, n in counts.items() if n)


def session_modes(visits: pd.DataFrame) -> list[str]:
    """The (browser life, resolver connection) modes in the visits, as "fresh cold", "fresh settled 3 s cold",
    "reused warm-started warm", ... (a visit's `browser_session` names its browser life: harness/visit.py)"""
    modes = visits["browser_session"].astype(str) + " " + visits["resolver_connection"].astype(str)
    return sorted(modes.unique())


def session_table(visits: pd.DataFrame, settings: AnalysisSettings) -> pd.DataFrame:
    """Per network and configuration, for each browser session and resolver connection: counted visits, median
    onLoad (ms) of Successful ones, median new resolver connections, and the share whose first query went on an
    open connection; then warm minus cold of the medians where a session mode has both."""
    labels, modes = settings.labels, session_modes(visits)
    mode_of = visits["browser_session"].astype(str) + " " + visits["resolver_connection"].astype(str)
    rows = []
    for network in _networks(visits):
        sub = visits[(visits["network"] == network) & visits["counted"].fillna(False).astype(bool)]
        for resolver, protocol in configurations(visits):
            mine = sub[(sub["resolver"] == resolver) & (sub["protocol"] == protocol)]
            if mine.empty:
                continue
            row = configuration_row(labels, network, resolver, protocol)
            medians = {}
            for mode in modes:
                here = mine[mode_of[mine.index] == mode]
                ok = here[here["error_class"] == "Successful"]
                medians[mode] = float(ok["on_load_ms"].median()) if len(ok) else float("nan")
                row[f"{mode} visits"] = len(here)
                row[f"{mode} median onLoad ms"] = round(medians[mode], 1)
                row[f"{mode} handshakes"] = float(here["resolver_handshakes"].median()) if len(here) else float("nan")
                opened = here["first_query_open"].dropna()
                row[f"{mode} first query open %"] = (
                    round(_pct(int(opened.sum()), len(opened)), 1) if len(opened) else float("nan")
                )
            for life in visits["browser_session"].astype(str).unique():
                if f"{life} warm" in medians and f"{life} cold" in medians:
                    row[f"{life}: warm - cold ms"] = round(medians[f"{life} warm"] - medians[f"{life} cold"], 1)
            rows.append(row)
    return pd.DataFrame(rows)


def success_differences(
    visits: pd.DataFrame, settings: AnalysisSettings, adjustment: str | None = None
) -> pd.DataFrame:
    """Success-rate difference of every two configurations per network, with the site as the unit: its interval
    from a bootstrap of sites (analysis.stats.rate_differences; a site measured at several vantage points is
    one unit, analysis.pairs.units), a p-value by site (analysis.significance.rate_difference_test) and that
    p-value adjusted over the whole table, one family (``adjustment``: the profile's unless told). ``differs``:
    the interval clear of zero and the adjusted p-value below 1 - confidence."""
    labels, reading = settings.labels, settings.reading()
    counted = visits[visits["error_class"].astype(str) != INFRASTRUCTURE]
    order = configurations(visits)
    rows, p_values = [], []
    for network in _networks(visits):
        successes, tallies, resamples = _site_tally(counted[counted["network"] == network], order, reading)
        pairs = list(combinations(range(len(order)), 2))
        for (a, b), (d, low, high) in zip(
            pairs, rate_differences(successes, tallies, pairs, resamples, reading), strict=True
        ):
            s1, n1, s2, n2 = successes[:, a], tallies[:, a], successes[:, b], tallies[:, b]
            p_values.append(rate_difference_test(s1, n1, s2, n2))
            rows.append(
                {
                    "network": labels.network(network),
                    "a": labels.configuration(*order[a]),
                    "b": labels.configuration(*order[b]),
                    "sites": int(np.count_nonzero(n1 + n2)),
                    "a success %": _pct(int(s1.sum()), int(n1.sum())),
                    "b success %": _pct(int(s2.sum()), int(n2.sum())),
                    "difference (a - b) pp": round(100 * d, 2),
                    "ci low pp": round(100 * low, 2),
                    "ci high pp": round(100 * high, 2),
                    "clear of zero": bool(low > 0 or high < 0),
                }
            )
    method = adjustment or settings.statistics.adjustment
    for row, p, adjusted in zip(rows, p_values, adjust(p_values, method), strict=True):
        row.update({"p_value": p, "p_adjusted": adjusted, "adjustment": method})
        row["differs"] = bool(row.pop("clear of zero") and adjusted is not None and adjusted < 1 - reading.confidence)
    return pd.DataFrame(rows)


def _site_tally(
    visits: pd.DataFrame, order: list[tuple[str, str]], reading: Reading
) -> tuple[np.ndarray, np.ndarray, Resamples]:
    """Per unit (a site, with all the vantage points that measured it: analysis.pairs.units) and configuration
    of ``order``: Successful visits and counted visits, (units, configurations) each; and the units' resamples.
    A site visited under one configuration only counts, with nothing under the other."""
    codes, strata = units(visits) if len(visits) else (np.zeros(0, dtype=int), np.zeros(0, dtype=int))
    keys = pd.MultiIndex.from_arrays([visits["resolver"].astype(str), visits["protocol"].astype(str)])
    which = pd.MultiIndex.from_tuples(order).get_indexer(keys)
    success = (visits["error_class"].astype(str) == "Successful").to_numpy(dtype=float)
    size = len(strata) * len(order)
    flat = codes * len(order) + which if len(visits) else np.zeros(0, dtype=int)
    successes = np.bincount(flat, weights=success, minlength=size).reshape(len(strata), len(order))
    tallies = np.bincount(flat, minlength=size).astype(float).reshape(len(strata), len(order))
    return successes, tallies, draw_resamples(strata, reading.resamples, reading.seed)


def without_metric(visits: pd.DataFrame, metric: Metric) -> tuple[int, int]:
    """(Successful visits without ``metric``, Successful visits): those are left out of the metric's pairs."""
    successful = visits[visits["error_class"].astype(str) == "Successful"]
    return int(successful[metric.column].isna().sum()), len(successful)


def metric_coverage(visits: pd.DataFrame, metrics: list[Metric], settings: AnalysisSettings) -> pd.DataFrame:
    """One row per (network, resolver, protocol): its Successful visits and, per metric, how many of them lack it.
    A metric the browser often fails to report under one configuration would pair that configuration on fewer,
    perhaps different, sites: this is where a reader sees it."""
    labels = settings.labels
    rows = []
    for network in _networks(visits):
        sub = visits[visits["network"] == network]
        for resolver, protocol in configurations(visits):
            mine = sub[(sub["resolver"] == resolver) & (sub["protocol"] == protocol)]
            if mine.empty:
                continue
            row: dict[str, object] = {
                **configuration_row(labels, network, resolver, protocol),
                "Successful": int((mine["error_class"].astype(str) == "Successful").sum()),
            }
            row.update({f"no {m.short}": without_metric(mine, m)[0] for m in metrics})
            rows.append(row)
    return pd.DataFrame(rows)


def failure_counts(statuses: pd.Series) -> tuple[int, int]:
    """(failed, sent) among timer records' statuses. A query is sent unless the timer refused its name
    (`invalid`, docs/timer.md): such a name says nothing about the transport, so it is in neither count."""
    status = statuses.astype(str)
    sent = int((status != NOT_SENT).sum())
    return int(status.isin(FAILED).sum()), sent


def timer_failures(timings: pd.DataFrame, settings: AnalysisSettings) -> pd.DataFrame:
    """One row per (network, resolver, protocol) of the standalone timer: queries sent, how each ended, and the
    failure rate (timeouts and errors over queries sent) with its Wilson interval. The resolution CDFs are of
    answered queries only; this is what they leave out."""
    labels, confidence = settings.labels, settings.statistics.confidence
    rows = []
    for (network, resolver, protocol), group in _timer_groups(timings):
        failed, sent = failure_counts(group["status"])
        low, high = wilson_interval(failed, sent, confidence)
        status = group["status"].astype(str)
        rows.append(
            {
                **configuration_row(labels, network, resolver, protocol),
                "sent": sent,
                **{name: int((status == name).sum()) for name in ("ok", *FAILED)},
                "failed %": _pct(failed, sent),
                "ci low %": round(100 * low, 2) if sent else float("nan"),
                "ci high %": round(100 * high, 2) if sent else float("nan"),
                f"{NOT_SENT} (not sent)": int((status == NOT_SENT).sum()),
            }
        )
    return pd.DataFrame(rows)


def timer_failure_details(timings: pd.DataFrame, settings: AnalysisSettings) -> pd.DataFrame:
    """Failed timer queries per (network, resolver, protocol), status and the record's error detail, most
    frequent first within each configuration; a record without a detail is counted as "(none)"."""
    labels = settings.labels
    rows = []
    for (network, resolver, protocol), group in _timer_groups(timings):
        failed = group[group["status"].astype(str).isin(FAILED)]
        detail = failed["error"].fillna("").astype(str).str.strip().replace("", NO_DETAIL)
        counts = failed.assign(detail=detail).groupby(["status", "detail"]).size()
        for (status, text), count in counts.sort_values(ascending=False, kind="stable").items():
            rows.append(
                {
                    **configuration_row(labels, network, resolver, protocol),
                    "status": status,
                    "error": text,
                    "queries": int(count),
                    "% of sent": _pct(int(count), failure_counts(group["status"])[1]),
                }
            )
    return pd.DataFrame(rows, columns=TIMER_DETAIL_COLUMNS)


def _timer_groups(timings: pd.DataFrame) -> list[tuple[tuple[str, str, str], pd.DataFrame]]:
    """The timer records of each (network, resolver, protocol), networks first, each in order of appearance
    (the order the resolution CDFs' legends use)."""
    if timings.empty:
        return []
    keys = timings[["network", "resolver", "protocol"]].astype(str)
    groups = list(timings.groupby([keys["network"], keys["resolver"], keys["protocol"]], sort=False))
    networks = list(dict.fromkeys(keys["network"]))
    return sorted(groups, key=lambda group: networks.index(group[0][0]))  # stable: appearance within a network


def write_table(frame: pd.DataFrame, stem: Path, caption: str) -> list[Path]:
    """The table as Markdown, CSV and LaTeX (stem.md, stem.csv, stem.tex)."""
    stem.parent.mkdir(parents=True, exist_ok=True)
    # Appended, not with_suffix: a stem may hold a dot (a life "fresh settled 2.5 s"), which is no suffix.
    paths = [stem.parent / f"{stem.name}{ext}" for ext in (".md", ".csv", ".tex")]
    paths[0].write_text(f"{caption}\n\n{frame.to_markdown(index=False)}\n")
    frame.to_csv(paths[1], index=False)
    # p-values keep two significant digits (0.0004, not 0.00); other numbers two decimals
    formatters = {c: _p_text for c in frame.columns if str(c).startswith("p_")}
    latex = frame.to_latex(index=False, caption=caption, float_format="%.2f", escape=True, formatters=formatters)
    paths[2].write_text(latex)
    return paths


def _networks(visits: pd.DataFrame) -> list[str]:
    return list(dict.fromkeys(visits["network"].astype(str)))


def _pct(s: int, n: int) -> float:
    return round(100 * s / n, 2) if n else float("nan")


def _p_text(value: object) -> str:
    """A p-value in LaTeX: two significant digits, blank where there is none."""
    return "" if not isinstance(value, int | float) or value != value else f"{value:.2g}"
