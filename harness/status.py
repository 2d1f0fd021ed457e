"""`dnsstudy status STORE`: where the crawls of a store stand, read without disturbing a crawl that writes it.

The store is opened read-only (`Store.read_only`) and read in one short
read transaction: with WAL (the store's journal mode) that never blocks the
crawler; without it, a shared lock of milliseconds, which the crawler's
busy timeout waits out. Whether the crawler is alive comes from the
store's `crawler` record (harness/process_identity.py): its pid must still name the
process that started at the recorded tick, in the same boot, on this host.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

from harness.lab.state import faults_of_place
from harness.process_identity import Identity, liveness
from harness.progress import RECENT_VISITS, finish_time, iso_unix, recent_rate, round_starts
from harness.store import Store
from harness.store.records import (
    BlockOverview,
    ConfigurationCounts,
    CrawlerRecord,
    FailedVisit,
    HarnessFailure,
    ReplayCounts,
)

#: A study's state, and what `dnsstudy status` exits with when it is the most pressing of the store.
EXIT_CODES = {"finished": 0, "stopped": 1, "running": 3}


@dataclass
class StudyStatus:
    """One study of the store, as `dnsstudy status` shows it."""

    study_id: str
    state: str  # finished, running, stopped
    why: str  # one line: who runs it, or how it ended
    done: int
    total: int
    crawler: dict | None  # the store's record, with `liveness`: alive, dead, elsewhere, ended
    rate_per_hour: float | None  # over the last 15 min of visits
    last_visit_at: float | None  # Unix time the newest visit started
    eta: float | None  # Unix time the plan is done: running at the rate, or if resumed now
    configurations: list[ConfigurationCounts] = field(default_factory=list)
    blocks: list[BlockOverview] = field(default_factory=list)
    harness_failures: list[HarnessFailure] = field(default_factory=list)
    counted_failures: list[FailedVisit] = field(default_factory=list)
    # Faults the labs the study was crawled at from this host carry now: place, name, resolver, owner, and whether
    # the study declares it. `labs` names those labs ("lab:dsl"); a vantage point's lab is on its worker's host.
    faults: list[dict] = field(default_factory=list)
    labs: list[str] = field(default_factory=list)
    replay: ReplayCounts | None = None  # what its visits on a replayed web met (None: no such visit)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class StoreStatus:
    """Every study of one store."""

    path: str
    journal_mode: str
    studies: list[StudyStatus]

    @property
    def exit_code(self) -> int:
        """3 if a crawl runs, else 1 if a study is unfinished, else 0 (also for a store with no study)."""
        codes = {EXIT_CODES[s.state] for s in self.studies}
        return 3 if 3 in codes else max(codes, default=0)

    def to_dict(self) -> dict:
        return {
            "store": self.path,
            "journal_mode": self.journal_mode,
            "exit_code": self.exit_code,
            "studies": [s.to_dict() for s in self.studies],
        }


def store_status(path: Path, failures: int = 5, now: float | None = None) -> StoreStatus:
    """Read the status of every study in the store at ``path`` (HarnessError if it is not a store)."""
    store = Store.read_only(path)
    try:
        with store.snapshot():  # one read transaction for every figure
            studies = [_study(store, sid, failures, time.time() if now is None else now) for sid in store.study_ids()]
            mode = store.journal_mode()
    finally:
        store.close()
    return StoreStatus(str(path), mode, studies)


def _study(store: Store, sid: str, failures: int, now: float) -> StudyStatus:
    counts = store.progress(sid)
    done, total = counts.done, counts.total
    times = sorted(t for t in (iso_unix(v.started_at) for v in store.recent_visits(sid, RECENT_VISITS)) if t)
    rate = recent_rate(times)
    crawler = store.crawler(sid)
    state, why, live = _state(crawler, done, total)
    eta = None
    if rate and done < total:
        study = (store.study_config(sid) or {}).get("study", {})
        starts = round_starts(store.study_started_at(sid) or now, study.get("rounds") or 1, study.get("duration_days"))
        eta = finish_time(now, store.planned_by_round(sid), rate, starts)
    return StudyStatus(
        study_id=sid,
        state=state,
        why=why,
        done=done,
        total=total,
        crawler=None if crawler is None else {**asdict(crawler), "liveness": live},
        rate_per_hour=rate,
        last_visit_at=times[-1] if times else None,
        eta=eta,
        configurations=_configurations(store, sid),
        blocks=store.blocks_overview(sid),
        harness_failures=store.harness_failures(sid, failures),
        counted_failures=store.counted_failures(sid, failures),
        faults=_faults(store, sid),
        labs=[place for place in store.places(sid) if place.startswith("lab:")],
        replay=store.replay_counts(sid),
    )


def _faults(store: Store, sid: str) -> list[dict]:
    """The faults the study's places carry now (read from each lab's state), each marked declared or not."""
    study = (store.study_config(sid) or {}).get("study", {})
    declared = {(f.get("name"), f.get("resolver")) for f in study.get("faults") or []}
    return [
        {
            "place": place,
            "name": f.name,
            "resolver": f.resolver,
            "owner": f.owner,
            "declared": (f.name, f.resolver) in declared,
        }
        for place in store.places(sid)
        for f in faults_of_place(place)
    ]


def _state(crawler: CrawlerRecord | None, done: int, total: int) -> tuple[str, str, str | None]:
    """(state, why, the crawler's liveness: alive, dead, elsewhere, ended) from its record and the progress."""
    finished = total > 0 and done == total
    if crawler is None:  # never crawled since crawls record themselves
        if finished:
            return "finished", "the plan is done", None
        return "stopped", "no crawler recorded in this store", None
    who = f"crawler pid {crawler.pid} on {crawler.hostname}, started {_local(crawler.started_at)}"
    if crawler.ended_at is None:
        live = liveness(Identity(crawler.pid, crawler.pid_started, crawler.boot_id, crawler.hostname))
        if live == "alive":
            return "running", f"{who}, alive", live
        if live == "elsewhere":
            return "running", f"{who}: another host, so whether it is alive cannot be told from here", live
        state = "finished" if finished else "stopped"
        return state, f"{who}, died without ending (killed, crashed, or the machine went down)", live
    ending = crawler.ending or "ended"
    return ("finished" if finished else "stopped"), f"{who}, ended {_local(crawler.ended_at)}: {ending}", "ended"


def _configurations(store: Store, sid: str) -> list[ConfigurationCounts]:
    """Success per configuration, in the study's order of resolvers and protocols."""
    study = (store.study_config(sid) or {}).get("study", {})
    resolvers, protocols = study.get("resolvers") or [], study.get("protocols") or []

    def order(c: ConfigurationCounts) -> tuple:
        return (_index(resolvers, c.resolver), c.resolver, _index(protocols, c.protocol), c.protocol)

    return sorted(store.configuration_counts(sid), key=order)


def _index(items: list, item: object) -> int:
    return items.index(item) if item in items else len(items)


def _local(unix: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M", time.localtime(unix))
