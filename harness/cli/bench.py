"""`dnsstudy bench`: the reference study's resolver benchmarks over the lab's link (harness/resolver_bench.py)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click
from rich.table import Table

from harness.cli.common import console, lab_from, lab_options, one_line_errors

if TYPE_CHECKING:
    from harness.lab.lab import Lab
    from harness.resolver_bench import BenchProfile


@click.command("bench")
@click.argument("which", type=click.Choice(["loss", "repeat", "handshake", "all", "resumption"]))
@click.option(
    "--bench-profile",
    default=None,
    type=click.Path(dir_okay=False, path_type=Path),
    help="Benchmark settings (default profiles/bench/default.toml).",
)
@click.option(
    "--resolver",
    "resolvers",
    multiple=True,
    default=("near",),
    show_default=True,
    help="Lab resolver (repeat for several; loss, handshake and resumption use the first).",
)
@click.option(
    "--results",
    "results_dir",
    default="results/bench",
    show_default=True,
    type=click.Path(file_okay=False, path_type=Path),
    help="Raw records and tables go here.",
)
@lab_options()
@one_line_errors
def bench(
    which: str,
    bench_profile: Path | None,
    resolvers: tuple[str, ...],
    results_dir: Path,
    profile: str,
    prefix: str | None,
    subnet: str | None,
) -> None:
    """The reference study's resolver benchmarks, timed with the resolution timer over the lab's link:
    loss sweep, repeat (mean, RSD), handshake (ratio to RTT). (The tool's own performance benchmarks are
    the scripts under benchmarks/.)

    `all` runs those three. `resumption` (cold against resumed TLS handshakes, in RTTs) needs a lab whose
    profile sets tls_resumption = true, e.g. --profile profiles/lab/resumption.toml.
    """
    from harness import resolver_bench
    from harness.lock import using_place

    settings = resolver_bench.load_bench_profile(bench_profile or resolver_bench.DEFAULT_PROFILE)
    the_lab = lab_from(profile, prefix, subnet)
    with using_place(the_lab, "benchmarked"):  # it reshapes the link: never under a running crawl
        the_lab.require_up()
        _run(which, the_lab, resolvers, settings, results_dir)


def _run(which: str, the_lab: Lab, resolvers: tuple[str, ...], settings: BenchProfile, results_dir: Path) -> None:
    """Run the benchmarks and print each one's table as it ends."""
    from harness import resolver_bench

    for run in resolver_bench.run(which, the_lab, [the_lab.resolver(n) for n in resolvers], settings):
        table = Table(*[k for k in run.rows[0] if k != "ratio_cdf"], title=run.name)
        for row in run.rows:
            table.add_row(*["-" if v is None else str(v) for k, v in row.items() if k != "ratio_cdf"])
        console.print(table)
        for note in run.notes:
            console.print(f"  {note}")
        raw, summary = run.save(results_dir)
        console.print(f"  raw records: {raw}; table: {summary}")
