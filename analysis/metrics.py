"""The page-load metrics a grid can be drawn for: each a column of the store's `visits` table (docs/store.md).

The analysis profile names which ones to draw (`[grid] metrics`). Every
metric is in milliseconds from navigation start, as the browser reported
it, and missing (NULL, read as NaN) when it reported none and for every
visit that was not Successful.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Metric:
    """One paired quantity: where it is in the store and how figures and tables name it."""

    name: str  # the profile's name for it, and the tag in file names ("fcp")
    column: str  # its column in `visits`
    label: str  # in titles and captions ("First Contentful Paint")
    short: str  # in axis labels and compact text ("FCP")
    unit: str = "ms"


#: The paper's metric: the reference study paired onLoad times.
ONLOAD = Metric("onload", "on_load_ms", "onLoad", "onLoad")

#: Every metric the analysis knows, in the order the docs list them.
METRICS: dict[str, Metric] = {
    m.name: m
    for m in (
        ONLOAD,
        Metric("fcp", "fcp_ms", "First Contentful Paint", "FCP"),
        Metric("lcp", "lcp_ms", "Largest Contentful Paint", "LCP"),
        Metric("dcl", "dcl_ms", "DOMContentLoaded", "DCL"),
    )
}


def get_metric(metric: Metric | str) -> Metric:
    """The registered metric of that name (a Metric is returned as it is); KeyError names the known ones."""
    if isinstance(metric, Metric):
        return metric
    try:
        return METRICS[metric]
    except KeyError:
        raise KeyError(f"unknown metric '{metric}' (known: {', '.join(METRICS)})") from None


def unknown(names: list[str]) -> list[str]:
    """The names among ``names`` that are not registered metrics, in their order."""
    return [n for n in names if n not in METRICS]


def file_stem(kind: str, metric: Metric, key: str) -> str:
    """A per-metric output's name: 'grid-wired' for onLoad (the names the paper's figures have always had,
    which other code and notebooks open), 'grid-fcp-wired' for any other metric."""
    return f"{kind}-{key}" if metric == ONLOAD else f"{kind}-{metric.name}-{key}"
