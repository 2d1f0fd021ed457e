"""`dnsstudy archive show|import` and `dnsstudy record`: replay archives of real pages with their DNS."""

from __future__ import annotations

from pathlib import Path

import click
from rich.table import Table

from harness.cli.common import console, err_console, one_line_errors, place_from, place_options


@click.group()
def archive() -> None:
    """Replay archives: recorded pages with their DNS (docs/replay.md)."""


@archive.command("show")
@click.argument("directory", type=click.Path(path_type=Path))
@click.option("--dns/--no-dns", default=True, show_default=True, help="Print every hostname's DNS chain.")
@one_line_errors
def archive_show(directory: Path, dns: bool) -> None:
    """Sites, hostnames, requests, bytes and DNS chains of the archive at DIRECTORY."""
    from harness.replay.archive import Archive, shared_addresses

    records = Archive(directory).load_all()
    table = Table("site", "source", "hostnames", "requests", "bytes", "DNS", "shared addresses")
    for r in records:
        synthesized = any(d.synthesized for d in r.dns.values())
        table.add_row(
            r.site,
            r.source,
            str(len(r.hostnames)),
            str(len(r.exchanges)),
            f"{r.body_bytes:,}",
            "synthesized" if synthesized else "recorded",
            str(len(shared_addresses(r.dns))),
        )
    console.print(table)
    if dns:
        for r in records:
            console.print(f"[bold]{r.site}[/]")
            for name, answer in sorted(r.dns.items()):
                chain = "".join(f" -> {target} ({ttl} s)" for target, ttl in answer.chain)
                addresses = ", ".join(answer.a + answer.aaaa) or "no address"
                https = f"; HTTPS {' | '.join(answer.https)} ({answer.https_ttl} s)" if answer.https else ""
                line = f"  {name}{chain} -> {addresses} ({answer.a_ttl} s){https}"
                console.print(line, markup=False, highlight=False, soft_wrap=True)


@archive.command("import")
@click.argument("hars", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--archive", "directory", required=True, type=click.Path(path_type=Path), help="Archive to add to.")
@click.option("--site", default=None, help="The site's name (default: the first URL's host without www.).")
@click.option(
    "--fill-missing-bodies",
    is_flag=True,
    help="Accept entries saved without their body: replay a valid empty body of the recorded size and type "
    "(the archive and every visit of the page say so).",
)
@click.option("--replace", is_flag=True, help="Replace a site already in the archive (else it is refused).")
@one_line_errors
def archive_import(
    hars: tuple[Path, ...], directory: Path, site: str | None, fill_missing_bodies: bool, replace: bool
) -> None:
    """Add HAR 1.2 files to an archive (their DNS is synthesized and marked so). Every readable file is
    imported; each refused one is named with its reason, and the command then exits non-zero."""
    from harness.errors import HarnessError
    from harness.replay.har_import import HarImport

    if site and len(hars) > 1:
        raise click.UsageError("--site names one site: give one HAR with it")
    importer = HarImport(directory, fill_missing_bodies, replace)
    refused = 0
    for path in hars:
        try:
            record = importer.add(path, site)
        except HarnessError as exc:
            refused += 1
            err_console.print(f"refused: {exc}", markup=False, highlight=False, soft_wrap=True)
            continue
        notes = "".join(f", {n} {kind.replace('_', ' ')}" for kind, n in sorted(record.notes.items()) if n)
        console.print(
            f"{record.site}: {len(record.exchanges)} requests, {len(record.hostnames)} hostnames, "
            f"{record.body_bytes:,} bytes (DNS synthesized{notes})",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if refused:
        raise HarnessError(f"{refused} of {len(hars)} HAR files refused (named above)")


@click.command("record")
@click.argument("sites", nargs=-1, required=True)
@click.option("--archive", "directory", required=True, type=click.Path(path_type=Path), help="Archive to write.")
@click.option("--resolver", default=None, help="The place's resolver to record DNS from (default: its system one).")
@click.option("--timeout", default=30.0, show_default=True, help="Page load time limit, seconds.")
@place_options
@one_line_errors
def record(
    sites: tuple[str, ...],
    directory: Path,
    resolver: str | None,
    timeout: float,
    internet: str | None,
    profile: str,
    prefix: str | None,
    subnet: str | None,
) -> None:
    """Load each SITE through a recording proxy and store its exchanges and DNS in an archive."""
    from harness.replay.recorder import record_sites

    place = place_from(internet, profile, prefix, subnet)
    for done in record_sites(place, list(sites), directory, resolver, timeout):
        console.print(
            f"{done.site}: {len(done.exchanges)} requests, {len(done.hostnames)} hostnames, "
            f"{done.body_bytes:,} bytes, {len(done.dns)} names resolved"
        )
