"""`dnsstudy visit`: one page load through one DNS arm."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import click

from harness.arms import browser_protocols
from harness.cli.common import ProtocolChoice, one_line_errors, place_from, place_options


@click.command("visit")
@click.argument("url")
@click.option(
    "--protocol",
    required=True,
    type=ProtocolChoice(browser_protocols),
    help="DNS arm (any protocol with a browser arm, see harness/arms/).",
)
@click.option(
    "--resolver",
    default="near",
    show_default=True,
    help="A lab resolver, or with --internet a profile in profiles/resolvers/ or 'default'.",
)
@click.option(
    "--network",
    default="wired",
    show_default=True,
    help="Network profile (profiles/network/NAME.toml or a path), applied to the link first.",
)
@click.option(
    "--timeout",
    default=30.0,
    show_default=True,
    type=float,
    help="Page-load timeout in seconds (the reference study used 30).",
)
@click.option(
    "--margin",
    default=10.0,
    show_default=True,
    type=float,
    help="Watchdog margin: a visit is killed after timeout + margin seconds.",
)
@click.option(
    "--results",
    "results_dir",
    default="results",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Directory for HARs (hars/<visit>.har.gz) and visit records (visits.jsonl).",
)
@click.option(
    "--browser",
    default="firefox",
    show_default=True,
    type=click.Choice(["firefox", "chromium"]),
    help="The browser the page loads in (harness/browser/registry.py).",
)
@place_options
@one_line_errors
def visit(
    url: str,
    protocol: str,
    resolver: str,
    network: str,
    timeout: float,
    margin: float,
    results_dir: str,
    browser: str,
    internet: str | None,
    profile: str,
    prefix: str | None,
    subnet: str | None,
) -> None:
    """Visit URL once from the client namespace and print the result as JSON.

    Exit status 0 for a successful page load, 1 for any other class; 2 if the place is unusable or busy
    (a crawl runs there).
    """
    from harness.lock import using_place
    from harness.visit import run_visit

    place = place_from(internet, profile, prefix, subnet)
    with using_place(place):  # a crawl's first act would be to kill this visit's browser, and vice versa
        result = run_visit(
            place,
            url,
            protocol,
            resolver,
            Path(results_dir).resolve(),
            timeout=timeout,
            margin=margin,
            network=network,
            browser=browser,
        )
    click.echo(json.dumps(result.to_dict(), indent=1))
    sys.exit(0 if result.error_class == "Successful" else 1)
