"""`dnsstudy timer` and `dnsstudy bench`: resolution times outside the browser."""

from __future__ import annotations

import statistics
from pathlib import Path

import click
from rich.table import Table

from harness.cli.common import (
    ProtocolChoice,
    console,
    one_line_errors,
    place_from,
    place_options,
)
from harness.errors import HarnessError
from harness.timer import timer_protocols


@click.command("timer")
@click.argument("hars", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--resolver",
    "resolvers",
    multiple=True,
    default=("near",),
    show_default=True,
    help="Lab resolver, or with --internet a resolver profile (repeat for several).",
)
@click.option(
    "--protocol",
    "protocols",
    multiple=True,
    type=ProtocolChoice(timer_protocols),
    help="Protocol (repeat for several; default: every protocol the timer has).",
)
@click.option("--network", default="wired", show_default=True, help="Network profile the visits had.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the random query order.")
@click.option("--timeout-ms", default=5000, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--idle-timeout-ms",
    default=10000,
    show_default=True,
    type=click.IntRange(min=0),
    help="Keep idle connections this long for reuse (Stubby's default).",
)
@click.option("--concurrency", default=1, show_default=True, type=click.IntRange(min=1))
@click.option(
    "--interval-ms",
    default=0.0,
    show_default=True,
    type=click.FloatRange(min=0),
    help="Pacing: at least this long between two queries.",
)
@click.option(
    "--results",
    "results_dir",
    default="results",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Records are appended to timings.jsonl here.",
)
@place_options
@one_line_errors
def timer(
    hars: tuple[Path, ...],
    resolvers: tuple[str, ...],
    protocols: tuple[str, ...],
    network: str,
    seed: int,
    timeout_ms: int,
    idle_timeout_ms: int,
    concurrency: int,
    interval_ms: float,
    results_dir: str,
    internet: str | None,
    profile: str,
    prefix: str | None,
    subnet: str | None,
) -> None:
    """Time every hostname in HARS (files or directories) per resolver and protocol, in random order.

    A resolver and protocol whose timer fails ends the command with a one-line error (exit status 2),
    after every other pair has been timed and kept; so does a place a crawl is using.
    """
    from harness.lock import using_place
    from harness.timer import TimerSettings, time_hars

    settings = TimerSettings(
        timeout_ms=timeout_ms, idle_timeout_ms=idle_timeout_ms, concurrency=concurrency, interval_ms=interval_ms
    )
    place = place_from(internet, profile, prefix, subnet)
    with using_place(place):  # it reshapes the link: never under a running crawl
        names, runs = time_hars(
            place,
            hars,
            list(resolvers),
            list(protocols or timer_protocols()),
            network,
            settings,
            seed,
            Path(results_dir),
        )
    table = Table("resolver", "protocol", "queries", "ok", "median ms", "new connections", "errors")
    for run in runs:
        ok = [t.ms for t in run.timings if t.ok and t.ms is not None]
        table.add_row(
            run.resolver,
            run.protocol,
            str(len(run.timings)),
            str(len(ok)),
            f"{statistics.median(ok):.2f}" if ok else "-",
            str(sum(t.new_connection for t in run.timings)),
            str(len(run.timings) - len(ok)),
        )
    console.print(table)
    console.print(f"{names} hostnames; records appended to {Path(results_dir) / 'timings.jsonl'}")
    problems = [run.problem for run in runs if run.problem]
    if problems:
        raise HarnessError(f"the timer failed for {'; '.join(problems)}")
