"""A worker: one vantage point's place and shaping, taking that vantage point's tasks from its queue.

It runs each visit as the single-host crawl does (`Station`: the block's
link shaped and checked when a new block starts, harness failures retried,
the place's health watched) and returns the record with the HAR; it writes
no store. When its place dies or hangs it halts: the visit goes back to the
queue, the halt is left in the broker for the coordinator to report, and
the worker exits with status 2. Started again once the place is healthy, it
takes the same visit again.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import redis
from celery import Celery
from celery.exceptions import Reject
from celery.worker import state as worker_state
from rich.console import Console

from harness.distributed.app import TIMER_TASK, VISIT_TASK, make_app, queue_of
from harness.distributed.broker import connect, display
from harness.distributed.capacity import WORKER_DOING, capacity_warning
from harness.distributed.messages import har_payload, visit_of
from harness.errors import HarnessError
from harness.lock import using_place
from harness.place import Place
from harness.station import CrawlHalted, Station, clean_up_client, timed_out
from harness.study import Study

WORKER_DIR = Path("/var/lib/dnsstudy/worker")  # HARs between a visit and its result's delivery


def halt_key(vantage_point: str) -> str:
    """Where a halted worker leaves its reason for the coordinator (deleted when a worker starts again)."""
    return f"dnsstudy:halted:{vantage_point}"


def fault_owner(vantage_point: str) -> str:
    """Who the lab's state says applied the faults a worker applies for its studies."""
    return f"by the worker of vantage point {vantage_point}"


def refuse_others_faults(place: Place, vantage_point: str) -> None:
    """A worker applies each study's faults itself, so any fault but one a killed worker of this vantage point
    left was applied by someone else (by hand, a crawl): its visits would count failures nobody declared."""
    mine = fault_owner(vantage_point)
    foreign = [f for f in place.active_faults() if f.owner != mine]
    place.refuse_faults(foreign, f"which the worker of vantage point {vantage_point} did not apply")


#: The signals Celery's worker handles in Python (warm and cold shutdown, restart, its stack dump).
CELERY_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGQUIT, signal.SIGHUP, signal.SIGUSR1)
_quiet_children = False


def forked_children_take_default_signals() -> None:
    """From now on, a child forked from this process meets these signals with the default action (it dies).

    A forked child inherits the worker's Python signal handlers, and Celery's take it for the worker itself:
    its name is still `MainProcess` to multiprocessing. pyroute2 runs each `IPRoute(netns=...)` in such a child
    and stops it with SIGTERM, so the worker printed "worker: Warm shutdown (MainProcess)" (and set the stop
    flag in the child) at the first link shaping of a block, while it went on working. No child of the worker
    is a worker: it dies of the signal, as any helper process would.
    """
    global _quiet_children
    if not _quiet_children:
        os.register_at_fork(after_in_child=_default_signals)
        _quiet_children = True


def _default_signals() -> None:
    for number in CELERY_SIGNALS:
        if callable(signal.getsignal(number)):
            signal.signal(number, signal.SIG_DFL)


def worker_key(vantage_point: str) -> str:
    """Who works for a vantage point (host, pid, when it started), for the coordinator's messages."""
    return f"dnsstudy:worker:{vantage_point}"


class VantageWorker:
    """The state a worker keeps between tasks: a station per study, and the block its link is shaped for."""

    def __init__(self, vantage_point: str, place: Place, work_dir: Path, backend: str, console: Console):
        self.vantage_point, self.place, self.work_dir = vantage_point, place, work_dir
        self.backend, self.console = backend, console
        self.stations: dict[str, tuple[str, Station]] = {}  # study id -> (digest, station)
        self.block: tuple[str, int] | None = None  # (study id, block) the link is shaped and checked for
        self.halted: str | None = None
        self.environment_sent: set[str] = set()  # studies this worker sent its environment to, since it started

    def station(self, message: dict) -> Station:
        """The station of the message's study, built (and its lab faults applied) on first use."""
        study_id, digest = message["study_id"], message["digest"]
        known = self.stations.get(study_id)
        if known is not None and known[0] == digest:
            return known[1]
        study = Study.model_validate(message["study"])
        for name in study.resolvers:
            self.place.resolver(name)  # one line naming what the place has, before any visit
        self.place.clear_faults()  # its own, for an earlier study: `run_worker` let it start beside no other
        self.place.apply_faults([(f.name, f.resolver) for f in study.faults], fault_owner(self.vantage_point))
        if known is not None:
            known[1].end_session()  # the study changed: its old station's browser goes
        station = Station(self.place, study, self.work_dir, self.backend, self.console)
        self.stations[study_id] = (digest, station)
        self.block = None
        return station

    def visit(self, message: dict) -> dict:
        """Run one visit; its result: the record, the attempts, the block's link checks and the HAR."""
        visit = visit_of(message)
        if visit.vantage_point != self.vantage_point:
            raise HarnessError(f"visit {visit.ordinal} is for vantage point '{visit.vantage_point}'")
        station = self.station(message)
        checks: list[dict] = []
        if self.block != (message["study_id"], visit.block):
            self.block = None
            check = station.start_block(visit.network, visit, on_check=checks.append)
            self.console.print(station.describe_check(visit.block, visit.network, check))
            self.block = (message["study_id"], visit.block)
        outcome = station.visit(visit)
        if outcome is None:
            raise Reject("stopped mid-visit", requeue=True)
        record = outcome.record
        har = None
        if record.get("har_path"):
            path = Path(record["har_path"])
            har = {"name": path.name, "data": har_payload(path.read_bytes())}
            path.unlink()
        self.console.print(
            f"visit {visit.ordinal}: {visit.network} {visit.resolver}/{visit.protocol} {visit.site.domain} "
            f"{record['error_class']}" + (f" {record['on_load_ms']:.0f} ms" if record.get("on_load_ms") else "")
        )
        return {
            "ordinal": visit.ordinal,
            "record": record,
            "attempts": outcome.attempts,
            "checks": checks,
            "har": har,
            "environment": self._environment(message["study_id"], station),
        }

    def time_block(self, message: dict) -> dict:
        """A block's timer run over the hostnames the coordinator read from its HARs."""
        station = self.station(message)
        timed = station.time_hostnames(message["block"], message["network"], message["names"])
        if timed is None:
            raise Reject("stopped mid-run", requeue=True)
        records, problems = timed
        return {"block": message["block"], "records": records, "problems": problems}

    def _environment(self, study_id: str, station: Station) -> dict[str, str] | None:
        """The station's environment with the first result of a study after the worker started, then None."""
        if study_id in self.environment_sent:
            return None
        self.environment_sent.add(study_id)
        return {**station.environment(), "vantage_point": self.vantage_point}


def run_worker(
    vantage_point: str,
    broker_url: str,
    place: Place,
    backend: str = "auto",
    visibility_timeout_s: float | None = None,
    console: Console | None = None,
) -> int:
    """Serve the vantage point's queue until stopped (0) or halted (2, the reason left in the broker)."""
    console = console or Console()
    client = connect(broker_url)  # a wrong password or no broker: one line, before anything starts
    app = make_app(broker_url, **({"visibility_timeout_s": visibility_timeout_s} if visibility_timeout_s else {}))
    work_dir = WORKER_DIR / vantage_point
    (work_dir / "hars").mkdir(parents=True, exist_ok=True)
    with using_place(place, f"{WORKER_DOING} {vantage_point}"):
        place.require_healthy()
        refuse_others_faults(place, vantage_point)
        warning = capacity_warning()
        if warning:
            console.print(f"warning: {warning}", markup=False, soft_wrap=True)
        worker = VantageWorker(vantage_point, place, work_dir, backend, console)
        for note in clean_up_client(place):
            console.print(note, markup=False, highlight=False, soft_wrap=True)
        for leftover in (work_dir / "hars").iterdir():  # HARs of visits whose results never left: they run again
            leftover.unlink()
        _register_tasks(app, worker)
        restored = restore_unacked(client, queue_of(vantage_point))
        if restored:
            console.print(f"{restored} visits a killed worker of {vantage_point} held went back to its queue")
        client.delete(halt_key(vantage_point))
        client.set(
            worker_key(vantage_point),
            json.dumps({"host": socket.gethostname(), "pid": os.getpid(), "started": time.time()}),
        )
        console.print(
            f"worker for vantage point {vantage_point} on {place.kind} {place.name}, broker {display(broker_url)}"
        )
        # Celery warns about a worker run as root because pickle messages could run code: this one accepts JSON
        # only, and it must be root to shape links in namespaces; the browser and helpers run unprivileged.
        warnings.filterwarnings("ignore", message=".*superuser privileges.*")
        forked_children_take_default_signals()  # before Celery installs its handlers: none reaches a child
        try:
            app.Worker(
                queues=[queue_of(vantage_point)],
                pool="solo",
                concurrency=1,
                hostname=f"{vantage_point}@{socket.gethostname()}",
                loglevel="WARNING",
                quiet=True,
            ).start()
        finally:
            for _digest, station in worker.stations.values():
                station.end_session()  # a reused browser of the last block
            place.clear_faults()
    if worker.halted:
        console.print(f"vantage point {vantage_point} halted: {worker.halted}", markup=False, soft_wrap=True)
        return 2
    return 0


def restore_unacked(client: redis.Redis, queue: str) -> int:
    """Put back at the head of ``queue`` what a killed worker of it took and never acknowledged; how many.

    One worker serves a vantage point, so what its queue has unacknowledged when it starts was held by a
    worker that is gone: waiting out the visibility timeout (an hour by default) would stall the vantage
    point. The layout is kombu's Redis transport's (`unacked` hash of [message, exchange, routing key]).
    """
    restored = 0
    for tag, value in client.hgetall("unacked").items():
        message, _exchange, routing_key = json.loads(value)
        if routing_key != queue:
            continue
        with client.pipeline() as pipe:  # one transaction: the message is in the queue or still unacknowledged
            pipe.rpush(queue, json.dumps(message))  # kombu takes from the right end: this is the next one
            pipe.hdel("unacked", tag)
            pipe.zrem("unacked_index", tag)
            pipe.execute()
        restored += 1
    return restored


def _register_tasks(app: Celery, worker: VantageWorker) -> None:
    """The two tasks, bound to this worker's state; a halt requeues the task and stops the worker."""

    def halting(run: Callable[[dict], dict]) -> Callable[[dict], dict]:
        def task(message: dict) -> dict:
            try:
                return run(message)
            except subprocess.TimeoutExpired as exc:
                reason = timed_out(worker.place, exc)
            except (CrawlHalted, HarnessError) as exc:
                reason = str(exc)
            except OSError as exc:  # a full disk, say: this host's fault, never the visit's
                reason = f"{worker.place.name}: {exc}"
            worker.halted = reason
            try:
                app.backend.client.set(halt_key(worker.vantage_point), reason)
            except redis.RedisError:  # the broker is down too: the visit stays unacknowledged, and a worker
                pass  # started again puts it back; escaping, this error would fail the visit for good
            worker_state.should_stop = 2  # the solo pool's loop stops after this task
            raise Reject(reason, requeue=True)

        return task

    app.task(name=VISIT_TASK)(halting(worker.visit))
    app.task(name=TIMER_TASK)(halting(worker.time_block))
