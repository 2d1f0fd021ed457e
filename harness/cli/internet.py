"""`dnsstudy internet ...`: namespaces routed out of a host interface, for visits on the real Internet."""

from __future__ import annotations

import click

from harness.cli.common import console, one_line_errors
from harness.errors import HarnessError


@click.group()
def internet() -> None:
    """Visits and timers on the real Internet: namespaces routed out of a host interface, shaped like the lab."""


@internet.command("up")
@click.option("--interface", required=True, help="Host interface the traffic leaves by (e.g. eth0).")
@click.option("--name", default="dsnet", show_default=True, help="Prefix of the namespaces.")
@click.option("--subnet", default="198.19.255.248/29", show_default=True, help="A /29 for the two links.")
@one_line_errors
def internet_up(interface: str, name: str, subnet: str) -> None:
    """Create NAME-client and NAME-shaper, route them out of INTERFACE with NAT (a no-op if up)."""
    from harness.internet import InternetSide, internet_config

    side = InternetSide(internet_config(name, interface, subnet))
    made = side.up()
    console.print(
        f"{name}: {'up' if made else 'already up'}: client {side.namespaces['client']} "
        f"({side.client_address}) -> shaper -> {interface} (NAT). Use --internet {name}."
    )


@internet.command("down")
@click.option("--name", default="dsnet", show_default=True)
@one_line_errors
def internet_down(name: str) -> None:
    """Remove the namespaces, NAT table and routes; restore ip_forward."""
    from harness.internet import InternetSide, internet_config

    try:
        side = InternetSide.named(name)
    except HarnessError:  # no state: still remove whatever carries the name
        side = InternetSide(internet_config(name, "none"))
    console.print(f"removed {len(side.down())} items")
