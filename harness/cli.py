"""The `dnsstudy` command line."""

from __future__ import annotations

import json
import statistics
import sys
import time
from functools import wraps
from pathlib import Path
from typing import Callable

import click
from rich.console import Console
from rich.table import Table

from harness import __version__
from harness.errors import HarnessError
from harness.lab.config import DEFAULT_LAB_PROFILE, LabConfig, load_lab_config

console = Console()
err_console = Console(stderr=True)


def one_line_errors(fn: Callable) -> Callable:
    """Turn HarnessError into `dnsstudy: error: ...` and exit status 2."""

    @wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except HarnessError as exc:
            err_console.print(f"dnsstudy: error: {exc}", markup=False, highlight=False, soft_wrap=True)
            sys.exit(2)

    return wrapper


def lab_options(fn: Callable) -> Callable:
    """--profile, --prefix and --subnet, shared by every lab command."""
    fn = click.option("--subnet", help="IPv4 /23 for the lab (overrides the profile).")(fn)
    fn = click.option("--prefix", help="Lab name prefix; another prefix is another lab (overrides the profile).")(fn)
    fn = click.option("--profile", "profile", default=DEFAULT_LAB_PROFILE, show_default=True,
                      help="Lab profile (TOML).")(fn)
    return fn


def _config(profile: str, prefix: str | None, subnet: str | None) -> LabConfig:
    from pydantic import ValidationError

    config = load_lab_config(profile)
    try:
        return config.with_overrides(prefix=prefix, subnet=subnet)
    except ValidationError as exc:
        first = exc.errors()[0]
        key = ".".join(str(k) for k in first["loc"])
        raise HarnessError(f"--{key}: {first['msg']} (got {first.get('input')!r})") from exc


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="dnsstudy")
def main() -> None:
    """Measure how the DNS transport a browser uses changes page loads."""


@main.group()
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


def _print_status(status) -> None:
    state = "[green]up[/]" if status.healthy else ("[red]broken[/]" if status.up else "down")
    console.print(f"lab [bold]{status.prefix}[/]: {state}   run dir {status.run_dir}   CA {status.ca}")
    ns = ", ".join(f"{role}={'yes' if ok else 'MISSING'}" for role, ok in status.namespaces.items())
    console.print(f"namespaces: {ns}")
    if status.daemons:
        table = Table("daemon", "namespace", "pid", "state", "addresses")
        for d in status.daemons:
            table.add_row(d["name"], d["namespace"], str(d["pid"]),
                          "[green]running[/]" if d["alive"] else "[red]DEAD[/]", compact_addresses(d["addresses"]))
        console.print(table)
    table = Table("resolver", "kind", "Do53 (UDP, TCP)", "DoT, authenticated as", "DoH (HTTP/2, GET and POST)")
    for r in status.resolvers:
        table.add_row(r["name"], r["kind"], r["do53"], f"{r['dot']} {r['tls_name']}", r["doh"])
    console.print(table)
    for r in status.resolvers:
        console.print(f"  {r['name']}: {r['description']}")
    if status.dead:
        console.print(f"[red]dead daemons: {', '.join(status.dead)}[/]")


def _print_checks(results) -> bool:
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
@lab_options
@click.option("--check/--no-check", default=True, show_default=True, help="Check every service after start.")
@one_line_errors
def lab_up(profile: str, prefix: str | None, subnet: str | None, check: bool) -> None:
    """Bring the lab up (a no-op if it is already up)."""
    from harness.lab.lab import Lab

    the_lab = Lab(_config(profile, prefix, subnet))
    start = time.monotonic()
    started = the_lab.up()
    if not started:
        console.print(f"lab {the_lab.config.prefix} is already up; nothing to do")
    else:
        console.print(f"lab {the_lab.config.prefix} up in {time.monotonic() - start:.1f} s")
    if check and not _print_checks(the_lab.run_checks()):
        sys.exit(1)
    _print_status(the_lab.status())


@lab.command("down")
@lab_options
@one_line_errors
def lab_down(profile: str, prefix: str | None, subnet: str | None) -> None:
    """Stop every lab process and remove namespaces, links and files (works after crashes too)."""
    from harness.lab.lab import Lab

    start = time.monotonic()
    removed = Lab(_config(profile, prefix, subnet)).down()
    console.print(f"removed {len(removed)} items in {time.monotonic() - start:.1f} s")


@lab.command("status")
@lab_options
@click.option("--json", "as_json", is_flag=True, help="Print JSON instead of tables.")
@one_line_errors
def lab_status(profile: str, prefix: str | None, subnet: str | None, as_json: bool) -> None:
    """Show each daemon, its addresses, and which have died. Exit 1 if the lab is not healthy."""
    from dataclasses import asdict

    from harness.lab.lab import Lab

    status = Lab(_config(profile, prefix, subnet)).status()
    if as_json:
        click.echo(json.dumps({**asdict(status), "healthy": status.healthy, "dead": status.dead}, indent=1))
    else:
        _print_status(status)
    sys.exit(0 if status.healthy else 1)


@lab.command("check")
@lab_options
@one_line_errors
def lab_check(profile: str, prefix: str | None, subnet: str | None) -> None:
    """Query every resolver over Do53/DoT/DoH and fetch lab pages from the client namespace."""
    from harness.lab.lab import Lab

    the_lab = Lab(_config(profile, prefix, subnet))
    if not the_lab.status().up:
        raise HarnessError(f"lab {the_lab.config.prefix} is not up: run 'dnsstudy lab up'")
    sys.exit(0 if _print_checks(the_lab.run_checks()) else 1)


@lab.command("purge-cache")
@one_line_errors
def lab_purge_cache() -> None:
    """Delete the cached synthetic webs under /var/cache/dnsstudy/web."""
    from harness.lab.webcache import purge

    console.print(f"removed {purge()} cached webs")


@main.command("web")
@lab_options
@one_line_errors
def web(profile: str, prefix: str | None, subnet: str | None) -> None:
    """Summarise the synthetic web a lab profile describes (hostnames, requests, bytes per page)."""
    from harness.lab.pageshape import load_page_shape
    from harness.lab.web import build_web
    from harness.paths import project_path
    from harness.sitelist import load_site_list

    settings = _config(profile, prefix, subnet).settings.web
    sites = load_site_list(project_path(settings.sites), settings.top)
    pages = build_web(sites, load_page_shape(settings.shape), settings.seed).pages
    table = Table("group", "pages", "hostnames median", "mean", "max", "requests median", "KB median", "late hostnames mean")
    for group in ("top", "tail", "all"):
        sel = [p for p in pages if group == "all" or p.group == group]
        if not sel:
            continue
        h = [len(p.hostnames) for p in sel]
        table.add_row(group, str(len(sel)), f"{statistics.median(h):g}", f"{statistics.mean(h):.1f}", str(max(h)),
                      f"{statistics.median(len(p.objects) + 1 for p in sel):g}",
                      f"{statistics.median(p.bytes for p in sel) / 1000:.0f}",
                      f"{statistics.mean(len(p.late_hostnames) for p in sel):.1f}")
    console.print(table)


@main.command("visit")
@click.argument("url")
@click.option("--protocol", required=True, type=click.Choice(["do53", "dot", "doh"]),
              help="DNS arm: Do53 (system resolver), DoT (Stubby), DoH (Firefox TRR).")
@click.option("--resolver", default="near", show_default=True, help="Resolver name (a lab resolver).")
@click.option("--network", default="wired", show_default=True, type=click.Choice(["wired"]),
              help="Network profile; shaped profiles arrive with link emulation.")
@click.option("--timeout", default=30.0, show_default=True, type=float,
              help="Page-load timeout in seconds (the reference study used 30).")
@click.option("--margin", default=10.0, show_default=True, type=float,
              help="Watchdog margin: a visit is killed after timeout + margin seconds.")
@click.option("--results", "results_dir", default="results", show_default=True, type=click.Path(file_okay=False),
              help="Directory for HARs (hars/<visit>.har.gz) and visit records (visits.jsonl).")
@lab_options
@one_line_errors
def visit(url: str, protocol: str, resolver: str, network: str, timeout: float, margin: float, results_dir: str,
          profile: str, prefix: str | None, subnet: str | None) -> None:
    """Visit URL once from the lab's client namespace and print the result as JSON.

    Exit status 0 for a successful page load, 1 for any other class.
    """
    from harness.lab.lab import Lab
    from harness.visit import run_visit

    the_lab = Lab(_config(profile, prefix, subnet))
    results = Path(results_dir)
    result = run_visit(the_lab, url, protocol, resolver, results, timeout=timeout, margin=margin, network=network)
    record = json.dumps(result.to_dict())
    with open(results / "visits.jsonl", "a") as f:
        f.write(record + "\n")
    click.echo(json.dumps(result.to_dict(), indent=1))
    sys.exit(0 if result.error_class == "Successful" else 1)


@main.command("demo")
@lab_options
@one_line_errors
def demo(profile: str, prefix: str | None, subnet: str | None) -> None:
    """The main job on the lab: bring it up, check every service, print its state, bring it down."""
    from harness.lab.lab import Lab

    the_lab = Lab(_config(profile, prefix, subnet))
    start = time.monotonic()
    started = the_lab.up()
    try:
        console.print(f"lab {the_lab.config.prefix} {'up' if started else 'was already up'} "
                      f"in {time.monotonic() - start:.1f} s")
        ok = _print_checks(the_lab.run_checks())
        _print_status(the_lab.status())
    finally:
        if started:
            the_lab.down()
            console.print(f"lab {the_lab.config.prefix} down")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
