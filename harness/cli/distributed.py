"""`dnsstudy broker`, `worker` and `coordinate`: a study crawled across vantage points (docs/distributed.md)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from harness.cli.common import console, lab_options, one_line_errors, place_from
from harness.errors import HarnessError
from harness.lab.config import DEFAULT_LAB_PROFILE

if TYPE_CHECKING:
    from harness.distributed.broker import RedisService

F = TypeVar("F", bound=Callable[..., Any])

BROKER_HELP = "Broker URL, redis://:PASSWORD@HOST:PORT/0 or rediss://; better from $DNSSTUDY_BROKER (kept out of ps)."
BROKER_FILE_HELP = (
    "A file holding the broker URL (a container secret, or a broker's `url`); also $DNSSTUDY_BROKER_FILE."
)


def broker_option(fn: F) -> F:
    """--broker and --broker-file; the command resolves them with `broker_url_from`."""
    fn = click.option("--broker", "broker_url", envvar="DNSSTUDY_BROKER", help=BROKER_HELP)(fn)
    path = click.Path(dir_okay=False, path_type=Path)
    return click.option("--broker-file", envvar="DNSSTUDY_BROKER_FILE", type=path, help=BROKER_FILE_HELP)(fn)


def broker_url_from(url: str | None, url_file: Path | None) -> str:
    """The broker URL: from the file when one is named (it is the more specific), else --broker; one-line errors."""
    from harness.distributed.broker import read_url_file

    if url_file is not None:
        return read_url_file(url_file)
    if not url:
        raise HarnessError(
            "no broker: give --broker (or $DNSSTUDY_BROKER), or --broker-file (or $DNSSTUDY_BROKER_FILE)"
        )
    return url


@click.group()
def broker() -> None:
    """The Redis the tool runs for a lab or one host: loopback, a password, an fsynced append-only file."""


def _service(name: str, host: str, port: int, tls: bool = False) -> RedisService:
    from harness.distributed.broker import RedisService

    return RedisService(name=name, host=host, port=port, tls=tls)


def _service_options(fn: F) -> F:
    fn = click.option("--port", type=int, default=6380, show_default=True)(fn)
    host_help = "Address to bind: loopback, a lab's, or in a container its own name (the URL keeps the name)."
    fn = click.option("--host", default="127.0.0.1", show_default=True, help=host_help)(fn)
    return click.option("--name", default="default", show_default=True, help="Several brokers on one host.")(fn)


@broker.command("up")
@_service_options
@click.option("--tls", is_flag=True, help="TLS only (rediss://), with a CA of its own (ca.pem in its directory).")
@click.option(
    "--foreground",
    is_flag=True,
    help="Run until stopped (a container's main process); the URL goes to `url` beside it.",
)
@one_line_errors
def broker_up(name: str, host: str, port: int, tls: bool, foreground: bool) -> None:
    """Start redis-server (as the redis account); print where its URL is kept."""
    service = _service(name, host, port, tls)
    if foreground:
        console.print(f"broker '{name}' on {host}:{port}; its URL, once it answers: {service.directory / 'url'}")
        sys.exit(service.serve())
    service.up()
    console.print(f"broker '{name}' on {host}:{port}; its URL: dnsstudy broker url --name {name}")


@broker.command("down")
@_service_options
@one_line_errors
def broker_down(name: str, host: str, port: int) -> None:
    """Stop the broker; its data stays for the next `up`."""
    _service(name, host, port).down()


@broker.command("url")
@_service_options
@click.option("--tls", is_flag=True, help="The broker was started with --tls.")
@one_line_errors
def broker_url_command(name: str, host: str, port: int, tls: bool) -> None:
    """Print the broker's URL (with its password): export DNSSTUDY_BROKER=$(dnsstudy broker url)."""
    click.echo(_service(name, host, port, tls).url)


@click.command("worker")
@click.option("--vantage", "vantage_point", required=True, help="The vantage point this worker serves.")
@broker_option
@click.option("--internet", metavar="NAME", help="Serve from the Internet side NAME instead of the lab.")
@click.option("--backend", default="auto", type=click.Choice(["auto", "netem", "userspace"]), show_default=True)
@click.option("--visibility-timeout", type=float, help="Seconds before a lost worker's task is handed out again.")
@click.option(
    "--up", "bring_up", is_flag=True, help="Bring the lab up first (a no-op if it is up): a container's worker."
)
@lab_options(profile_default=DEFAULT_LAB_PROFILE)
@one_line_errors
def worker(
    vantage_point: str,
    broker_file: Path | None,
    broker_url: str | None,
    internet: str | None,
    backend: str,
    visibility_timeout: float | None,
    bring_up: bool,
    profile: str,
    prefix: str | None,
    subnet: str | None,
) -> None:
    """Run the visits and timer runs of one vantage point on this host's place, until stopped or halted.

    Exit status 0 when stopped, 2 when the place died or hangs (its visit goes back to the queue).
    """
    from harness.distributed.worker import run_worker

    url = broker_url_from(broker_url, broker_file)
    place = place_from(internet, profile, prefix, subnet)
    if bring_up and place.bring_up():
        console.print(f"{place.kind} '{place.name}' is up")
    sys.exit(run_worker(vantage_point, url, place, backend, visibility_timeout, console))


@click.command("coordinate")
@click.argument("name")
@broker_option
@click.option("--store", "store_path", type=click.Path(dir_okay=False, path_type=Path), help="The results store.")
@click.option("--window", type=int, default=2, show_default=True, help="Visits queued ahead per vantage point.")
@click.option("--moved", is_flag=True, help="The results directory was moved here: rewrite its HAR paths.")
@click.option(
    "--report", "write_analysis", is_flag=True, help="Once every vantage point is done, analyse into report/."
)
@click.option(
    "--stay", is_flag=True, help="Once done, stay until stopped: a container's main process (docs/deploy.md)."
)
@one_line_errors
def coordinate(
    name: str,
    broker_file: Path | None,
    broker_url: str | None,
    store_path: Path | None,
    window: int,
    moved: bool,
    write_analysis: bool,
    stay: bool,
) -> None:
    """Crawl study NAME over its vantage points: plan, queue, record; run it again to resume.

    Exit status 0 when every vantage point is done, 3 when stopped, 2 when a vantage point halted.
    """
    from harness.cli.crawl import default_store
    from harness.distributed.broker import connect
    from harness.distributed.coordinator import Coordinator
    from harness.store import Store
    from harness.study import load_study

    loaded = load_study(name)
    url = broker_url_from(broker_url, broker_file)
    connect(url).close()  # a wrong password or no broker: one line, before the store is created
    path = (store_path or default_store(loaded.name)).resolve()
    coordinator = Coordinator(loaded, Store(path), url, path.parent, console=console, window=window, moved=moved)
    summary = coordinator.run()
    summary.print_closing(console, path)
    if summary.finished and write_analysis:
        from harness.cli.analysis import write_report

        try:
            console.print(f"report: {write_report([path], path.parent / 'report')}")
        except HarnessError as exc:  # the crawl is done and recorded: a failed analysis must not undo that
            console.print(f"report not written: {exc}", markup=False, soft_wrap=True)
    if summary.finished and stay:
        console.print("every vantage point is done; staying until stopped (--stay)")
        _wait_for_stop()
    sys.exit(0 if summary.finished else 2 if summary.halted else 3)


def _wait_for_stop() -> None:
    """Block until SIGTERM or SIGINT: a finished coordinator under `restart: unless-stopped` must not exit."""
    import signal

    stops = {signal.SIGTERM, signal.SIGINT}
    signal.pthread_sigmask(signal.SIG_BLOCK, stops)
    signal.sigwait(stops)
