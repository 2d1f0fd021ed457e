"""A grid's pairs as the report lists them beside its figure: every pair's statistics, and the pairs whose
median and mean disagree in sign (analysis/report.py places them)."""

from __future__ import annotations

import html

import pandas as pd

from analysis import figures
from analysis.formats import ms_interval, number, share
from analysis.pairs import Cell, Configuration
from analysis.settings import AnalysisSettings
from analysis.stats import DAGGER, verdict_text


def once(cells: list[Cell]) -> list[Cell]:
    """Each unordered pair once, as the grid's upper triangle shows it (the first of the two orders met)."""
    seen: set[tuple[Configuration, Configuration]] = set()
    first = []
    for c in cells:
        if (c.column, c.row) not in seen:
            first.append(c)
        seen.add((c.row, c.column))
    return first


def verdicts_table(cells: list[Cell], settings: AnalysisSettings) -> str:
    """Every pair's statistics as an HTML table, effect sizes beside the verdict; a verdict whose median and
    mean disagree says so."""
    large, labels = figures.duration_label(settings.grid.large_difference_ms), settings.labels
    rows = []
    for c in once(cells):
        st = c.statistics
        rows.append(
            {
                "row": labels.configuration(*c.row),
                "column": labels.configuration(*c.column),
                "pairs": st.pairs,
                "sites": st.sites,
                "median_ms": st.median_ms,
                "ci_low_ms": st.ci_low_ms,
                "ci_high_ms": st.ci_high_ms,
                "hodges_lehmann_ms": st.hodges_lehmann_ms,
                "mean_ms": st.mean_ms,
                "mean interval ms": ms_interval(st.mean_ci_low_ms, st.mean_ci_high_ms),
                "p10_ms": st.p10_ms,
                "p90_ms": st.p90_ms,
                f"row slower >{large} % [interval]": share(
                    st.share_row_slower, st.share_row_slower_ci_low, st.share_row_slower_ci_high
                ),
                f"row faster >{large} % [interval]": share(
                    st.share_row_faster, st.share_row_faster_ci_low, st.share_row_faster_ci_high
                ),
                "resampled": st.resampled,
                "p_value": st.p_value,
                "p_adjusted": st.p_adjusted,
                "verdict": verdict_text(st),
            }
        )
    frame = pd.DataFrame(rows)
    formats = {c: number("{:+.0f}") for c in frame.columns if c.endswith("_ms")}
    formats.update({c: number("{:.2g}") for c in ("p_value", "p_adjusted")})
    return (
        "<details><summary>statistics of every pair</summary>"
        + frame.to_html(index=False, formatters=formats)
        + "</details>"
    )


def disagreements(cells: list[Cell], settings: AnalysisSettings) -> str:
    """A paragraph naming every pair whose median and mean disagree in sign, so that the grid's red or blue
    (the median's) is not read alone; empty when there is none."""
    flagged = [c for c in once(cells) if c.statistics.sign_disagrees]
    if not flagged:
        return ""
    labels, large = settings.labels, figures.duration_label(settings.grid.large_difference_ms)
    items = []
    for c in flagged:
        st = c.statistics
        interval = "" if st.ci_low_ms is None else f" [{st.ci_low_ms:+.0f}, {st.ci_high_ms:+.0f}]"
        items.append(
            f"<li>{html.escape(labels.configuration(*c.row))} minus {html.escape(labels.configuration(*c.column))}"
            f": median {st.median_ms:+.0f} ms{interval} ({st.verdict}), but mean {st.mean_ms:+.0f} ms; "
            f"the row is slower by more than {large} in {st.share_row_slower:.0%} of {st.pairs} pairs "
            f"and faster by more than {large} in {st.share_row_faster:.0%}.</li>"
        )
    return (
        f'<div class="disagree"><p>{DAGGER} The median and the mean disagree in sign in {len(flagged)} '
        f"pair{'s' if len(flagged) > 1 else ''} (framed in the grid): the differences are skewed or have two "
        f"modes, and the verdict and the shade, read from the median, do not describe them alone.</p>"
        f"<ul>{''.join(items)}</ul></div>"
    )
