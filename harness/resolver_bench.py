"""Resolver benchmarks (`dnsstudy bench`): the reference study's resolver measurements over the lab's link.

Not the tool's own performance benchmarks, which are the scripts under benchmarks/.

Four benchmarks, configured by a profile under profiles/bench/:
loss sweep (throughput, latency and success as loss grows), repeat (mean and
relative standard deviation of one name), handshake (new-connection cost
as a multiple of the path's RTT), and resumption (cold against resumed TLS
handshakes, in RTTs; it needs a lab with `tls_resumption`). Each returns raw
timings and a table.
"""

from __future__ import annotations

import json
import statistics
import threading
import time
from dataclasses import dataclass
from itertools import cycle
from pathlib import Path
from typing import TYPE_CHECKING

from pydantic import BaseModel, ConfigDict, Field

from harness.errors import HarnessError
from harness.paths import PROJECT_ROOT
from harness.place import ClientSide, Place, Resolver
from harness.profile import load_profile
from harness.shaping.link_profile import Direction, LinkProfile, load_link_profile
from harness.shaping.probes import probe_rtt
from harness.shaping.shaper import Shaper
from harness.timer import TimerSettings, Timing, parse_output, start_timer, time_names, timer_protocols

if TYPE_CHECKING:
    from harness.lab.lab import Lab

DEFAULT_PROFILE = PROJECT_ROOT / "profiles" / "bench" / "default.toml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")
    source: str = Field(min_length=1)


class LossSweep(_Strict):
    loss_percent: list[float] = Field(min_length=1)
    protocols: list[str] = Field(min_length=1)
    seconds: float = Field(gt=0)
    base_network: str = "wired"
    timeout_ms: int = Field(default=2000, gt=0)
    concurrency: int = Field(default=1, gt=0)


class Repeat(_Strict):
    queries: int = Field(gt=1)
    name: str
    protocols: list[str] = Field(min_length=1)
    network: str = "wired"


class Handshake(_Strict):
    samples: int = Field(gt=0)
    protocols: list[str] = Field(min_length=1)
    network: str = "wired"
    rtt_probes: int = Field(default=200, ge=10)


class Resumption(_Strict):
    samples: int = Field(gt=0)
    protocols: list[str] = Field(min_length=1)
    name: str = "www.lab.test"
    network: str = "4g-symmetric"
    # One lost packet costs a retransmission timeout, many RTTs: enough to hide
    # the one RTT a resumption may save. Round trips are what this counts.
    without_loss: bool = True
    rtt_probes: int = Field(default=200, ge=10)


class BenchProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    loss_sweep: LossSweep
    repeat: Repeat
    handshake: Handshake
    resumption: Resumption | None = None  # profiles copied before it existed lack it


def load_bench_profile(path: Path = DEFAULT_PROFILE) -> BenchProfile:
    profile = load_profile(path, BenchProfile)
    sections = (profile.loss_sweep, profile.repeat, profile.handshake, profile.resumption)
    for section in (s for s in sections if s is not None):
        for protocol in section.protocols:
            if protocol not in timer_protocols():
                raise HarnessError(
                    f"{path}: unknown protocol '{protocol}' (choose from {', '.join(timer_protocols())})"
                )
    return profile


@dataclass
class BenchResult:
    """A benchmark's table (rows of dicts, in print order) and its raw records."""

    name: str
    rows: list[dict]
    timings: list[Timing]
    notes: list[str]

    def save(self, directory: Path) -> tuple[Path, Path]:
        """Write <name>.jsonl (every record) and <name>.json (the table)."""
        directory.mkdir(parents=True, exist_ok=True)
        raw, table = directory / f"{self.name}.jsonl", directory / f"{self.name}.json"
        raw.write_text("".join(json.dumps(t.to_dict()) + "\n" for t in self.timings))
        table.write_text(json.dumps({"rows": self.rows, "notes": self.notes}, indent=1))
        return raw, table


def with_loss(base: LinkProfile, percent: float) -> LinkProfile:
    """``base`` with ``percent`` loss on each direction."""

    def direction(d: Direction) -> Direction:
        return d.model_copy(update={"loss_percent": percent})

    return base.model_copy(
        update={
            "name": f"{base.name}+loss{percent:g}",
            "uplink": direction(base.uplink),
            "downlink": direction(base.downlink),
        }
    )


def _for_duration(
    client: ClientSide, protocol: str, resolver: Resolver, names: list[str], seconds: float, settings: TimerSettings
) -> list[Timing]:
    """Feed names (cycling) to one timer that sends for ``seconds``, then answers what is in flight."""
    proc = start_timer(client, protocol, resolver, settings, duration_s=seconds)
    stdin = proc.stdin
    assert stdin is not None

    def feed() -> None:
        # The pipe holds far more names than the timer sends; the timer stops
        # at its own deadline and the write then fails: that is the end.
        try:
            for name in cycle(names):
                stdin.write(name + "\n")
        except (BrokenPipeError, ValueError):
            pass
        finally:
            try:
                stdin.close()
            except BrokenPipeError:
                pass

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    stdout = proc.stdout.read() if proc.stdout else ""
    stderr = proc.stderr.read() if proc.stderr else ""
    proc.wait()
    feeder.join()
    return parse_output(proc, stdout, stderr)


def loss_sweep(place: Place, resolver: Resolver, names: list[str], cfg: LossSweep) -> BenchResult:
    """Queries per second, mean latency of successful queries and success rate, per loss level and protocol."""
    shaper, client = Shaper(place), place.client_side()
    base = load_link_profile(cfg.base_network)
    settings = TimerSettings(timeout_ms=cfg.timeout_ms, concurrency=cfg.concurrency)
    rows, timings = [], []
    try:
        for loss in cfg.loss_percent:
            shaper.apply(with_loss(base, loss))
            for protocol in cfg.protocols:
                start = time.monotonic()
                got = _for_duration(client, protocol, resolver, names, cfg.seconds, settings)
                elapsed = time.monotonic() - start
                ok = [t.ms for t in got if t.ok and t.ms is not None]
                rows.append(
                    {
                        "loss_percent": loss,
                        "protocol": protocol,
                        "queries": len(got),
                        "queries_per_second": round(len(ok) / elapsed, 2),
                        "mean_latency_ms": round(statistics.fmean(ok), 3) if ok else None,
                        "success_rate": round(len(ok) / len(got), 4) if got else None,
                    }
                )
                timings += got
    finally:
        shaper.clear()
    return BenchResult(
        "loss_sweep",
        rows,
        timings,
        [
            f"{cfg.base_network} with the loss on both directions; {cfg.seconds:g} s per cell, "
            f"{cfg.concurrency} query in flight, timeout {cfg.timeout_ms} ms; "
            "queries per second counts answered queries",
            f"resolver {resolver.name}; connections reused (idle timeout {settings.idle_timeout_ms} ms)",
        ],
    )


def repeat(place: Place, resolvers: list[Resolver], cfg: Repeat) -> BenchResult:
    """Mean and relative standard deviation of ``queries`` queries of one name, per resolver and protocol."""
    shaper, client = Shaper(place), place.client_side()
    shaper.apply(load_link_profile(cfg.network))
    rows, timings = [], []
    try:
        for resolver in resolvers:
            for protocol in cfg.protocols:
                # One more than asked: the first opens the connection and is reported apart.
                got = time_names(client, protocol, resolver, [cfg.name] * (cfg.queries + 1))
                warm = [t.ms for t in got[1:] if t.ok and t.ms is not None]
                mean = statistics.fmean(warm) if warm else None
                rsd = 100 * statistics.stdev(warm) / mean if len(warm) > 1 and mean else None
                rows.append(
                    {
                        "resolver": resolver.name,
                        "protocol": protocol,
                        "answered": len(warm),
                        "of": cfg.queries,
                        "first_ms": got[0].ms,
                        "mean_ms": _r(mean),
                        "median_ms": _r(statistics.median(warm)) if warm else None,
                        "rsd_percent": _r(rsd, 1),
                    }
                )
                timings += got
    finally:
        shaper.clear()
    return BenchResult(
        "repeat",
        rows,
        timings,
        [
            f"network {cfg.network}; one connection per resolver and protocol, kept warm; "
            "the first query (which opens it) is excluded from mean and RSD"
        ],
    )


def _path_rtt(place: Place, link: LinkProfile, probes: int, bench: str) -> tuple[float, int]:
    """The median RTT of ``probes`` UDP probes on the shaped path, and how many came back."""
    wait = max(1.0, 3 * (link.round_trip()["added_rtt_ms"] + 4 * link.round_trip()["rtt_jitter_ms"]) / 1000)
    rtts, _, _ = probe_rtt(place, probes, 0.01, wait)
    if not rtts:
        raise HarnessError(f"{bench} bench: no RTT probe came back; is the link up?")
    return statistics.median(rtts), len(rtts)


def handshake(place: Place, resolver: Resolver, cfg: Handshake) -> BenchResult:
    """New-connection handshake time per protocol, and its ratio to the path's RTT."""
    shaper, client = Shaper(place), place.client_side()
    link = load_link_profile(cfg.network)
    shaper.apply(link)
    rows, timings = [], []
    try:
        rtt, probed = _path_rtt(place, link, cfg.rtt_probes, "handshake")
        for protocol in cfg.protocols:
            # A first connection warms the library (CA file, TLS contexts) and is not counted.
            got = time_names(
                client, protocol, resolver, ["www.lab.test"] * (cfg.samples + 1), TimerSettings(reuse=False)
            )[1:]
            hs = sorted(t.handshake_us / 1000 for t in got if t.ok and t.handshake_us is not None)
            ratios = [h / rtt for h in hs]
            rows.append(
                {
                    "protocol": protocol,
                    "samples": len(hs),
                    "rtt_ms": round(rtt, 3),
                    "handshake_median_ms": _r(statistics.median(hs)) if hs else None,
                    "ratio_p10": _r(_quantile(ratios, 0.1), 2),
                    "ratio_median": _r(_quantile(ratios, 0.5), 2),
                    "ratio_p90": _r(_quantile(ratios, 0.9), 2),
                    "ratio_cdf": [round(r, 3) for r in ratios],
                }
            )
            timings += got
    finally:
        shaper.clear()
    return BenchResult(
        "handshake",
        rows,
        timings,
        [
            f"network {cfg.network}; RTT = median of {probed} UDP probes on the same path; "
            "handshake = TCP + TLS setup (DoT, DoH) or the QUIC handshake (DoQ, DoH3); every sample a new connection"
        ],
    )


def resumption(place: Place, resolver: Resolver, cfg: Resumption) -> BenchResult:
    """Cold and resumed handshakes per protocol, and the first answer on each, in RTTs of the path.

    Every sample opens a new connection: cold ones offer no TLS session, resumed ones the newest
    session an earlier connection received. The resolver must issue session tickets (a lab with
    `tls_resumption`). Two rows per protocol, cold then resumed (see _resumption_row).
    """
    shaper, client = Shaper(place), place.client_side()
    link = load_link_profile(cfg.network)
    if cfg.without_loss:
        link = with_loss(link, 0.0)
    shaper.apply(link)
    rows, timings = [], []
    try:
        rtt, probed = _path_rtt(place, link, cfg.rtt_probes, "resumption")
        for protocol in cfg.protocols:
            names = [cfg.name] * (cfg.samples + 1)
            # The first connection of each run is not counted: it warms the library (CA file, TLS context),
            # and in the resumed run it is the full handshake that receives the first ticket.
            cold = time_names(client, protocol, resolver, names, TimerSettings(reuse=False))[1:]
            resumed = time_names(client, protocol, resolver, names, TimerSettings(reuse=False, resume=True))[1:]
            rows += resumption_rows(protocol, rtt, cold, resumed)
            timings += cold + resumed
    finally:
        shaper.clear()
    return BenchResult(
        "resumption",
        rows,
        timings,
        [
            f"network {link.name}; RTT {rtt:.2f} ms = median of {probed} UDP probes on the same path; "
            f"resolver {resolver.name}; every sample a new connection",
            "cold: no TLS session offered; resumed: the newest session of an earlier connection offered",
            "handshake = TCP + TLS (DoT, DoH) or QUIC (DoQ, DoH3) until the query can be sent; "
            "answer = the whole query on a new connection, handshake included (medians)",
            "resumed counts the connections the server resumed, zero_rtt those whose query went in 0-RTT; "
            "the medians take only the connections the row's kind says",
        ],
    )


def resumption_rows(protocol: str, rtt_ms: float, cold: list[Timing], resumed: list[Timing]) -> list[dict]:
    """One protocol's two rows: its cold connections, then its resumed ones."""
    return [_resumption_row(protocol, "cold", rtt_ms, cold), _resumption_row(protocol, "resumed", rtt_ms, resumed)]


def _resumption_row(protocol: str, kind: str, rtt_ms: float, timings: list[Timing]) -> dict:
    """Median handshake (ms, RTTs) and first answer (RTTs) of one run's new connections, and what they resumed.

    `resumed` and `zero_rtt` count the run's answered connections; the medians take only those that are
    what ``kind`` says (cold: not resumed; resumed: resumed), so a refused resumption is not a fast cold one.
    """
    answered = [t for t in timings if t.ok and t.handshake_us is not None]
    chosen = [t for t in answered if bool(t.resumed) == (kind == "resumed")]
    handshake = (
        statistics.median(t.handshake_us / 1000 for t in chosen if t.handshake_us is not None) if chosen else None
    )
    answer = statistics.median(t.ms for t in chosen if t.ms is not None) if chosen else None
    return {
        "protocol": protocol,
        "kind": kind,
        "samples": len(timings),
        "resumed": sum(bool(t.resumed) for t in answered),
        "zero_rtt": sum(bool(t.zero_rtt) for t in answered),
        "handshake_ms": _r(handshake),
        "handshake_rtts": None if handshake is None else round(handshake / rtt_ms, 2),
        "answer_rtts": None if answer is None else round(answer / rtt_ms, 2),
    }


def _resumption_settings(lab: Lab, settings: BenchProfile) -> Resumption:
    """The profile's [resumption] section, once checked that the lab's resolvers issue session tickets."""
    if settings.resumption is None:
        raise HarnessError("the bench profile has no [resumption] section (see profiles/bench/default.toml)")
    if not lab.config.settings.tls_resumption:
        raise HarnessError(
            f"the lab profile {lab.config.source} sets no tls_resumption: its resolvers issue no TLS session "
            "tickets, so DoT and DoH cannot resume; name a lab whose profile does (profiles/lab/resumption.toml)"
        )
    return settings.resumption


def _quantile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None else round(value, digits)


def run(which: str, lab: Lab, resolvers: list[Resolver], settings: BenchProfile) -> list[BenchResult]:
    """The benchmarks ``which`` names (loss, repeat, handshake, all, or resumption, which all leaves out:
    it needs a lab with `tls_resumption`); loss, handshake and resumption use the first resolver."""
    if which == "resumption":
        return [resumption(lab, resolvers[0], _resumption_settings(lab, settings))]
    runs = []
    if which in ("loss", "all"):
        runs.append(loss_sweep(lab, resolvers[0], lab.web_hostnames(), settings.loss_sweep))
    if which in ("repeat", "all"):
        runs.append(repeat(lab, resolvers, settings.repeat))
    if which in ("handshake", "all"):
        runs.append(handshake(lab, resolvers[0], settings.handshake))
    return runs
