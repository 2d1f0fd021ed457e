"""Paper-style figures (matplotlib/seaborn): resolution CDFs, the pairwise grid, protocol against protocol, byte cost.

Every figure takes frames read from a store and returns a matplotlib
Figure; `analysis.report` saves them. One colour per protocol throughout,
configurations labelled as a reader says them ("Cloudflare DoT").
"""

from __future__ import annotations

from itertools import combinations

import matplotlib

matplotlib.use("Agg")  # files only: no display on a crawl host
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402

from analysis.bytecost import MODELLED, client_bytes  # noqa: E402
from analysis.pairs import Cell, Configuration, differences, load_time_table, protocol_order  # noqa: E402
from analysis.settings import AnalysisSettings  # noqa: E402

LINESTYLES = ["-", "--", ":", "-."]
SLOWER, FASTER = "#c0392b", "#2471a3"  # the row is slower (red) or faster (blue) than the column
CDF_POINTS = 400  # a CDF is drawn through this many quantiles at most

sns.set_theme(style="whitegrid", context="paper")


def _ecdf(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted values and their cumulative share, thinned to quantiles for large samples."""
    x = np.sort(np.asarray(values, dtype=float))
    if len(x) > CDF_POINTS:
        q = np.linspace(0, 1, CDF_POINTS)
        return np.quantile(x, q), q
    return x, np.arange(1, len(x) + 1) / len(x)


def resolution_cdf(timings: pd.DataFrame, network: str, settings: AnalysisSettings) -> plt.Figure:
    """CDF of resolution times per resolver and protocol on one network (the reference study's Figs. 1 and 3)."""
    labels = settings.labels
    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    sub = timings[timings["network"] == network]
    resolvers = list(dict.fromkeys(sub["resolver"]))
    for (resolver, protocol), group in sub.groupby(["resolver", "protocol"], sort=False):
        ok = group[group["status"] == "ok"]["duration_us"].dropna().to_numpy() / 1000
        failed = len(group) - len(ok)
        if not len(ok):
            continue
        x, y = _ecdf(ok)
        note = f" ({failed} failed)" if failed else ""
        ax.plot(
            x,
            y,
            color=labels.colour(protocol),
            linestyle=LINESTYLES[resolvers.index(resolver) % 4],
            label=f"{labels.configuration(resolver, protocol)}{note}",
        )
    ax.set_xscale("log")
    ax.set_xlabel("resolution time (ms, log scale)")
    ax.set_ylabel("CDF of queries")
    ax.set_title(f"Resolution time, {labels.network(network)} (standalone timer)")
    ax.legend(fontsize=7, loc="lower right")
    fig.tight_layout()
    return fig


def grid_figure(cells: list[Cell], order: list[Configuration], network: str, settings: AnalysisSettings) -> plt.Figure:
    """The pairwise grid: below the diagonal, CDFs of row - column with the median marked and the cell shaded by
    the median's sign and size; above it, each pair's statistics."""
    labels, thresholds = settings.labels, settings.grid.thresholds_ms
    n = len(order)
    fig, axes = plt.subplots(n, n, figsize=(1.9 * n + 1, 1.6 * n + 1), squeeze=False)
    by_pair = {(c.row, c.column): c for c in cells}
    alphas = [0.0, 0.18, 0.38, 0.6]
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
                if len(cell.differences):
                    x, y = _ecdf(cell.differences / 1000)
                    ax.plot(x, y, color="black", linewidth=0.9)
                    ax.axvline(0, color="grey", linewidth=0.5)
                    if st.median_ms is not None:
                        ax.axvline(st.median_ms / 1000, color="black", linestyle="--", linewidth=0.8)
                    ax.set_xlim(*_symmetric(cell.differences / 1000))
                    ax.tick_params(labelsize=5)
                    ax.set_xticks(np.round(np.linspace(*_symmetric(cell.differences / 1000), 3), 2))
                if st.median_ms is not None and st.shade:
                    ax.set_facecolor(
                        matplotlib.colors.to_rgba(SLOWER if st.median_ms > 0 else FASTER, alphas[st.shade])
                    )
            else:
                ax.text(0.5, 0.5, _cell_text(st), ha="center", va="center", fontsize=5.5)
    for j, column in enumerate(order):
        axes[-1][j].set_xlabel(labels.configuration(*column), fontsize=7)
    for i, row in enumerate(order):
        axes[i][0].set_ylabel(labels.configuration(*row), fontsize=7)
    fig.suptitle(
        f"{labels.network(network)}: paired page-load time, row minus column (s). Dashed: median. "
        f"Red: row slower, blue: row faster; shade past {', '.join(f'{t:g}' for t in thresholds)} ms",
        fontsize=8,
    )
    fig.tight_layout(rect=(0, 0, 1, 0.97))
    return fig


def _cell_text(st) -> str:
    if st.median_ms is None:
        return "no pairs"
    if st.ci_low_ms is None:
        return f"n={st.pairs}\nmedian {st.median_ms:+.0f} ms\ntoo few pairs"
    return (
        f"n={st.pairs}\nmedian {st.median_ms:+.0f} ms\n95% CI [{st.ci_low_ms:+.0f}, {st.ci_high_ms:+.0f}]\n"
        f"p={st.wilcoxon_p:.2g}\n{st.verdict}"
    )


def _symmetric(values: np.ndarray) -> tuple[float, float]:
    lo, hi = np.quantile(values, [0.02, 0.98]) if len(values) else (-1.0, 1.0)
    edge = max(abs(lo), abs(hi), 0.05)
    return -edge, edge


def protocol_figure(visits: pd.DataFrame, resolver: str, settings: AnalysisSettings) -> plt.Figure:
    """Per network, protocol against protocol for one resolver (the reference study's Fig. 4)."""
    labels = settings.labels
    networks = list(dict.fromkeys(visits["network"].astype(str)))
    protocols = [
        p for p in protocol_order(visits) if ((visits["resolver"] == resolver) & (visits["protocol"] == p)).any()
    ]
    fig, axes = plt.subplots(1, len(networks), figsize=(3.2 * len(networks), 3.0), squeeze=False, sharey=True)
    for ax, network in zip(axes[0], networks, strict=True):
        table = load_time_table(visits, network)
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
        ax.set_xlabel("page-load time difference (s)")
        ax.legend(fontsize=6, loc="lower right")
    axes[0][0].set_ylabel("CDF of sites")
    fig.suptitle(f"{labels.resolver(resolver)}: protocol against protocol, paired by site and round", fontsize=9)
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
