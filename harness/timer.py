"""The resolution timer: times DNS queries outside the browser, one record each.

Two programs do the timing: `dnstimer` (C; getdns for Do53 and DoT, libcurl
for DoH) and `quictimer` (Go; quic-go for DoQ and DoH3). Both write the same
JSON record per query (see docs/timer.md). This module builds their command
lines from a `Resolver`, registers each with the protocols it times, runs
them inside the client namespace, reads the hostnames to time from HARs, and
holds the one loop that times names for every resolver and protocol (used by
`dnsstudy timer` and by the crawl after each network block).
"""

from __future__ import annotations

import json
import random
import subprocess
from collections.abc import Callable, Iterable
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

from harness import netns
from harness.accounts import helper
from harness.errors import HarnessError
from harness.paths import PROJECT_ROOT
from harness.place import ClientSide, Resolver
from harness.protocols import DO53, DOH, DOH3, DOQ, DOT, Protocol, protocols, register_protocol

if TYPE_CHECKING:
    from harness.place import Place

BIN = PROJECT_ROOT / "build" / "bin"


@dataclass(frozen=True)
class TimerSettings:
    """How queries are sent; every record carries these back."""

    timeout_ms: int = 5000  # per query; a query that runs out is a `timeout` record
    idle_timeout_ms: int = 10000  # keep an idle connection this long (Stubby's default)
    concurrency: int = 1  # queries in flight at most
    interval_ms: float = 0.0  # pacing: at least this long between two sends
    reuse: bool = True  # False: every query opens its own connection
    nagle: bool = False  # True: leave Nagle on in getdns (Stubby's behaviour)
    resume: bool = False  # True: new connections resume the TLS session of an earlier one (0-RTT for DoQ)


@dataclass(frozen=True)
class Timing:
    """One timed query, as both timer programs print it."""

    index: int
    name: str
    type: str
    protocol: str
    resolver: str
    server: str
    start: float  # wall clock, seconds since the epoch
    duration_us: int | None  # CLOCK_MONOTONIC; None when nothing was sent
    new_connection: bool
    tcp_setup_us: int | None
    tls_setup_us: int | None  # TLS handshake; for QUIC the whole handshake
    rcode: int | None
    answers: int | None
    status: str  # ok | timeout | error | invalid
    transport: str | None  # udp, tcp, tls, h2, quic, h3
    error: str | None
    concurrency: int
    interval_ms: float
    timeout_ms: int
    idle_timeout_ms: int
    nagle: bool
    library: str
    reuse: bool
    # Since TLS resumption was measured; records written before lack them (docs/timer.md).
    resume: bool = False  # the timer offered earlier connections' TLS sessions
    resumed: bool | None = None  # the connection this query opened resumed one; None: it opened none
    zero_rtt: bool | None = None  # that connection carried the query in 0-RTT (DoQ only)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def ms(self) -> float | None:
        return None if self.duration_us is None else self.duration_us / 1000

    @property
    def handshake_us(self) -> int | None:
        """TCP plus TLS setup, or the QUIC handshake, of the connection this query opened."""
        if not self.new_connection or self.tls_setup_us is None:
            return None
        return self.tls_setup_us + (self.tcp_setup_us or 0)

    @classmethod
    def from_json(cls, line: str) -> Timing:
        data = json.loads(line)
        return cls(**{f.name: data[f.name] for f in fields(cls) if f.name in data or f.default is MISSING})

    def to_dict(self) -> dict:
        return asdict(self)


def _dnstimer(protocol: str, resolver: Resolver, ca_file: Path, s: TimerSettings) -> list[str]:
    argv = [str(BIN / "dnstimer"), "--protocol", protocol, "--server", resolver.address]
    if protocol == DOT.name:
        argv += ["--tls-name", resolver.tls_name, "--ca-file", str(ca_file)]
    if protocol == DOH.name:
        argv += ["--url", resolver.doh_uri, "--ca-file", str(ca_file)]
    if not s.reuse:
        argv += ["--no-reuse"]
    if s.nagle:
        argv += ["--nagle"]
    if s.resume:
        argv += ["--resume"]
    return argv


def _quictimer(protocol: str, resolver: Resolver, ca_file: Path, s: TimerSettings) -> list[str]:
    argv = [
        str(BIN / "quictimer"),
        "--protocol",
        protocol,
        "--server",
        resolver.address,
        "--tls-name",
        resolver.tls_name,
        "--ca-file",
        str(ca_file),
        f"--reuse={str(s.reuse).lower()}",
    ]
    if s.resume:
        argv += ["--resume"]
    if protocol == DOQ.name:
        if resolver.doq_port is None:
            raise HarnessError(f"resolver '{resolver.name}' serves no DoQ")
        argv += ["--port", str(resolver.doq_port)]
    else:
        if resolver.doh3_uri is None:
            raise HarnessError(f"resolver '{resolver.name}' serves no DoH3")
        argv += ["--url", resolver.doh3_uri, "--port", str(urlsplit(resolver.doh3_uri).port or 443)]
    return argv


#: A timer program's command-line builder: (protocol, resolver, CA file, settings) -> argv.
TimerArgv = Callable[[str, Resolver, Path, "TimerSettings"], list[str]]

_TIMERS: dict[str, TimerArgv] = {}


def register_timer(protocol: Protocol, build_argv: TimerArgv) -> None:
    """The resolution-timer program for ``protocol``: a function that builds its command line."""
    register_protocol(protocol)
    _TIMERS[protocol.name] = build_argv


def timer_protocols() -> list[str]:
    """Protocols the resolution timer can time, in rank order."""
    return [p.name for p in protocols() if p.name in _TIMERS]


def timer_program(name: str) -> TimerArgv:
    """The command-line builder of protocol ``name``'s timer; a one-line error naming the timed ones."""
    try:
        return _TIMERS[name]
    except KeyError:
        raise HarnessError(f"unknown protocol '{name}' (choose from {', '.join(timer_protocols())})") from None


# Each program registers the protocols it times; a new one is a builder and a line here.
for _protocol in (DO53, DOT, DOH):
    register_timer(_protocol, _dnstimer)
for _protocol in (DOQ, DOH3):
    register_timer(_protocol, _quictimer)


def timer_argv(protocol: str, resolver: Resolver, ca_file: Path, settings: TimerSettings) -> list[str]:
    """The command line that times queries of ``protocol`` to ``resolver`` (names on stdin)."""
    argv = timer_program(protocol)(protocol, resolver, ca_file, settings)
    if not Path(argv[0]).exists():
        raise HarnessError(f"{argv[0]} is missing: run 'bash scripts/setup.sh'")
    return argv + [
        "--resolver",
        resolver.name,
        "--timeout-ms",
        str(settings.timeout_ms),
        "--idle-timeout-ms",
        str(settings.idle_timeout_ms),
        "--concurrency",
        str(settings.concurrency),
        "--interval-ms",
        f"{settings.interval_ms:g}",
    ]


def start_timer(
    client: ClientSide, protocol: str, resolver: Resolver, settings: TimerSettings, duration_s: float | None = None
) -> subprocess.Popen[str]:
    """Start a timer in the client namespace that reads names from its stdin (for ``duration_s`` at most)."""
    argv = timer_argv(protocol, resolver, client.ca_file, settings)
    if duration_s:
        argv += ["--duration-s", f"{duration_s:g}"]
    # It parses resolvers' answers and names taken from pages: unprivileged, no capabilities.
    account = helper()
    argv = netns.command(client.namespace, account.run_as([account.program(argv[0]), *argv[1:]]))
    # A session of its own: a Ctrl-C meant for the crawl must not kill a timer mid-block.
    return subprocess.Popen(
        argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True
    )


def parse_output(proc: subprocess.Popen[str], stdout: str, stderr: str) -> list[Timing]:
    """Records from a finished timer; a usage error or crash is a HarnessError with its one-line reason."""
    if proc.returncode not in (0, None):
        reason = (stderr.strip().splitlines() or [f"exit status {proc.returncode}"])[0]
        raise HarnessError(reason)
    return [Timing.from_json(line) for line in stdout.splitlines() if line.strip()]


def time_names(
    client: ClientSide,
    protocol: str,
    resolver: Resolver,
    names: Iterable[str],
    settings: TimerSettings = TimerSettings(),
) -> list[Timing]:
    """Time one query per name, in the given order; exactly one record per name, in input order."""
    names = list(names)
    proc = start_timer(client, protocol, resolver, settings)
    # The timers bound every query, so the run is bounded too.
    limit = 30 + len(names) * (settings.timeout_ms / 1000 + settings.interval_ms / 1000) / settings.concurrency
    try:
        stdout, stderr = proc.communicate("".join(f"{n}\n" for n in names), timeout=limit)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        raise HarnessError(f"{protocol} timer did not finish {len(names)} queries in {limit:.0f} s") from None
    timings = sorted(parse_output(proc, stdout, stderr), key=lambda t: t.index)
    if len(timings) != len(names):
        raise HarnessError(f"{protocol} timer returned {len(timings)} records for {len(names)} names")
    return timings


def hostnames_from_hars(paths: Iterable[Path]) -> list[str]:
    """Every distinct hostname requested in the HARs (files or directories of *.har / *.har.gz), sorted.

    A HAR that cannot be read is a HarnessError naming it (`dnsstudy timer` was given it by hand).
    """
    names, problems = read_hostnames(paths)
    if problems:
        raise HarnessError(problems[0])
    return names


def read_hostnames(paths: Iterable[Path]) -> tuple[list[str], list[str]]:
    """Every distinct hostname requested in the readable HARs, sorted, and one line per HAR that is not.

    A missing HAR, a truncated gzip, bad JSON or a document that is not a HAR is skipped and named:
    the crawl times a block from what its HARs still hold, and keeps the problems with the block.
    """
    from haralyzer import HarParser

    from harness.browser.har import read_har

    files: list[Path] = []
    problems: list[str] = []
    for path in paths:
        if path.is_dir():
            files += sorted(p for p in path.rglob("*") if p.name.endswith((".har", ".har.gz")))
        elif path.exists():
            files.append(path)
        else:
            problems.append(f"{path}: no such HAR file or directory")
    names: set[str] = set()
    for file in files:
        try:
            har = read_har(file) if file.name.endswith(".gz") else json.loads(file.read_text())
            names |= _hostnames(HarParser(har))
        # A damaged file fails anywhere in gzip, json, haralyzer or URL parsing (EOFError for a truncated gzip,
        # zlib.error, ValueError, KeyError, TypeError, ...): any of them means "not a readable HAR".
        except Exception as exc:
            problems.append(f"{file}: not a readable HAR ({type(exc).__name__}: {exc})")
    return sorted(names), problems


def _hostnames(har: Any) -> set[str]:
    """The hostnames of a parsed HAR's (a haralyzer HarParser) http(s) requests, lower case, no trailing dot."""
    names: set[str] = set()
    for entry in (e for page in har.pages for e in page.entries):
        host = urlsplit(entry.url).hostname
        if host and entry.url.startswith(("http://", "https://")):
            names.add(host.rstrip(".").lower())
    return names


def shuffled(names: Iterable[str], seed: int, *key: str) -> list[str]:
    """A random order of ``names``, the same for the same seed and key."""
    order = sorted(names)
    random.Random("/".join([str(seed), *key])).shuffle(order)
    return order


@dataclass
class PairTimings:
    """The timer's records for one resolver and protocol, or why there are none."""

    resolver: str
    protocol: str
    timings: list[Timing]
    problem: str | None = None


def time_pairs(
    client: ClientSide,
    resolver_of: Callable[[str], Resolver],
    pairs: Iterable[tuple[str, str]],
    names: Iterable[str],
    settings: TimerSettings,
    seed: int,
    pairs_key: tuple[str, ...] = (),
    names_key: tuple[str, ...] = (),
    stopping: Callable[[], bool] = lambda: False,
    on_pair: Callable[[PairTimings], None] = lambda run: None,
) -> list[PairTimings]:
    """Time every name for every (resolver, protocol) pair, pairs and names in a random order from the seed.

    A pair whose timer fails (missing endpoint, crash) keeps its one-line problem and the loop goes on;
    ``on_pair`` sees each pair as it finishes (to keep it at once); ``stopping`` ends the loop early
    (the caller decides what a partial run means: fewer runs than pairs).
    """
    names = list(names)
    order = shuffled([f"{r}/{p}" for r, p in pairs], seed, *pairs_key)
    runs: list[PairTimings] = []
    for pair in order if names else []:
        if stopping():
            break
        resolver, protocol = pair.split("/")
        try:
            timings = time_names(
                client, protocol, resolver_of(resolver), shuffled(names, seed, *names_key, pair), settings
            )
            runs.append(PairTimings(resolver, protocol, timings))
        except HarnessError as exc:
            runs.append(PairTimings(resolver, protocol, [], f"{pair}: {exc}"))
        on_pair(runs[-1])
    return runs


def time_hars(
    place: Place,
    hars: Iterable[Path],
    resolvers: list[str],
    protocols: list[str],
    network: str,
    settings: TimerSettings,
    seed: int,
    results_dir: Path,
) -> tuple[int, list[PairTimings]]:
    """`dnsstudy timer`: time every hostname of the HARs per resolver and protocol, under ``network``.

    Each pair's records are appended to ``results_dir``/timings.jsonl as soon as the pair is done, so an
    interrupted run keeps what it timed. Returns the number of hostnames and the runs.
    """
    from harness.shaping.shaper import shape

    place.require_up()
    for name in resolvers:
        place.resolver(name)  # an unknown name fails here, before anything is shaped or timed
    names = hostnames_from_hars(hars)
    if not names:
        raise HarnessError("the HARs name no hostname to time")
    shape(place, network)
    results_dir.mkdir(parents=True, exist_ok=True)

    def keep(run: PairTimings) -> None:
        with open(results_dir / "timings.jsonl", "a") as f:
            f.writelines(json.dumps({**t.to_dict(), "network": network}) + "\n" for t in run.timings)

    pairs = [(r, p) for r in resolvers for p in protocols]
    runs = time_pairs(place.client_side(), place.resolver, pairs, names, settings, seed, ("pairs",), on_pair=keep)
    return len(names), runs
