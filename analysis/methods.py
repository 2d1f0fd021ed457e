"""How the report names its statistical methods: which adjustment it uses, and the sentences that say so.

A grid's verdicts are adjusted together by the method its crawl's study
names (`[analysis] multiple_comparisons`, recorded in the store before the
first visit, so it cannot be chosen after the p-values are seen), else by
the analysis profile's (`[statistics] adjustment`, Holm). Figures, captions
and the report's summary all take their wording from here, so they cannot
disagree about what was done.
"""

from __future__ import annotations

from analysis.significance import ADJUSTMENT_NAMES, ADJUSTMENTS, HOLM
from analysis.stats import PairStatistics, Reading


def choose_adjustment(study_options: dict[str, dict], default: str) -> tuple[str, str]:
    """The adjustment for the crawls read together, and where it comes from. Studies that name different
    methods are read with Holm's, the stricter (it controls the family-wise rate, which bounds the other)."""
    named = {study: o["multiple_comparisons"] for study, o in study_options.items() if o.get("multiple_comparisons")}
    if not named:
        return default, "the analysis profile's default"
    if len(named) < len(study_options):  # a study that names none is read with the profile's default
        named |= {study: default for study in study_options if study not in named}
    methods = set(named.values())
    if len(methods) == 1:
        method = methods.pop()
        return method, f"the study's choice ({', '.join(sorted(named))})"
    listing = ", ".join(f"{s}: {ADJUSTMENT_NAMES[m]}" for s, m in sorted(named.items()))
    return HOLM, f"the stricter of the studies' choices ({listing})"


def family_sentence(family: list[PairStatistics], reading: Reading) -> str:
    """'directions (faster, slower) Holm-adjusted over the 45 pairs of this grid (family-wise error rate 5 %);
    ...', or why not."""
    tested = [st for st in family if st.adjustment is not None and st.family_size > 0]
    if not tested:
        return "no pair has enough pairs for a verdict"
    method, size = tested[0].adjustment, tested[0].family_size
    assert method is not None
    rate = ADJUSTMENTS[method]
    return (
        f"directions (faster, slower) {ADJUSTMENT_NAMES[method]}-adjusted over the {size} "
        f"pair{'s' if size != 1 else ''} of this grid ({rate} {1 - reading.confidence:.0%}); "
        "'indistinguishable' is read from each pair's own interval, unadjusted"
    )


def interval_sentence(family: list[PairStatistics], reading: Reading) -> str:
    """What the intervals of a grid resampled: sites (how many cells) or pairs, and how they are read."""
    units = [st.resampled for st in family if st.resampled]
    kind = "expanded percentiles (Hesterberg)" if reading.interval == "expanded" else "plain percentiles"
    how = f"{reading.confidence:.0%} intervals, {reading.resamples:,} bootstrap resamples, {kind}"
    if not units:
        return f"{how}; no pair has an interval"
    sites, pairs = units.count("site"), units.count("pair")
    if not pairs:
        return f"{how}; sites resampled with all their rounds (and vantage points, a site at several one unit)"
    if not sites:
        return f"{how}; every site has one pair per cell, so resampling sites is resampling pairs"
    return (
        f"{how}; sites resampled with all their rounds in {sites} pairs, single pairs in {pairs} "
        f"where every site has one (the resampled column says which)"
    )
