"""`dnsstudy net ...`: emulated links."""

from __future__ import annotations

import json
import sys
import time

import click
from rich.table import Table

from harness.cli.common import console, err_console, one_line_errors, place_from, place_options
from harness.lock import using_place
from harness.shaping.shaper import Shaper

backend_option = click.option(
    "--backend",
    default="auto",
    show_default=True,
    type=click.Choice(["auto", "netem", "userspace"]),
    help="netem where the kernel has it (auto), or force one.",
)


@click.group()
def net() -> None:
    """Emulated links: apply a network profile to the link, check what the link really does."""


@net.command("apply")
@click.argument("network")
@backend_option
@place_options
@one_line_errors
def net_apply(
    network: str, backend: str, internet: str | None, profile: str, prefix: str | None, subnet: str | None
) -> None:
    """Apply NETWORK (a name in profiles/network/ or a .toml path) to the link; a no-op if already applied."""
    from harness.shaping.link_profile import load_link_profile

    place = place_from(internet, profile, prefix, subnet)
    shaper = Shaper(place, backend=backend)
    start = time.monotonic()
    with using_place(place):  # a crawl's link is shaped for its block: never reshaped under it
        changed = shaper.apply(load_link_profile(network))
    state = shaper.state() or {}
    console.print(
        f"{network}: {'applied' if changed else 'already applied'} with the {state.get('backend')} backend "
        f"in {time.monotonic() - start:.2f} s"
    )


@net.command("clear")
@place_options
@one_line_errors
def net_clear(internet: str | None, profile: str, prefix: str | None, subnet: str | None) -> None:
    """Remove all shaping from the link."""
    place = place_from(internet, profile, prefix, subnet)
    with using_place(place):
        Shaper(place).clear()
    console.print("shaping removed")


@net.command("check")
@click.argument("network")
@backend_option
@click.option("--probes", default=300, show_default=True, type=int, help="UDP probes (at least 200).")
@click.option(
    "--seconds",
    default=5.0,
    show_default=True,
    type=float,
    help="At least this long per direction for the UDP rate test (longer where the rate needs it).",
)
@click.option(
    "--congestion-control", "congestion", help="Pin TCP congestion control in client and server (e.g. bbr, cubic)."
)
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@place_options
@one_line_errors
def net_check(
    network: str,
    backend: str,
    probes: int,
    seconds: float,
    congestion: str | None,
    as_json: bool,
    internet: str | None,
    profile: str,
    prefix: str | None,
    subnet: str | None,
) -> None:
    """Apply NETWORK, then measure RTT, loss per direction and TCP throughput per direction against its targets.

    Exit status 1 if the link is down or a measurement misses its target. Needs a probe peer (the lab).
    """
    from harness.shaping.check import measure_link

    place = place_from(internet, profile, prefix, subnet)
    with using_place(place):
        result = measure_link(place, network, backend, probes=probes, seconds=seconds, congestion_control=congestion)
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=1))
    else:
        table = Table(
            "measure",
            "measured",
            "target",
            "ok",
            title=f"link check: {network} ({result.backend} backend, {result.probes} probes)",
        )
        for name, measured, target, ok in result.rows():
            table.add_row(name, measured, target, "" if ok is None else ("yes" if ok else "NO"))
        console.print(table)
        console.print(
            f"congestion control: client {result.congestion_control['client']}, "
            f"server {result.congestion_control['server']}"
        )
        if result.problem:
            err_console.print(f"problem: {result.problem}")
    sys.exit(0 if result.passed else 1)
