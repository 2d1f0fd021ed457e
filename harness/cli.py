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


internet_option = click.option("--internet", metavar="NAME",
                               help="Run on the Internet side NAME ('dnsstudy internet up') instead of the lab.")


def _place(internet: str | None, profile: str, prefix: str | None, subnet: str | None):
    """The lab, or the named Internet side."""
    if internet:
        from harness.internet import InternetSide

        return InternetSide.named(internet)
    from harness.lab.lab import Lab

    return Lab(_config(profile, prefix, subnet))


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
    table = Table("resolver", "kind", "Do53 (UDP, TCP)", "DoT, authenticated as", "DoH (HTTP/2, GET and POST)",
                  "DoQ, DoH3")
    for r in status.resolvers:
        table.add_row(r["name"], r["kind"], r["do53"], f"{r['dot']} {r['tls_name']}", r["doh"],
                      f"{r['doq']} {r['doh3']}")
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
@click.option("--resolver", default="near", show_default=True,
              help="A lab resolver, or with --internet a profile in profiles/resolvers/ or 'default'.")
@click.option("--network", default="wired", show_default=True,
              help="Network profile (profiles/network/NAME.toml or a path), applied to the lab's link first.")
@click.option("--timeout", default=30.0, show_default=True, type=float,
              help="Page-load timeout in seconds (the reference study used 30).")
@click.option("--margin", default=10.0, show_default=True, type=float,
              help="Watchdog margin: a visit is killed after timeout + margin seconds.")
@click.option("--results", "results_dir", default="results", show_default=True, type=click.Path(file_okay=False),
              help="Directory for HARs (hars/<visit>.har.gz) and visit records (visits.jsonl).")
@internet_option
@lab_options
@one_line_errors
def visit(url: str, protocol: str, resolver: str, network: str, timeout: float, margin: float, results_dir: str,
          internet: str | None, profile: str, prefix: str | None, subnet: str | None) -> None:
    """Visit URL once from the lab's client namespace and print the result as JSON.

    Exit status 0 for a successful page load, 1 for any other class.
    """
    from harness.visit import run_visit

    the_lab = _place(internet, profile, prefix, subnet)
    _apply_network(the_lab, network)
    results = Path(results_dir)
    result = run_visit(the_lab, url, protocol, resolver, results, timeout=timeout, margin=margin, network=network)
    record = json.dumps(result.to_dict())
    with open(results / "visits.jsonl", "a") as f:
        f.write(record + "\n")
    click.echo(json.dumps(result.to_dict(), indent=1))
    sys.exit(0 if result.error_class == "Successful" else 1)


@main.group()
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
    console.print(f"{name}: {'up' if made else 'already up'}: client {side.config.namespaces['client']} "
                  f"({side.client_address}) -> shaper -> {interface} (NAT). Use --internet {name}.")


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


def _apply_network(the_lab, network: str) -> None:
    """Shape the lab's link as ``network`` says (a no-op if it already is)."""
    from harness.shaping.profile import load_link_profile
    from harness.shaping.shaper import Shaper

    Shaper(the_lab).apply(load_link_profile(network))


def _lab_resolvers(the_lab, names: tuple[str, ...]):
    if not the_lab.status().up:
        raise HarnessError(f"{the_lab.config.prefix} is not up: run 'dnsstudy lab up' (or 'internet up')")
    return [the_lab.resolver(n) for n in names]




@main.command("timer")
@click.argument("hars", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--resolver", "resolvers", multiple=True, default=("near",), show_default=True,
              help="Lab resolver, or with --internet a resolver profile (repeat for several).")
@click.option("--protocol", "protocols", multiple=True, default=("do53", "dot", "doh", "doq", "doh3"),
              show_default=True, type=click.Choice(["do53", "dot", "doh", "doq", "doh3"]),
              help="Protocol (repeat for several).")
@click.option("--network", default="wired", show_default=True, help="Network profile the visits had.")
@click.option("--seed", default=0, show_default=True, type=int, help="Seed of the random query order.")
@click.option("--timeout-ms", default=5000, show_default=True, type=click.IntRange(min=1))
@click.option("--idle-timeout-ms", default=10000, show_default=True, type=click.IntRange(min=0),
              help="Keep idle connections this long for reuse (Stubby's default).")
@click.option("--concurrency", default=1, show_default=True, type=click.IntRange(min=1))
@click.option("--interval-ms", default=0.0, show_default=True, type=click.FloatRange(min=0),
              help="Pacing: at least this long between two queries.")
@click.option("--results", "results_dir", default="results", show_default=True, type=click.Path(file_okay=False),
              help="Records are appended to timings.jsonl here.")
@internet_option
@lab_options
@one_line_errors
def timer(hars: tuple[Path, ...], resolvers: tuple[str, ...], protocols: tuple[str, ...], network: str, seed: int,
          timeout_ms: int, idle_timeout_ms: int, concurrency: int, interval_ms: float, results_dir: str,
          internet: str | None, profile: str, prefix: str | None, subnet: str | None) -> None:
    """Time every hostname in HARS (files or directories) per resolver and protocol, in random order."""
    from harness.timer import TimerSettings, hostnames_from_hars, shuffled, time_names

    the_lab = _place(internet, profile, prefix, subnet)
    targets = _lab_resolvers(the_lab, resolvers)
    names = hostnames_from_hars(hars)
    if not names:
        raise HarnessError("the HARs name no hostname to time")
    _apply_network(the_lab, network)
    settings = TimerSettings(timeout_ms=timeout_ms, idle_timeout_ms=idle_timeout_ms, concurrency=concurrency,
                             interval_ms=interval_ms)
    pairs = shuffled([f"{r.name}/{p}" for r in targets for p in protocols], seed, "pairs")
    results = Path(results_dir)
    results.mkdir(parents=True, exist_ok=True)
    table = Table("resolver", "protocol", "queries", "ok", "median ms", "new connections", "errors")
    for pair in pairs:
        resolver_name, protocol = pair.split("/")
        resolver = next(r for r in targets if r.name == resolver_name)
        timings = time_names(the_lab.client_side(), protocol, resolver, shuffled(names, seed, pair), settings)
        with open(results / "timings.jsonl", "a") as f:
            f.writelines(json.dumps({**t.to_dict(), "network": network}) + "\n" for t in timings)
        ok = [t.ms for t in timings if t.ok]
        table.add_row(resolver_name, protocol, str(len(timings)), str(len(ok)),
                      f"{statistics.median(ok):.2f}" if ok else "-", str(sum(t.new_connection for t in timings)),
                      str(len(timings) - len(ok)))
    console.print(table)
    console.print(f"{len(names)} hostnames; records appended to {results / 'timings.jsonl'}")


@main.command("bench")
@click.argument("which", type=click.Choice(["loss", "repeat", "handshake", "all"]))
@click.option("--bench-profile", default=None, type=click.Path(dir_okay=False, path_type=Path),
              help="Benchmark settings (default profiles/bench/default.toml).")
@click.option("--resolver", "resolvers", multiple=True, default=("near",), show_default=True,
              help="Lab resolver (repeat for several; loss and handshake use the first).")
@click.option("--results", "results_dir", default="results/bench", show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="Raw records and tables go here.")
@lab_options
@one_line_errors
def bench(which: str, bench_profile: Path | None, resolvers: tuple[str, ...], results_dir: Path,
          profile: str, prefix: str | None, subnet: str | None) -> None:
    """The reference resolver benchmarks: loss sweep, repeat (mean, RSD), handshake (ratio to RTT)."""
    from harness import bench as benchmarks
    from harness.lab.lab import Lab

    settings = benchmarks.load_bench_profile(bench_profile or benchmarks.DEFAULT_PROFILE)
    the_lab = Lab(_config(profile, prefix, subnet))
    targets = _lab_resolvers(the_lab, resolvers)
    runs = []
    if which in ("loss", "all"):
        runs.append(benchmarks.loss_sweep(the_lab, targets[0], the_lab.web_hostnames(), settings.loss_sweep))
    if which in ("repeat", "all"):
        runs.append(benchmarks.repeat(the_lab, targets, settings.repeat))
    if which in ("handshake", "all"):
        runs.append(benchmarks.handshake(the_lab, targets[0], settings.handshake))
    for run in runs:
        table = Table(*[k for k in run.rows[0] if k != "ratio_cdf"], title=run.name)
        for row in run.rows:
            table.add_row(*["-" if v is None else str(v) for k, v in row.items() if k != "ratio_cdf"])
        console.print(table)
        for note in run.notes:
            console.print(f"  {note}")
        raw, summary = run.save(results_dir)
        console.print(f"  raw records: {raw}; table: {summary}")


@main.group()
def net() -> None:
    """Emulated links: apply a network profile to the lab, check what the link really does."""


def _shaper(profile: str, prefix: str | None, subnet: str | None, backend: str, internet: str | None = None):
    from harness.shaping.shaper import Shaper

    return Shaper(_place(internet, profile, prefix, subnet), backend=backend)


backend_option = click.option("--backend", default="auto", show_default=True,
                              type=click.Choice(["auto", "netem", "userspace"]),
                              help="netem where the kernel has it (auto), or force one.")


@net.command("apply")
@click.argument("network")
@backend_option
@internet_option
@lab_options
@one_line_errors
def net_apply(network: str, backend: str, internet: str | None, profile: str, prefix: str | None,
              subnet: str | None) -> None:
    """Apply NETWORK (a name in profiles/network/ or a .toml path) to the link; a no-op if already applied."""
    from harness.shaping.profile import load_link_profile

    shaper = _shaper(profile, prefix, subnet, backend, internet)
    start = time.monotonic()
    changed = shaper.apply(load_link_profile(network))
    state = shaper.state() or {}
    console.print(f"{network}: {'applied' if changed else 'already applied'} with the {state.get('backend')} backend "
                  f"in {time.monotonic() - start:.2f} s")


@net.command("clear")
@internet_option
@lab_options
@one_line_errors
def net_clear(internet: str | None, profile: str, prefix: str | None, subnet: str | None) -> None:
    """Remove all shaping from the link."""
    _shaper(profile, prefix, subnet, "auto", internet).clear()
    console.print("shaping removed")


@net.command("check")
@click.argument("network")
@backend_option
@click.option("--probes", default=300, show_default=True, type=int, help="UDP probes (at least 200).")
@click.option("--seconds", default=5.0, show_default=True, type=float, help="iperf3 time per direction.")
@click.option("--congestion-control", "congestion", help="Pin TCP congestion control in client and server (e.g. bbr, cubic).")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
@lab_options
@one_line_errors
def net_check(network: str, backend: str, probes: int, seconds: float, congestion: str | None, as_json: bool,
              profile: str, prefix: str | None, subnet: str | None) -> None:
    """Apply NETWORK, then measure RTT, loss per direction and TCP throughput per direction against its targets.

    Exit status 1 if the link is down or a measurement misses its target.
    """
    from harness.shaping.check import check_link, set_congestion_control
    from harness.shaping.profile import load_link_profile

    shaper = _shaper(profile, prefix, subnet, backend)
    link = load_link_profile(network)
    shaper.apply(link)
    if congestion:
        set_congestion_control(shaper.lab, congestion)
    result = check_link(shaper.lab, link, (shaper.state() or {}).get("backend"), probes=probes, seconds=seconds)
    if result.problem is None and shaper.problem():
        result.problem = shaper.problem()
    if as_json:
        click.echo(json.dumps(result.to_dict(), indent=1))
    else:
        t = result.targets
        table = Table(title=f"link check: {network} ({result.backend} backend, {result.probes} probes)")
        for col in ("measure", "measured", "target", "ok"):
            table.add_column(col)
        fmt = lambda v, unit="": "-" if v is None else f"{v:g}{unit}"  # noqa: E731
        rows = [("RTT mean", fmt(result.rtt_mean_ms, " ms"), fmt(t["rtt_mean_ms"], " ms"), result.verdicts["rtt_within_2ms"]),
                ("RTT SD", fmt(result.rtt_sd_ms, " ms"), "", None),
                ("uplink loss", f"{result.uplink_loss_percent:g} % ({result.uplink_lost})", fmt(t["uplink_loss_percent"], " %"),
                 result.verdicts["uplink_loss_in_95ci"]),
                ("downlink loss", f"{result.downlink_loss_percent:g} % ({result.downlink_lost})",
                 fmt(t["downlink_loss_percent"], " %"), result.verdicts["downlink_loss_in_95ci"]),
                ("uplink TCP", fmt(result.uplink_mbit, " Mbit/s"), fmt(t["uplink_mbit"], " Mbit/s"),
                 result.verdicts["uplink_rate_within_5pct"]),
                ("downlink TCP", fmt(result.downlink_mbit, " Mbit/s"), fmt(t["downlink_mbit"], " Mbit/s"),
                 result.verdicts["downlink_rate_within_5pct"])]
        for name, measured, target, ok in rows:
            table.add_row(name, measured, target, "" if ok is None else ("yes" if ok else "NO"))
        console.print(table)
        console.print(f"congestion control: client {result.congestion_control['client']}, "
                      f"server {result.congestion_control['server']}")
        if result.problem:
            err_console.print(f"problem: {result.problem}")
    sys.exit(1 if result.problem or any(v is False for v in result.verdicts.values()) else 0)


@main.group()
def study() -> None:
    """Study files (profiles/studies/*.toml): check one before crawling it."""


@study.command("check")
@click.argument("name")
@click.option("--measured", "measured", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="A store whose visit times estimate this study's (repeat for several); default: the study's own.")
@click.option("--store", "store_path", type=click.Path(dir_okay=False, path_type=Path),
              help="The study's store (default results/<study>/store.sqlite).")
@one_line_errors
def study_check(name: str, measured: tuple[Path, ...], store_path: Path | None) -> None:
    """Validate study NAME (a name in profiles/studies or a path), show its plan and whether it fits its duration."""
    from harness.schedule import estimate
    from harness.store import Store
    from harness.study import load_study

    loaded = load_study(name)
    s = loaded.study
    console.print(f"{loaded.path}: study '{s.name}' ({s.target}), seed {s.seed}, {s.rounds} round(s)"
                  + (f" over {s.duration_days:g} days" if s.duration_days else ""))
    groups: dict[str, int] = {}
    for site in loaded.sites:
        groups[site.group] = groups.get(site.group, 0) + 1
    console.print(f"sites: {len(loaded.sites)} from {loaded.site_list.source} (list {loaded.site_list.list_id or '?'}): "
                  + ", ".join(f"{g} {n}" for g, n in groups.items()))
    for note in loaded.site_list.converted_idns[:5]:
        console.print(f"  IDN converted: {note}")
    console.print(f"networks: {', '.join(s.networks)}; configurations ({len(s.configurations)}): "
                  + ", ".join(f"{r}/{p}" for r, p in s.configurations))
    times: dict[str, list[float]] = {}
    own = store_path or _default_store(s.name)
    for path in [*measured, *([own] if own.exists() else [])]:
        for network, values in Store(path).visit_seconds().items():
            times.setdefault(network, []).extend(values)
    console.print(estimate(loaded, times).summary())


def _default_store(study_name: str) -> Path:
    return Path("results") / study_name / "store.sqlite"


@main.command("crawl")
@click.argument("name")
@click.option("--store", "store_path", type=click.Path(dir_okay=False, path_type=Path),
              help="The results store (default results/<study>/store.sqlite; HARs go beside it).")
@click.option("--backend", default="auto", show_default=True, type=click.Choice(["auto", "netem", "userspace"]),
              help="Shaping backend.")
@internet_option
@click.option("--profile", "profile", default=None, help="Lab profile (default: the study's lab_profile, else the default lab).")
@click.option("--prefix", help="Lab name prefix (overrides the profile).")
@click.option("--subnet", help="IPv4 /23 for the lab (overrides the profile).")
@one_line_errors
def crawl(name: str, store_path: Path | None, backend: str, internet: str | None, profile: str | None,
          prefix: str | None, subnet: str | None) -> None:
    """Crawl study NAME into its store; run it again to resume where it stopped (Ctrl-C stops after a visit).

    Exit status 0 when the plan is done, 3 when stopped before, 2 on a harness failure.
    """
    from harness.crawl import Crawl
    from harness.store import Store
    from harness.study import load_study

    loaded = load_study(name)
    place = _place(internet, profile or loaded.study.lab_profile or DEFAULT_LAB_PROFILE, prefix, subnet)
    path = store_path or _default_store(loaded.name)
    summary = Crawl(loaded, Store(path), place, path.parent, backend=backend, console=console).run()
    _print_summary(summary, path)
    sys.exit(0 if summary.finished else 3)


def _print_summary(summary, path: Path) -> None:
    rates = ", ".join(f"{n} {len(v) / sum(v) * 3600:.0f}" for n, v in summary.per_network.items() if sum(v))
    console.print(f"{summary.visits} visits recorded in {summary.seconds / 60:.1f} min ({summary.retried} retried, "
                  f"{summary.infrastructure} infrastructure failures); {summary.done} of {summary.total} done"
                  + (f"; visits per hour by network: {rates}" if rates else ""))
    console.print(f"store: {path}" + ("" if summary.finished else "  (run the same command again to resume)"))


@main.command("analyze")
@click.argument("stores", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option("--out", "out", type=click.Path(file_okay=False, path_type=Path),
              help="Output directory (default: 'report' beside the first store).")
@click.option("--profile", "analysis_profile", type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="Analysis profile (default profiles/analysis/paper-2019.toml).")
@one_line_errors
def analyze_command(stores: tuple[Path, ...], out: Path | None, analysis_profile: Path | None) -> None:
    """Figures (PNG, PDF), tables (Markdown, CSV, LaTeX) and report.html from one or more results stores."""
    _analyze(list(stores), out or stores[0].parent / "report", analysis_profile)


def _analyze(stores: list[Path], out: Path, analysis_profile: Path | None = None) -> Path:
    from analysis.report import ResultsError, analyze
    from analysis.settings import DEFAULT_PROFILE

    try:
        report = analyze(stores, out, analysis_profile or DEFAULT_PROFILE)
    except (ResultsError, ValueError) as exc:
        raise HarnessError(str(exc)) from None
    console.print(f"analysis: {len(report.figures)} figure files, {len(report.tables)} table files in "
                  f"{report.seconds:.1f} s; open {report.html}")
    return report.html


@main.command("export")
@click.argument("store", type=click.Path(path_type=Path))
@click.option("--out", "out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Output directory.")
@click.option("--format", "fmt", default="parquet", show_default=True, type=click.Choice(["parquet", "csv"]))
@one_line_errors
def export_command(store: Path, out: Path, fmt: str) -> None:
    """Write every table of STORE as Parquet or CSV files."""
    from analysis.export import export
    from analysis.results import ResultsError

    try:
        paths = export(store, out, fmt)
    except ResultsError as exc:
        raise HarnessError(str(exc)) from None
    console.print(f"wrote {', '.join(p.name for p in paths)} to {out}")


@main.command("demo")
@click.option("--results", "results_dir", default="results/lab-demo", show_default=True,
              type=click.Path(file_okay=False, path_type=Path), help="Where the store, HARs and report go.")
@click.option("--study", "study_name", default="lab-demo", show_default=True, help="The study to run.")
@click.option("--prefix", help="Lab name prefix (overrides the study's lab profile).")
@click.option("--subnet", help="IPv4 /23 for the lab (overrides the study's lab profile).")
@one_line_errors
def demo(results_dir: Path, study_name: str, prefix: str | None, subnet: str | None) -> None:
    """The main job, end to end on the lab: bring it up, crawl the lab-demo study, analyse it, bring the lab down.

    Run it again to resume an interrupted demo; a finished one is only re-analysed.
    """
    from harness.crawl import Crawl
    from harness.lab.lab import Lab
    from harness.store import Store
    from harness.study import load_study

    start = time.monotonic()
    loaded = load_study(study_name)
    if loaded.study.target != "lab":
        raise HarnessError(f"{loaded.path}: the demo runs lab studies; this one targets the {loaded.study.target}")
    the_lab = Lab(_config(loaded.study.lab_profile or DEFAULT_LAB_PROFILE, prefix, subnet))
    started = the_lab.up()
    console.print(f"lab {the_lab.config.prefix} {'up' if started else 'was already up'} in {time.monotonic() - start:.1f} s")
    store_path = results_dir / "store.sqlite"
    try:
        if not _print_checks(the_lab.run_checks()):
            raise HarnessError(f"lab {the_lab.config.prefix}: a service check failed (above); not crawling")
        summary = Crawl(loaded, Store(store_path), the_lab, results_dir, console=console).run()
        _print_summary(summary, store_path)
    finally:
        if started:
            the_lab.down()
            console.print(f"lab {the_lab.config.prefix} down")
    report = _analyze([store_path], results_dir / "report")
    console.print(f"demo finished in {(time.monotonic() - start) / 60:.1f} min. Outputs: store {store_path}, "
                  f"HARs {results_dir / 'hars'}, figures and tables {results_dir / 'report'}, report {report}")
    sys.exit(0 if summary.finished else 3)


if __name__ == "__main__":
    main()
