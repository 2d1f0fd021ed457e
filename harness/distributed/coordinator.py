"""The coordinator: plans a study over its vantage points, queues their visits, and is the store's only writer.

Each vantage point has a queue and at most `window` visits in it or running,
all from the block its worker is in; a block's timer run is queued once all
its visits are recorded, and the next block's visits only after that, so a
worker shapes its link once per block as a single-host crawl does. Task ids
are fixed by the plan (`study:visit:ORDINAL`), so a coordinator started
again finds the visits still queued, running or finished, and queues only
what is nowhere. A result is completed idempotently: a visit run twice (its
worker died after the visit, before the acknowledgement) is recorded once.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from pathlib import Path

import redis
from celery import Celery
from celery.exceptions import BackendGetMetaError
from kombu.exceptions import OperationalError
from rich.console import Console

from harness.browser.registry import launch_group
from harness.distributed.app import TIMER_TASK, VISIT_TASK, make_app, queue_of
from harness.distributed.broker import connect, display
from harness.distributed.messages import (
    HAR_NAME,
    har_bytes,
    matches,
    timer_message,
    timer_task_id,
    visit_message,
    visit_task_id,
)
from harness.distributed.worker import halt_key
from harness.durable import fsync_directory, write_durably
from harness.errors import HarnessError
from harness.plan import PlannedVisit, make_plan
from harness.schedule import round_start
from harness.store import CompletedVisit, Store
from harness.study import LoadedStudy
from harness.study_run import RunSummary, StudyRun
from harness.timer import read_hostnames

AUDIT_EVERY_S = 30.0  # how often tasks in flight are looked for in the broker (a broker that lost them)
REPORT_EVERY_S = 60.0


@dataclass
class VantageState:
    """What the coordinator knows of one vantage point between two looks at the broker."""

    name: str
    in_flight: dict[str, PlannedVisit] = field(default_factory=dict)  # task id -> visit
    timer: tuple[str, int, str, list[str], int] | None = None  # task id, block, network, unreadable HARs, names
    halted: str | None = None  # the worker's reason, from the broker
    failed: str | None = None  # a task that raised: a bug, not a place's fault; needs a restart
    missing: dict[str, int] = field(default_factory=dict)  # task id -> audits that did not find it
    finished: bool = False


@dataclass
class CoordinatorSummary(RunSummary):
    """What one run of the coordinator did."""

    duplicates: int = 0  # results of visits already recorded (a visit that ran twice)
    requeued: int = 0  # tasks the broker had lost, queued again
    halted: dict[str, str] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        """Whether the plan is done at every vantage point."""
        return self.done == self.total and not self.halted

    def counts(self) -> str:
        return (
            f"{self.duplicates} duplicate results ignored, {self.requeued} lost tasks queued again, "
            f"{self.blocks_timed} blocks timed"
        )

    def notes(self) -> list[str]:
        return [f"halted: {vantage_point}: {reason}" for vantage_point, reason in self.halted.items()]


class Coordinator(StudyRun[CoordinatorSummary]):
    """One study over its vantage points, through one broker, into one store."""

    doing = "coordinated"
    noun = "coordinator"
    orphans_note = "removed {removed} files interrupted completions left (unrecorded HARs, .part)"
    # A signal stops it at its next look at the broker; what is queued stays queued: the next coordinator adopts it.
    extendable = frozenset({"vantage_points"})  # added at the end, they get their part of the plan

    def __init__(
        self,
        loaded: LoadedStudy,
        store: Store,
        broker_url: str,
        results_dir: Path,
        console: Console | None = None,
        window: int = 2,
        moved: bool = False,
        visibility_timeout_s: float | None = None,
    ):
        if not loaded.study.vantage_points:
            raise HarnessError(
                f"{loaded.path}: vantage_points: the study names none; list them, or crawl it with 'dnsstudy crawl'"
            )
        super().__init__(loaded, store, results_dir, console, moved)
        self.broker_url = broker_url
        self.window = max(1, window)
        self.client: redis.Redis = connect(broker_url)  # a wrong password: one line, before the store is touched
        timeout = {"visibility_timeout_s": visibility_timeout_s} if visibility_timeout_s else {}
        self.app: Celery = make_app(broker_url, **timeout)
        # Results are read by key, many at once (`_results`); Celery's per-task pub/sub subscription on every send
        # would cost two round trips a visit for nothing.
        self.app.backend.on_task_call = lambda producer, task_id: None
        self.states = {name: VantageState(name) for name in self.study.vantage_points}
        self.config = loaded.record()["study"]
        self.poll_s = 0.05
        self.plan_id = ""  # the store's, once prepared

    # -- the plan --------------------------------------------------------------------

    def _differences(self, config: dict, existing: dict) -> list[str]:
        """As every run's, and vantage points may only be added, at the end."""
        changed = super()._differences(config, existing)
        # What the plan holds, not what the configuration says: the two are written together, but the plan decides.
        have, want = self._vantage_points()
        if not have:
            changed.append("vantage_points (the store holds a single-host crawl)")
        elif want[: len(have)] != have:
            changed.append("vantage_points (they may only be added at the end)")
        return changed

    def _extend_plan(self, existing: dict) -> None:
        """A vantage point added since gets its part."""
        have, want = self._vantage_points()
        if len(want) > len(have):
            self._add_vantage_points(want[len(have) :], existing)

    def _vantage_points(self) -> tuple[list[str], list[str]]:
        """The vantage points the store's plan has, and the study's."""
        return [p for p in self.store.vantage_points(self.study_id) if p], self.study.vantage_points

    def _add_vantage_points(self, names: list[str], existing: dict) -> None:
        """Plan the study again at vantage points added mid-study, after every visit planned so far."""
        s = self.study
        end = self.store.plan_end(self.study_id)
        plan = make_plan(
            self.loaded.sites,
            s.rounds,
            s.networks,
            s.configurations,
            s.seed,
            names,
            end.ordinal,
            end.block,
            s.browsers,
            s.browsers_apart,
            launch_group,
        )
        added = self.store.extend_plan(self.study_id, {**existing, "study": self.config}, plan)
        self.console.print(f"vantage points {', '.join(names)} added: {added} visits planned")

    # -- the run ---------------------------------------------------------------------

    def _new_summary(self) -> CoordinatorSummary:
        return CoordinatorSummary()

    def _set_up(self) -> None:
        self.plan_id = self.store.plan_id()
        self._remove_orphans()
        self._adopt()

    def _opening_line(self) -> str:
        return f"study {self.study_id}: coordinating {', '.join(self.states)} through {display(self.broker_url)}"

    def _left_on_a_full_disk(self) -> str:
        return "the results stay in the broker; free space and run the same command"

    def _sum_up(self, summary: CoordinatorSummary) -> None:
        summary.halted = {s.name: s.halted or s.failed or "" for s in self.states.values() if s.halted or s.failed}

    def _do_visits(self, summary: CoordinatorSummary) -> None:
        """Queue, collect and record until every vantage point is done, or every unfinished one halted."""
        audit = report = time.monotonic()
        while not self.stopping:
            try:
                worked = self._step(summary)
                if time.monotonic() - audit > AUDIT_EVERY_S:
                    audit = time.monotonic()
                    summary.requeued += self._audit()
            except (redis.ConnectionError, redis.TimeoutError, OperationalError, BackendGetMetaError) as exc:
                self.console.print(f"broker {display(self.broker_url)} unreachable ({exc}); trying again in 5 s")
                time.sleep(5)
                continue
            if time.monotonic() - report > REPORT_EVERY_S:
                report = time.monotonic()
                self.console.print(self._progress_line(), markup=False, highlight=False, soft_wrap=True)
            states = self.states.values()
            if all(s.finished for s in states):
                return
            busy = any(s.in_flight or s.timer for s in states if not (s.halted or s.failed))
            if not busy and all(s.finished or s.halted or s.failed for s in states):
                for s in states:
                    if s.halted or s.failed:
                        self.console.print(f"vantage point {s.name} halted: {s.halted or s.failed}", markup=False)
                return
            if not worked:
                time.sleep(self.poll_s)

    def _step(self, summary: CoordinatorSummary) -> bool:
        """Look at every vantage point once: halts, results, and what to queue next. True if anything came."""
        for state in self.states.values():
            self._look_for_halt(state)
        worked = self._collect(summary)
        for state in self.states.values():
            if not state.failed:
                self._dispatch(state)
        return worked

    def _look_for_halt(self, state: VantageState) -> None:
        reason = self.client.get(halt_key(state.name))
        halted = reason.decode() if isinstance(reason, bytes) else reason
        if halted != state.halted:
            if halted:
                self.console.print(
                    f"vantage point {state.name} halted: {halted}; its visits wait in its queue, the others go on",
                    markup=False,
                    soft_wrap=True,
                )
            else:
                self.console.print(f"vantage point {state.name}: its worker is back")
            state.halted = halted

    def _results(self, task_ids: list[str]) -> dict[str, dict]:
        """The finished ones among ``task_ids`` (one round trip to the broker): task id -> Celery's meta."""
        if not task_ids:
            return {}
        backend = self.app.backend
        values = backend.mget([backend.get_key_for_task(t) for t in task_ids])
        metas = {t: backend.decode_result(v) for t, v in zip(task_ids, values, strict=True) if v is not None}
        return {t: m for t, m in metas.items() if m["status"] in ("SUCCESS", "FAILURE", "REVOKED")}

    def _collect(self, summary: CoordinatorSummary) -> bool:
        """Complete every finished task: the visits' HARs written, then their records in one transaction."""
        flying = {t: (s, v) for s in self.states.values() for t, v in s.in_flight.items()}
        timers = {s.timer[0]: s for s in self.states.values() if s.timer is not None}
        finished = self._results([*flying, *timers])
        if not finished:
            return False
        completed: list[tuple[PlannedVisit, dict]] = []
        for task_id, meta in finished.items():
            if task_id in timers:
                self._timer_finished(timers[task_id], meta, summary)
                continue
            state, visit = flying[task_id]
            if meta["status"] == "SUCCESS":
                completed.append((visit, meta["result"]))
            else:
                state.failed = f"visit {visit.ordinal} failed on the worker: {meta['result']}"
                self.console.print(f"vantage point {state.name}: {state.failed}", markup=False, soft_wrap=True)
            del state.in_flight[task_id]
            state.missing.pop(task_id, None)
        recorded = complete_visits(self.store, self.study_id, self.results_dir / "hars", completed, self.console)
        summary.visits += recorded
        summary.duplicates += len(completed) - recorded
        self.client.delete(*[self.app.backend.get_key_for_task(t) for t in finished])  # HARs leave Redis's memory
        return True

    def _timer_finished(self, state: VantageState, meta: dict, summary: CoordinatorSummary) -> None:
        assert state.timer is not None
        _, block, network, unreadable, names = state.timer
        state.timer = None
        if meta["status"] != "SUCCESS":
            state.failed = f"the timer run of block {block} failed on the worker: {meta['result']}"
            self.console.print(f"vantage point {state.name}: {state.failed}", markup=False, soft_wrap=True)
            return
        result = meta["result"]
        problem = "; ".join(result["problems"]) or None
        self.store.add_block_timings(self.study_id, block, network, names, result["records"], problem, unreadable)
        summary.blocks_timed += 1

    def _dispatch(self, state: VantageState) -> None:
        """Queue the vantage point's next visits (up to the window, within its block) or its block's timer run."""
        if state.timer is not None:
            return
        planned = self.store.planned_at(self.study_id, state.name, self.window)
        if planned and time.time() < round_start(self.loaded, planned[0].round, self.first_start):
            return  # the study's duration spreads its rounds: this one starts later
        if planned and state.in_flight and planned[0].block == next(iter(state.in_flight.values())).block:
            untimed = None  # within a block: no block can have finished since the last look
        else:
            untimed = self._untimed_block(state.name, planned[0].block if planned else None)
        if untimed is not None:
            if not state.in_flight:
                self._send_timer(state, *untimed)
            return
        if not planned:
            state.finished = not state.in_flight
            return
        for visit in planned:
            if visit.block != planned[0].block:
                break
            task_id = visit_task_id(self.plan_id, self.study_id, visit)
            if task_id not in state.in_flight:
                state.in_flight[task_id] = visit
                self.app.send_task(
                    VISIT_TASK,
                    args=[visit_message(self.study_id, self.config, visit)],
                    task_id=task_id,
                    queue=queue_of(state.name),
                )

    def _untimed_block(self, vantage_point: str, before: int | None) -> tuple[int, str] | None:
        """The vantage point's first block with every visit done but no timer run, before block ``before``."""
        if not self.study.timer.enabled:
            return None
        for untimed in self.store.untimed_blocks(self.study_id, vantage_point):
            if before is None or untimed.block < before:
                return untimed.block, untimed.network
        return None

    def _send_timer(self, state: VantageState, block: int, network: str) -> None:
        names, unreadable = read_hostnames(Path(p) for p in self.store.block_hars(self.study_id, block))
        task_id = timer_task_id(self.plan_id, self.study_id, block)
        state.timer = (task_id, block, network, unreadable, len(names))
        if self.app.backend.get_task_meta(task_id)["status"] == "PENDING" and task_id not in self._in_broker():
            self.app.send_task(
                TIMER_TASK,
                args=[timer_message(self.study_id, self.config, block, network, names)],
                task_id=task_id,
                queue=queue_of(state.name),
            )

    # -- what the broker holds ---------------------------------------------------------

    def _adopt(self) -> None:
        """After a restart: the visits already queued, running or finished count as in flight, not to be sent."""
        held = self._in_broker()
        for state in self.states.values():
            for visit in self.store.planned_at(self.study_id, state.name, self.window):
                task_id = visit_task_id(self.plan_id, self.study_id, visit)
                if task_id in held or self.app.backend.get_task_meta(task_id)["status"] != "PENDING":
                    state.in_flight[task_id] = visit

    def _in_broker(self) -> set[str]:
        """Ids of the tasks in the vantage points' queues or taken by a worker and not yet acknowledged."""
        ids: set[str] = set()
        raw = [m for s in self.states for m in self.client.lrange(queue_of(s), 0, -1)]
        raw += [json.loads(v)[0] for v in self.client.hvals("unacked")]
        for message in raw:
            body = json.loads(message) if isinstance(message, bytes | str) else message
            task_id = (body.get("headers") or {}).get("id")
            if task_id:
                ids.add(task_id)
        return ids

    def _audit(self) -> int:
        """Queue again what is in flight but neither in the broker nor finished, twice in a row; how many."""
        held = self._in_broker()
        again = 0
        for state in self.states.values():
            for task_id, visit in state.in_flight.items():
                if task_id in held or self.app.backend.get_task_meta(task_id)["status"] != "PENDING":
                    state.missing.pop(task_id, None)
                    continue
                state.missing[task_id] = state.missing.get(task_id, 0) + 1
                if state.missing[task_id] >= 2:  # once may be the instant a worker moves it to `unacked`
                    self.console.print(f"visit {visit.ordinal} ({state.name}) was lost by the broker: queued again")
                    self.app.send_task(
                        VISIT_TASK,
                        args=[visit_message(self.study_id, self.config, visit)],
                        task_id=task_id,
                        queue=queue_of(state.name),
                    )
                    del state.missing[task_id]
                    again += 1
            again += self._audit_timer(state, held)
        return again

    def _audit_timer(self, state: VantageState, held: set[str]) -> int:
        """A timer run the broker lost (missing twice) is sent again by the next look at the vantage point."""
        if state.timer is None:
            return 0
        task_id = state.timer[0]
        if task_id in held or self.app.backend.get_task_meta(task_id)["status"] != "PENDING":
            state.missing.pop(task_id, None)
            return 0
        state.missing[task_id] = state.missing.get(task_id, 0) + 1
        if state.missing[task_id] < 2:
            return 0
        self.console.print(
            f"the timer run of block {state.timer[1]} ({state.name}) was lost by the broker: queued again"
        )
        del state.missing[task_id]
        state.timer = None  # `_dispatch` finds the block untimed and sends its run again
        return 1

    def _progress_line(self) -> str:
        parts = []
        for name, counts in self.store.vantage_points(self.study_id).items():
            state = self.states.get(name)
            mark = " halted" if state and (state.halted or state.failed) else ""
            parts.append(f"{name} {counts.done}/{counts.total}{mark}")
        return f"progress: {'; '.join(parts)}"


def complete_visits(
    store: Store, study_id: str, hars: Path, results: list[tuple[PlannedVisit, dict]], console: Console
) -> int:
    """Record results not recorded before (a visit that ran twice counts once); how many were recorded.

    Their HARs are written into ``hars`` and fsynced first, the directory once, then every record in one
    transaction. A result that is not of its visit (another URL, resolver, protocol or vantage point; a HAR
    name that could be a path) is ignored, saying so.
    """
    fresh: list[CompletedVisit] = []
    for visit, result in results:
        known = store.planned_visit(study_id, visit.ordinal)
        if known is None or known.done or any(c.visit.ordinal == visit.ordinal for c in fresh):
            continue
        record = result["record"]
        har = result.get("har")
        if not matches(visit, record) or (har and not HAR_NAME.match(har["name"])):
            console.print(f"visit {visit.ordinal}: a result that is not of this visit, ignored", markup=False)
            continue
        if har:
            path = hars / har["name"]
            write_durably(har_bytes(har["data"]), path, sync_directory=False)
            record["har_path"] = str(path)
        for check in result.get("checks") or []:
            store.add_link_check(study_id, visit.block, visit.network, check)
        if result.get("environment"):
            prefix = f"{visit.vantage_point}/"
            store.record_environment(study_id, {prefix + k: v for k, v in result["environment"].items()})
        fresh.append(CompletedVisit(visit, record, result.get("attempts", 0)))
    if fresh:
        fsync_directory(hars)
        store.complete_many(study_id, fresh)
    return len(fresh)
