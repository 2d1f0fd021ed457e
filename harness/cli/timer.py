"""`dnsstudy timer` and `dnsstudy bench`: resolution times outside the browser."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import click
from rich.table import Table

from harness.cli.common import (
    ProtocolChoice,
    apply_network,
    console,
    lab_from,
    lab_options,
    one_line_errors,
    place_from,
    place_options,
)
from harness.errors import HarnessError
from harness.protocols import timer_protocols


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
    after every other pair has been timed and kept.
    """
    from harness.timer import TimerSettings, hostnames_from_hars, time_pairs

    place = place_from(internet, profile, prefix, subnet)
    place.require_up()
    for name in resolvers:
        place.resolver(name)  # an unknown name fails here, before anything is shaped or timed
    names = hostnames_from_hars(hars)
    if not names:
        raise HarnessError("the HARs name no hostname to time")
    apply_network(place, network)
    settings = TimerSettings(
        timeout_ms=timeout_ms, idle_timeout_ms=idle_timeout_ms, concurrency=concurrency, interval_ms=interval_ms
    )
    pairs = [(r, p) for r in resolvers for p in (protocols or timer_protocols())]
    runs = time_pairs(place.client_side(), place.resolver, pairs, names, settings, seed, pairs_key=("pairs",))
    results = Path(results_dir)
    results.mkdir(parents=True, exist_ok=True)
    with open(results / "timings.jsonl", "a") as f:
        f.writelines(json.dumps({**t.to_dict(), "network": network}) + "\n" for run in runs for t in run.timings)
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
    console.print(f"{len(names)} hostnames; records appended to {results / 'timings.jsonl'}")
    problems = [run.problem for run in runs if run.problem]
    if problems:
        raise HarnessError(f"the timer failed for {'; '.join(problems)}")


@click.command("bench")
@click.argument("which", type=click.Choice(["loss", "repeat", "handshake", "all"]))
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
    help="Lab resolver (repeat for several; loss and handshake use the first).",
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
    """The reference resolver benchmarks: loss sweep, repeat (mean, RSD), handshake (ratio to RTT)."""
    from harness import bench as benchmarks

    settings = benchmarks.load_bench_profile(bench_profile or benchmarks.DEFAULT_PROFILE)
    the_lab = lab_from(profile, prefix, subnet)
    the_lab.require_up()
    for run in benchmarks.run(which, the_lab, [the_lab.resolver(n) for n in resolvers], settings):
        table = Table(*[k for k in run.rows[0] if k != "ratio_cdf"], title=run.name)
        for row in run.rows:
            table.add_row(*["-" if v is None else str(v) for k, v in row.items() if k != "ratio_cdf"])
        console.print(table)
        for note in run.notes:
            console.print(f"  {note}")
        raw, summary = run.save(results_dir)
        console.print(f"  raw records: {raw}; table: {summary}")
