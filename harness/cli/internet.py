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
@click.option(
    "--allow",
    "allow",
    multiple=True,
    metavar="ADDRESS|RESOLVER",
    help="A resolver the client may reach although its address is private, link-local or the host's "
    "(repeat for several): an IPv4 address (its DNS ports) or a resolver profile. "
    "The host's own resolver ('default') is allowed on port 53 without asking.",
)
@one_line_errors
def internet_up(interface: str, name: str, subnet: str, allow: tuple[str, ...]) -> None:
    """Create NAME-client and NAME-shaper, route them out of INTERFACE with NAT (a no-op if up).

    The client reaches the Internet only: no private, shared, link-local, loopback or multicast address,
    not INTERFACE's own network, nothing of this host, except the resolvers allowed (docs/security.md).
    """
    from harness.internet.config import internet_config
    from harness.internet.side import InternetSide

    side = InternetSide(internet_config(name, interface, subnet))
    made = side.up(allow=allow)
    console.print(
        f"{name}: {'up' if made else 'already up'}: client {side.namespaces['client']} "
        f"({side.client_address}) -> shaper -> {interface} (NAT). Use --internet {name}."
    )
    firewall = side.firewall()
    if firewall is not None:
        allowed = "; ".join(a.describe() for a in firewall.allowed) or "none"
        console.print(f"allowed despite the firewall: {allowed}", markup=False, highlight=False)
        if not made and allow:
            console.print("(already up: --allow changes nothing; bring the side down and up again)")


@internet.command("down")
@click.option("--name", default="dsnet", show_default=True)
@one_line_errors
def internet_down(name: str) -> None:
    """Remove the namespaces, firewall table and routes; the last side down restores ip_forward."""
    from harness.internet.config import internet_config
    from harness.internet.side import InternetSide

    try:
        side = InternetSide.named(name)
    except HarnessError:  # no state: still remove whatever carries the name
        side = InternetSide(internet_config(name, "none"))
    console.print(f"removed {len(side.down())} items")
