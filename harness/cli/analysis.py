"""`dnsstudy analyze` and `export`: the reading side, from stores to figures, tables and files."""

from __future__ import annotations

from pathlib import Path

import click

from harness.cli.common import console, one_line_errors
from harness.errors import HarnessError


@click.command("analyze")
@click.argument("stores", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out",
    "out",
    type=click.Path(file_okay=False, path_type=Path),
    help="Output directory (default: 'report' beside the first store).",
)
@click.option(
    "--profile",
    "analysis_profile",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="Analysis profile (default profiles/analysis/paper-2019.toml).",
)
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
