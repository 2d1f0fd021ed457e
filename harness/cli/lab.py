"""`dnsstudy lab ...` and `dnsstudy web`: the offline testbed."""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import click
from rich.table import Table

from harness.cli.common import console, lab_config, lab_from, lab_options, one_line_errors
from harness.errors import HarnessError
from harness.protocols import DO53, DOH, DOH3, DOQ, DOT


@click.group()
def lab() -> None:
    """The offline testbed: namespaces, a private CA, resolvers, a synthetic web."""


def compact_addresses(endpoints: list[str]) -> str:
    """'198.18.1.100:443 198.18.1.101:443' -> '198.18.1.100-101:443' (runs of consecutive addresses)."""
    runs: list[list] = []
    for endpoint in endpoints:
        host, _, port = endpoint.rpartition(":")
        net, _, last = host.rpartition(".")
        if runs and runs[-1][0] == net and runs[-1][3] == port and last.isdigit() and int(last) == runs[-1][2] + 1:
            runs[-1][2] = int(last)
        elif last.isdigit():
            runs.append([net, int(last), int(last), port])
        else:
            runs.append([endpoint, None, None, None])
    out = []
    for net, first, end, port in runs:
        if first is None:
            out.append(net)
        else:
            out.append(f"{net}.{first}{'-' + str(end) if end != first else ''}:{port}")
    return " ".join(out)


def print_status(status) -> None:
    """The lab's namespaces, daemons and resolver endpoints as tables."""
    state = "[green]up[/]" if status.healthy else ("[red]broken[/]" if status.up else "down")
    console.print(f"lab [bold]{status.prefix}[/]: {state}   run dir {status.run_dir}   CA {status.ca}")
    ns = ", ".join(f"{role}={'yes' if ok else 'MISSING'}" for role, ok in status.namespaces.items())
    console.print(f"namespaces: {ns}")
    if status.daemons:
        table = Table("daemon", "namespace", "pid", "state", "addresses")
        for d in status.daemons:
            table.add_row(
                d["name"],
                d["namespace"],
                str(d["pid"]),
                "[green]running[/]" if d["alive"] else "[red]DEAD[/]",
                compact_addresses(d["addresses"]),
            )
        console.print(table)
    table = Table(
        "resolver", "kind", "Do53 (UDP, TCP)", "DoT, authenticated as", "DoH (HTTP/2, GET and POST)", "DoQ, DoH3"
    )
    for r in status.resolvers:
        table.add_row(
            r["name"],
            r["kind"],
            r[DO53.name],
            f"{r[DOT.name]} {r['tls_name']}",
            r[DOH.name],
            f"{r[DOQ.name]} {r[DOH3.name]}",
        )
    console.print(table)
    for r in status.resolvers:
        console.print(f"  {r['name']}: {r['description']}")
    if status.up:
        shown = [
            f"{f['name']} at resolver {f['resolver']}" + (f", applied {f['owner']}" if f["owner"] else "")
            for f in status.faults
        ]
        console.print("faults: " + ("; ".join(shown) if shown else "none"), markup=False, highlight=False)
    if status.dead:
        console.print(f"[red]dead daemons: {', '.join(status.dead)}[/]")


def print_checks(results) -> bool:
    """The service checks as a table; True if all passed."""
    table = Table("check", "result", "ms", "seen")
    for r in results:
        table.add_row(r.name, "[green]ok[/]" if r.ok else "[red]FAIL[/]", f"{r.ms:.1f}", r.detail)
    console.print(table)
    failed = [r.name for r in results if not r.ok]
    if failed:
        console.print(f"[red]{len(failed)} of {len(results)} checks failed[/]")
    else:
        console.print(f"[green]all {len(results)} checks passed[/]")
    return not failed


@lab.command("up")
@lab_options()
@click.option("--check/--no-check", default=True, show_default=True, help="Check every service after start.")
@click.option(
    "--web",
    "web_archive",
    type=click.Path(exists=True, file_okay=False),
    help="Serve this replay archive (docs/replay.md) instead of the synthetic web.",
)
@one_line_errors
def lab_up(profile: str, prefix: str | None, subnet: str | None, check: bool, web_archive: str | None) -> None:
    """Bring the lab up (a no-op if it is already up)."""
    from harness.lab.lab import Lab

    archive = str(Path(web_archive).resolve()) if web_archive else None  # the lab may read it from anywhere
    the_lab = Lab(lab_config(profile, prefix, subnet).with_overrides(web_archive=archive))
    start = time.monotonic()
    if not the_lab.up():
        console.print(f"lab {the_lab.name} is already up; nothing to do")
    else:
        console.print(f"lab {the_lab.name} up in {time.monotonic() - start:.1f} s")
    if check and not print_checks(the_lab.run_checks()):
        sys.exit(1)
    print_status(the_lab.status())


@lab.command("down")
@lab_options()
@one_line_errors
def lab_down(profile: str, prefix: str | None, subnet: str | None) -> None:
    """Stop every lab process and remove namespaces, links and files (works after crashes too)."""
    from harness.lock import using_place

    start = time.monotonic()
    the_lab = lab_from(profile, prefix, subnet)
    with using_place(the_lab, "brought down"):  # never under a crawl, a visit or a benchmark
        removed = the_lab.down()
    console.print(f"removed {len(removed)} items in {time.monotonic() - start:.1f} s")


@lab.command("status")
@lab_options()
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@one_line_errors
def lab_status(profile: str, prefix: str | None, subnet: str | None, as_json: bool) -> None:
    """Show each daemon, its addresses, and which have died. Exit 1 if the lab is not healthy."""
    status = lab_from(profile, prefix, subnet).status()
    if as_json:
        click.echo(json.dumps({**asdict(status), "healthy": status.healthy, "dead": status.dead}, indent=1))
    else:
        print_status(status)
    sys.exit(0 if status.healthy else 1)


@lab.command("check")
@lab_options()
@one_line_errors
def lab_check(profile: str, prefix: str | None, subnet: str | None) -> None:
    """Query every resolver over Do53/DoT/DoH and fetch lab pages from the client namespace."""
    the_lab = lab_from(profile, prefix, subnet)
    the_lab.require_up()
    sys.exit(0 if print_checks(the_lab.run_checks()) else 1)


@lab.group("fault")
def lab_fault() -> None:
    """Break a lab resolver on purpose (blocked port, silent server, bad certificate), and mend it."""


@lab_fault.command("apply")
@click.argument("name")
@click.option("--resolver", default="near", show_default=True, help="The lab resolver the fault hits.")
@lab_options()
@one_line_errors
def lab_fault_apply(name: str, resolver: str, profile: str, prefix: str | None, subnet: str | None) -> None:
    """Apply fault NAME (see `dnsstudy lab fault list`) to a lab resolver.

    It stays until `lab fault clear`; a crawl refuses to start beside it unless its study declares it.
    """
    from harness.lab import faults
    from harness.lock import using_place

    the_lab = lab_from(profile, prefix, subnet)
    try:
        fault = faults.parse_fault(name, resolver)
    except ValueError as exc:
        raise HarnessError(str(exc)) from None
    with using_place(the_lab, "given a fault"):  # a crawl's visits must not meet a fault mid-run
        the_lab.require_healthy()
        faults.apply(the_lab, fault)
    console.print(f"lab {the_lab.name}: {fault.name} at resolver {resolver}; '{the_lab.clear_faults_command}' mends it")


@lab_fault.command("clear")
@lab_options()
@one_line_errors
def lab_fault_clear(profile: str, prefix: str | None, subnet: str | None) -> None:
    """Undo every fault applied to the lab."""
    from harness.lab import faults
    from harness.lock import using_place

    the_lab = lab_from(profile, prefix, subnet)
    with using_place(the_lab, "cleared of faults"):  # a crawl's declared faults hold until it ends
        the_lab.require_up()
        cleared = faults.clear(the_lab)
    console.print(f"lab {the_lab.name}: cleared {', '.join(f'{f.name}@{f.resolver}' for f in cleared) or 'nothing'}")


@lab_fault.command("list")
@lab_options()
@one_line_errors
def lab_fault_list(profile: str, prefix: str | None, subnet: str | None) -> None:
    """The faults there are, and those applied to the lab now."""
    from harness.lab import faults

    the_lab = lab_from(profile, prefix, subnet)
    now = faults.applied(the_lab) if the_lab.state_file.exists() else []
    console.print("faults: " + ", ".join(faults.fault_names()))
    console.print("applied: " + ("; ".join(f.describe() for f in now) or "none"), markup=False, highlight=False)


@lab.command("purge-cache")
@one_line_errors
def lab_purge_cache() -> None:
    """Delete the cached synthetic webs under /var/cache/dnsstudy/web."""
    from harness.lab.webcache import purge

    console.print(f"removed {purge()} cached webs")


@click.command("web")
@lab_options()
@one_line_errors
def web(profile: str, prefix: str | None, subnet: str | None) -> None:
    """Summarise the synthetic web a lab profile describes (hostnames, requests, bytes per page)."""
    from harness.lab.web import summarise

    rows = summarise(lab_from(profile, prefix, subnet).web().pages)
    if not rows:
        raise HarnessError("the lab profile's site list is empty")
    table = Table(*rows[0])
    for row in rows:
        table.add_row(*row.values())
    console.print(table)
