"""Paper-style figures (matplotlib/seaborn): resolution CDFs, the pairwise grid, protocol against protocol, byte
cost, and each arm's difference from Do53 per browser.

Every figure takes frames read from a store and returns a matplotlib
Figure; `analysis.report` saves them. One colour per protocol throughout,
configurations labelled as a reader says them ("Cloudflare DoT").
"""

from __future__ import annotations

import textwrap
from itertools import combinations

import matplotlib

matplotlib.use("Agg")  # files only: no display on a crawl host
import matplotlib.patches  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from analysis.bytecost import MODELLED, client_bytes  # noqa: E402
from analysis.methods import family_sentence, interval_sentence  # noqa: E402
from analysis.metrics import ONLOAD, Metric, get_metric  # noqa: E402
from analysis.pairs import (  # noqa: E402
    Cell,
    Configuration,
    configurations,
    differences,
    load_time_table,
    protocol_order,
)
from analysis.settings import AnalysisSettings  # noqa: E402
from analysis.stats import DAGGER, PairStatistics  # noqa: E402
from analysis.tables import failure_counts  # noqa: E402

LINESTYLES = ["-", "--", ":", "-."]
SLOWER, FASTER = "#c0392b", "#2471a3"  # the row is slower (red) or faster (blue) than the column
DISAGREE = "#7d3c98"  # frames a cell whose median and mean disagree in sign: neither red nor blue
CDF_POINTS = 400  # a CDF is drawn through this many quantiles at most
SHADE_ALPHAS = [0.0, 0.18, 0.38, 0.6]  # a grid cell's shade by the median's size (stats.shade_of: 0 to 3)
BASELINE = "do53"  # what the browser figure subtracts: the transport every resolver serves
HATCHES = ["", "//", "..", "xx"]  # one per browser in the browser figure

sns.set_theme(style="whitegrid", context="paper")


def _ecdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted values and their cumulative share, thinned to quantiles for large samples."""
    x = np.sort(np.asarray(values, dtype=float))
    if len(x) > CDF_POINTS:
        q = np.linspace(0, 1, CDF_POINTS)
        return np.quantile(x, q), q
    return x, np.arange(1, len(x) + 1) / len(x)


def resolution_cdf(timings: pd.DataFrame, network: str, settings: AnalysisSettings) -> plt.Figure:
    """CDF of resolution times per resolver and protocol on one network (the reference study's Figs. 1 and 3).

    The CDF is of answered queries only, so each legend entry gives the configuration's failure rate and the
    queries sent beside it (a configuration that never answered keeps its entry, with no line): a protocol
    that fails often cannot look fast by losing its slow queries.
    """
    labels = settings.labels
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    sub = timings[timings["network"] == network]
    resolvers = list(dict.fromkeys(sub["resolver"]))
    for (resolver, protocol), group in sub.groupby(["resolver", "protocol"], sort=False):
        ok = group[group["status"] == "ok"]["duration_us"].dropna().to_numpy() / 1000
        x, y = _ecdf(ok) if len(ok) else (np.empty(0), np.empty(0))
        ax.plot(
            x,
            y,
            color=labels.colour(protocol),
            linestyle=LINESTYLES[resolvers.index(resolver) % 4],
            label=f"{labels.configuration(resolver, protocol)} ({_failure_note(group['status'])})",
        )
    ax.set_xscale("log")
    ax.set_xlabel("resolution time (ms, log scale)")
    ax.set_ylabel("CDF of answered queries")
    ax.set_title(f"Resolution time, {labels.network(network)} (standalone timer)")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def _failure_note(statuses: pd.Series) -> str:
    """'failed 3.1 %, n=1,234' for a legend: the share of sent queries that timed out or failed."""
    failed, sent = failure_counts(statuses)
    if not sent:
        return "no query sent"
    return f"failed {100 * failed / sent:.1f} %, n={sent:,}"


def grid_figure(cells: list[Cell], order: list[Configuration], network: str, settings: AnalysisSettings) -> plt.Figure:
    """The pairwise grid: below the diagonal, CDFs of row - column with the median marked and the cell shaded by
    the median's sign and size; above it, each pair's statistics. The title names the cells' metric."""
    labels, thresholds, large = settings.labels, settings.grid.thresholds_ms, settings.grid.large_difference_ms
    metric = get_metric(cells[0].metric) if cells else ONLOAD
    n = len(order)
    fig, axes = plt.subplots(n, n, figsize=(1.9 * n + 1, 1.7 * n + 1.2), squeeze=False)
    by_pair = {(c.row, c.column): c for c in cells}
    for i, row in enumerate(order):
        for j, column in enumerate(order):
            ax = axes[i][j]
            ax.set_xticks([])
            ax.set_yticks([])
            if i == j:
                ax.text(
                    0.5,
                    0.5,
                    labels.configuration(*row),
                    ha="center",
                    va="center",
                    fontsize=8,
                    weight="bold",
                    color=labels.colour(row[1]),
                )
                ax.set_facecolor("#f4f4f4")
                continue
            cell = by_pair[(row, column)]
            st = cell.statistics
            if i > j:
                _draw_difference_cdf(ax, cell)
            else:
                ax.text(0.5, 0.5, _cell_text(st, large), ha="center", va="center", fontsize=5.5)
            if st.sign_disagrees:
                _outline(ax)
    for j, column in enumerate(order):
        axes[-1][j].set_xlabel(labels.configuration(*column), fontsize=7)
    for i, row in enumerate(order):
        axes[i][0].set_ylabel(labels.configuration(*row), fontsize=7)
    fig.suptitle(
        f"{labels.network(network)}: paired {metric.label} times, row minus column (s). "
        f"Dashed: median, dotted: mean.\n"
        f"Red: row slower, blue: row faster, by the median; shade past {', '.join(f'{t:g}' for t in thresholds)} ms."
        f"\n{DAGGER} and a dashed purple frame: the median and the mean disagree in sign.\n"
        + _methods_note(cells, order, settings, width=int(fig.get_figwidth() * 15)),
        fontsize=8,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.9))
    return fig


def _methods_note(cells: list[Cell], order: list[Configuration], settings: AnalysisSettings, width: int) -> str:
    """How the grid's intervals and verdicts were made (analysis/methods.py), wrapped to ``width`` characters."""
    by_pair = {(c.row, c.column): c.statistics for c in cells}
    family = [by_pair[(row, column)] for i, row in enumerate(order) for column in order[i + 1 :]]
    reading = settings.reading()
    text = f"{interval_sentence(family, reading)}; p: sign test by site; {family_sentence(family, reading)}."
    return textwrap.fill(text[0].upper() + text[1:], width=max(width, 60))


def _draw_difference_cdf(ax: plt.Axes, cell: Cell) -> None:
    """A cell below the diagonal: the CDF of row - column (s), median dashed, mean dotted, shaded by the median."""
    st = cell.statistics
    if len(cell.differences):
        x, y = _ecdf(cell.differences / 1000)
        ax.plot(x, y, color="black", linewidth=0.9)
        ax.axvline(0, color="grey", linewidth=0.5)
        if st.median_ms is not None:
            ax.axvline(st.median_ms / 1000, color="black", linestyle="--", linewidth=0.8)
        if st.mean_ms is not None:
            ax.axvline(st.mean_ms / 1000, color="black", linestyle=":", linewidth=0.9)
        ax.set_xlim(*_symmetric(cell.differences / 1000))
        ax.tick_params(labelsize=5)
        ax.set_xticks(np.round(np.linspace(*_symmetric(cell.differences / 1000), 3), 2))
    if st.median_ms is not None and st.shade:
        ax.set_facecolor(matplotlib.colors.to_rgba(SLOWER if st.median_ms > 0 else FASTER, SHADE_ALPHAS[st.shade]))


def _cell_text(st: PairStatistics, large_ms: float) -> str:
    """A cell's statistics, compactly: pairs, sites and p (adjusted), median [interval] and Hodges-Lehmann,
    mean [interval], p10/p90, the large-difference shares, the verdict; the dagger goes on the mean and the
    verdict when the two disagree."""
    if st.median_ms is None:
        return "no pairs"
    mark = f" {DAGGER}" if st.sign_disagrees else ""
    interval = "" if st.ci_low_ms is None else f" [{st.ci_low_ms:+.0f}, {st.ci_high_ms:+.0f}]"
    mean_interval = "" if st.mean_ci_low_ms is None else f" [{st.mean_ci_low_ms:+.0f}, {st.mean_ci_high_ms:+.0f}]"
    p = ""
    if st.p_value is not None:
        p = f", p={st.p_value:.2g}" + (f" (adj. {st.p_adjusted:.2g})" if st.family_size > 1 else "")
    return (
        f"n={st.pairs}, {st.sites} sites{p}\n"
        f"median {st.median_ms:+.0f}{interval} ms\n"
        f"HL {st.hodges_lehmann_ms:+.0f}, mean {st.mean_ms:+.0f}{mean_interval} ms{mark}\n"
        f"p10 {st.p10_ms:+.0f}, p90 {st.p90_ms:+.0f} ms\n"
        f">{duration_label(large_ms)}: slower {st.share_row_slower:.0%}, faster {st.share_row_faster:.0%}\n"
        f"{st.verdict}{mark}"
    )


def duration_label(ms: float) -> str:
    """1000 -> '1 s', 250 -> '250 ms'."""
    return f"{ms / 1000:g} s" if ms >= 1000 else f"{ms:g} ms"


def _outline(ax: plt.Axes) -> None:
    """Frame a cell whose median and mean disagree in sign (its shade, from the median, is left as it is)."""
    for spine in ax.spines.values():
        spine.set_visible(True)
        spine.set_edgecolor(DISAGREE)
        spine.set_linewidth(1.6)
        spine.set_linestyle("--")


def _symmetric(values: np.ndarray) -> tuple[float, float]:
    lo, hi = np.quantile(values, [0.02, 0.98]) if len(values) else (-1.0, 1.0)
    edge = max(abs(lo), abs(hi), 0.05)
    return -edge, edge


def protocol_figure(
    visits: pd.DataFrame, resolver: str, settings: AnalysisSettings, metric: Metric | str = ONLOAD
) -> plt.Figure:
    """Per network, protocol against protocol for one resolver (the reference study's Fig. 4), paired on
    ``metric`` (onLoad, the paper's, unless told)."""
    labels, metric = settings.labels, get_metric(metric)
    networks = list(dict.fromkeys(visits["network"].astype(str)))
    protocols = [
        p for p in protocol_order(visits) if ((visits["resolver"] == resolver) & (visits["protocol"] == p)).any()
    ]
    fig, axes = plt.subplots(1, len(networks), figsize=(3.2 * len(networks), 3.0), squeeze=False, sharey=True)
    for ax, network in zip(axes[0], networks, strict=True):
        table = load_time_table(visits, network, metric)
        for later, earlier in [(b, a) for a, b in combinations(protocols, 2)]:
            d = differences(table, (resolver, later), (resolver, earlier)) / 1000
            if not len(d):
                continue
            x, y = _ecdf(d)
            ax.plot(
                x,
                y,
                color=labels.colour(later),
                linestyle="-" if earlier == protocols[0] else "--",
                label=f"{labels.protocol(later)} - {labels.protocol(earlier)} (n={len(d)})",
            )
        ax.axvline(0, color="grey", linewidth=0.6)
        ax.set_title(labels.network(network))
        ax.set_xlabel(f"{metric.short} difference (s)")
        ax.legend(fontsize=6, loc="lower right")
    axes[0][0].set_ylabel("CDF of sites")
    fig.suptitle(
        f"{labels.resolver(resolver)}: {metric.label}, protocol against protocol, paired by site and round", fontsize=9
    )
    fig.tight_layout()
    return fig


def byte_cost_figure(sizes: dict[str, int], settings: AnalysisSettings, max_queries: int = 50) -> plt.Figure:
    """Bytes the client sends for r queries over one connection, per protocol."""
    labels = settings.labels
    r = np.arange(1, max_queries + 1)
    fig, ax = plt.subplots(figsize=(5.2, 3.4))
    for protocol in MODELLED:
        ax.plot(
            r,
            [client_bytes(protocol, int(q), sizes) / 1000 for q in r],
            color=labels.colour(protocol),
            label=labels.protocol(protocol),
        )
    ax.set_xlabel("queries r over one connection")
    ax.set_ylabel("bytes sent by the client (kB)")
    ax.set_title("Byte-cost model (profiles/analysis/byte-cost.toml)")
    ax.legend()
    fig.tight_layout()
    return fig


def browser_figure(visits: pd.DataFrame, settings: AnalysisSettings, metric: Metric | str = ONLOAD) -> plt.Figure:
    """Each arm's paired difference from its resolver's Do53, in each browser side by side, per network.

    A box per (arm, browser): the quartiles and the median of arm minus Do53, paired by site and round within
    the browser (never across browsers); whiskers at the 5th and 95th percentiles. The two browsers of an arm
    stand next to each other, one hatched, in the arm's protocol colour."""
    labels, metric = settings.labels, get_metric(metric)
    networks = list(dict.fromkeys(visits["network"].astype(str)))
    browsers = sorted(visits["browser"].astype(str).unique(), key=lambda b: (b != "firefox", b))  # Firefox solid
    arms = [c for c in configurations(visits) if c[1] != BASELINE and (c[0], BASELINE) in configurations(visits)]
    width = 0.8 / max(len(browsers), 1)
    fig, axes = plt.subplots(
        1, len(networks), figsize=(max(3.2, 1.1 * len(arms) + 1.5) * len(networks), 3.4), squeeze=False
    )
    for ax, network in zip(axes[0], networks, strict=True):
        for j, browser in enumerate(browsers):
            table = load_time_table(visits[visits["browser"].astype(str) == browser], network, metric)
            for i, (resolver, protocol) in enumerate(arms):
                d = differences(table, (resolver, protocol), (resolver, BASELINE))
                if not len(d):
                    continue
                box = ax.boxplot(
                    d, positions=[i + (j - (len(browsers) - 1) / 2) * width], widths=width * 0.9,
                    whis=(5, 95), showfliers=False, patch_artist=True, medianprops={"color": "black", "gid": "median"},
                )  # fmt: skip
                box["boxes"][0].set(facecolor=labels.colour(protocol), hatch=HATCHES[j % len(HATCHES)], alpha=0.8)
        ax.axhline(0, color="grey", linewidth=0.6)
        ax.set_xticks(range(len(arms)), [labels.configuration(*a) for a in arms], rotation=30, ha="right", fontsize=7)
        ax.set_title(labels.network(network))
        ax.set_ylabel(f"{metric.short} minus {labels.protocol(BASELINE)} (ms)")
    handles = [
        matplotlib.patches.Patch(facecolor="white", edgecolor="black", hatch=HATCHES[j % len(HATCHES)], label=b)
        for j, b in enumerate(labels.browser(b) for b in browsers)
    ]
    axes[0][-1].legend(handles=handles, fontsize=7, loc="upper right")
    fig.suptitle(f"{metric.label}: each arm minus its resolver's Do53, per browser (paired by site and round)")
    fig.tight_layout()
    return fig
