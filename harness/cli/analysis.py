"""`dnsstudy analyze` and `export`: the reading side, from stores to figures, tables and files."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from harness.cli.common import console, one_line_errors
from harness.errors import HarnessError

if TYPE_CHECKING:
    from analysis.power import CellPower
    from harness.study import LoadedStudy


#: `--profile`, the analysis profile, as every reading command takes it.
profile_option = click.option(
    "--profile",
    "analysis_profile",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Analysis profile (default profiles/analysis/paper-2019.toml).",
)


@click.command("analyze")
@click.argument("stores", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Output directory (default: 'report' beside the first store).",
)
@profile_option
@one_line_errors
def analyze(stores: tuple[Path, ...], out: Path | None, analysis_profile: Path | None) -> None:
    """Figures (PNG, PDF), tables (Markdown, CSV, LaTeX) and report.html from one or more results stores."""
    write_report(list(stores), out or stores[0].parent / "report", analysis_profile)


def write_report(stores: list[Path], out: Path, analysis_profile: Path | None = None) -> Path:
    """Run the analysis and say where its report is; its errors become one-line HarnessErrors."""
    from analysis.report import ResultsError
    from analysis.report import analyze as run_analysis
    from analysis.settings import DEFAULT_PROFILE

    try:
        report = run_analysis(stores, out, analysis_profile or DEFAULT_PROFILE)
    except (ResultsError, ValueError) as exc:
        raise HarnessError(str(exc)) from None
    console.print(
        f"analysis: {len(report.figures)} figure files, {len(report.tables)} table files in "
        f"{report.seconds:.1f} s; open {report.html}"
    )
    return report.html


@click.command("export")
@click.argument("store", type=click.Path(path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Output directory.")
@click.option("--format", "fmt", default="parquet", show_default=True, type=click.Choice(["parquet", "csv"]))
@one_line_errors
def export(store: Path, out: Path, fmt: str) -> None:
    """Write every table of STORE as Parquet or CSV files."""
    from analysis.export import export as export_tables
    from analysis.results import ResultsError

    try:
        paths = export_tables(store, out, fmt)
    except ResultsError as exc:
        raise HarnessError(str(exc)) from None
    console.print(f"wrote {', '.join(p.name for p in paths)} to {out}")


@click.command("claims")
@click.argument("stores", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--source",
    "sources",
    multiple=True,
    help="A prior study's claims, by its file's name under profiles/claims/ (repeat; default: every source).",
)
@click.option(
    "--map",
    "maps",
    multiple=True,
    metavar="NAME=STORE_NAME",
    help="Read a claim's resolver or network NAME as the stores' STORE_NAME (repeat; over the studies' claims_map).",
)
@click.option(
    "--bench",
    type=click.Path(file_okay=False, path_type=Path),
    help="A `dnsstudy bench --results` directory: handshake and loss-sweep claims read its tables.",
)
@profile_option
@one_line_errors
def claims(
    stores: tuple[Path, ...],
    sources: tuple[str, ...],
    maps: tuple[str, ...],
    bench: Path | None,
    analysis_profile: Path | None,
) -> None:
    """Prior studies' claims checked against STORES: per claim the source's figure, the stores' with its 95 %
    interval, and a verdict (holds, contradicted, inconclusive, not measured) with the names it mapped."""
    from analysis.claim_files import load_sources
    from analysis.claim_report import lines
    from analysis.claims import check_claims
    from analysis.results import ResultsError, load
    from analysis.settings import DEFAULT_PROFILE, load_settings

    overrides = parse_maps(maps)
    try:
        chosen = load_sources(list(sources) or None)
        settings = load_settings(analysis_profile or DEFAULT_PROFILE)
        report = check_claims(load(list(stores)), settings, chosen, overrides, bench)
    except (ResultsError, ValueError) as exc:
        raise HarnessError(str(exc)) from None
    for line in lines(report, chosen):
        console.print(line, markup=False, highlight=False, soft_wrap=True)


def parse_maps(maps: tuple[str, ...]) -> dict[str, str]:
    """`--map cloudflare=far` options as {"cloudflare": "far"}; a malformed one is a one-line error."""
    parsed = {}
    for item in maps:
        name, sep, target = item.partition("=")
        if not sep or not name.strip() or not target.strip():
            raise HarnessError(f"--map {item!r}: expected NAME=STORE_NAME (e.g. cloudflare=far)")
        parsed[name.strip().lower()] = target.strip()
    return parsed


def plan_power(
    loaded: LoadedStudy, pilots: list[Path], difference_ms: float | None, analysis_profile: Path | None = None
) -> tuple[list[CellPower], str]:
    """What each cell of a study's plan can detect (analysis/power.py), from ``pilots``' pairs where they have
    the cell, else from the analysis profile's spreads; and where those spreads come from. Errors become
    one-line HarnessErrors."""
    from analysis.power import Plan, study_power
    from analysis.results import ResultsError, load
    from analysis.settings import DEFAULT_PROFILE, load_settings

    s = loaded.study
    try:
        settings = load_settings(analysis_profile or DEFAULT_PROFILE)
        confidence = settings.statistics.confidence
        plan = Plan(sites=len(loaded.sites), rounds=s.rounds, confidence=confidence, places=len(s.places))
        visits = load(pilots).visits if pilots else None
        cells = study_power(s.networks, s.configurations, plan, settings, visits, difference_ms)
    except (ResultsError, ValueError) as exc:
        raise HarnessError(str(exc)) from None
    return cells, settings.power.source if settings.power else ""


def power_lines(cells: list[CellPower], profile_source: str) -> list[str]:
    """The plan, then per network what its pairs detect: one line when every pair reads the same spread, else
    a line per pair; with a difference asked about, the rounds and sites that detect it."""
    if not cells:
        return ["no pair of configurations to compare"]
    plan = cells[0].plan
    places = f", each at {plan.places} vantage points (one unit with all its pairs)" if plan.places > 1 else ""
    lines = [
        f"plan: {plan.sites:,} sites{places}, {plan.rounds} round(s), {plan.family} pairs per grid; "
        f"power {plan.power:.0%} of the verdict's test (the sign test by site) at {1 - plan.confidence:g}/"
        f"{plan.family}: Holm's first step, and Benjamini-Hochberg's when no other pair differs; other pairs "
        f"that differ make either less strict, so the power is at least this"
    ]
    for network in dict.fromkeys(c.network for c in cells):
        mine = [c for c in cells if c.network == network]
        if len({(c.source, c.detectable_ms, c.rounds_needed, c.sites_needed) for c in mine}) == 1:
            lines.append(f"{network}: every pair {_detects(mine[0])} ({mine[0].source})")
            continue
        lines.append(f"{network}:")
        lines += [f"  {'/'.join(c.row)} - {'/'.join(c.column)}: {_detects(c)} ({c.source})" for c in mine]
    if any(c.source.startswith("profile") for c in cells):
        lines.append(f"profile spreads: {profile_source}. A pilot store (--pilot) measures them instead.")
    return lines


def _detects(cell: CellPower) -> str:
    """'detects 48 ms; 30 ms needs 3 rounds (or 5,200 sites)'."""
    text = "detects nothing under 1,000 s" if cell.detectable_ms is None else f"detects {cell.detectable_ms:.0f} ms"
    if cell.difference_ms is None:
        return text
    rounds = (
        f"{cell.rounds_needed} round(s)"
        if cell.rounds_needed is not None
        else f"more sites (no number of rounds suffices with {cell.plan.sites:,})"
    )
    sites = f"{cell.sites_needed:,} sites" if cell.sites_needed is not None else "no number of sites"
    return f"{text}; {cell.difference_ms:g} ms needs {rounds}, or {sites} at {cell.plan.rounds} round(s)"


def effect_warnings(cells: list[CellPower], minimum_ms: float) -> list[str]:
    """One warning per network whose plan cannot detect the study's minimum detectable effect."""
    warnings = []
    for network in dict.fromkeys(c.network for c in cells):
        mine = [c for c in cells if c.network == network]
        worst = max(mine, key=lambda c: float("inf") if c.detectable_ms is None else c.detectable_ms)
        if worst.detectable_ms is not None and worst.detectable_ms <= minimum_ms:
            continue
        reach = "nothing under 1,000 s" if worst.detectable_ms is None else f"{worst.detectable_ms:.0f} ms"
        warnings.append(
            f"warning: {network}: the plan detects {reach} at {worst.plan.power:.0%} power "
            f"({'/'.join(worst.row)} - {'/'.join(worst.column)}; {worst.source}), not the study's "
            f"minimum_detectable_effect_ms {minimum_ms:g}; `dnsstudy study power` says what would"
        )
    return warnings
