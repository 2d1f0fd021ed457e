"""Test doubles for the run loop: a place, a shaper, a station's hardware and a browser that touch no network.

The crawl's bookkeeping (the plan into the store, resume, retries, halts,
signals, a full disk) runs for real over them: `FakeStation` is a real
`Station` whose shaping, environment, clean-up and timer are instant, and
`FakeVisitor` "visits" instantly and deterministically, writing a small
HAR, unless its `script` says otherwise for the Nth visit it runs:

- "harness": a harness failure (Infrastructure Failure, not counted), which the station retries;
- "dead": the place dies during the visit (the station halts the crawl);
- "interrupt": its HAR written, a KeyboardInterrupt (a second Ctrl-C) before the visit returns;
- "sigint", "sigterm": the signal to this process during the visit, which then succeeds;
- "disk full": ENOSPC while writing its HAR.

`FakeBroker` stands in for Redis and Celery under a coordinator: a task
runs at once at its vantage point's `FakeWorker` (the real worker's task
code over a FakeStation), and its result waits in the broker.
"""

from __future__ import annotations

import errno
import gzip
import io
import json
import os
import signal
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from rich.console import Console

from harness.distributed.app import VISIT_TASK
from harness.distributed.worker import VantageWorker, halt_key
from harness.errors import HarnessError
from harness.place import ClientSide, Fault, Place, ProbePeer, Resolver
from harness.shaping.link_profile import LinkProfile
from harness.shaping.shaper import Shaper
from harness.station import Station
from harness.study import Study
from harness.visit import Visitor
from harness.visit_record import VisitResult


@dataclass
class FakeStatus:
    """A place's status: healthy unless something was declared dead."""

    dead: list[str] = field(default_factory=list)
    up: bool = True
    namespaces: dict[str, bool] = field(default_factory=dict)
    daemons: list[dict] = field(default_factory=list)

    @property
    def healthy(self) -> bool:
        return not self.dead


class FakePlace(Place):
    """A lab that is only a name and a run directory; it remembers the faults it was given."""

    kind = "lab"

    def __init__(self, name: str, run_dir: Path, resolvers: tuple[str, ...] = ("near", "far")):
        self.name, self.run_dir, self.resolvers = name, run_dir, resolvers
        run_dir.mkdir(parents=True, exist_ok=True)
        self.dead: list[str] = []
        self.faults: list[tuple[str, str]] = []  # what the last apply_faults was given
        self.applied: list[Fault] = []  # the faults it carries (a test may add one "by hand")
        self.faults_cleared = 0

    @property
    def namespaces(self) -> dict[str, str]:
        return {"shaper": f"{self.name}-shaper"}  # no client or server: the station reads no sysctl

    def status(self) -> FakeStatus:
        return FakeStatus(list(self.dead))

    def client_side(self) -> ClientSide:
        return ClientSide(f"{self.name}-client", self.run_dir, self.run_dir / "ca.pem", "192.0.2.9")

    def resolver(self, name: str) -> Resolver:
        if name not in self.resolvers:
            raise HarnessError(f"no resolver '{name}'")
        return Resolver(name, "192.0.2.1", f"{name}.test", f"https://{name}.test/dns-query")

    def bring_up(self) -> bool:
        return False

    def resolver_names(self) -> list[str] | None:
        return list(self.resolvers)

    def link_ends(self) -> list[tuple[str, str]]:
        return []

    def probe_peer(self) -> ProbePeer | None:
        return None  # the link check is then the shaper's word alone

    def describe(self) -> dict[str, str]:
        return {"place": f"fake {self.name}"}

    @property
    def up_command(self) -> str:
        return "fake up"

    def apply_faults(self, pairs: list[tuple[str, str]], owner: str) -> None:
        self.faults = list(pairs)
        self.applied = [Fault(*name.partition(":")[::2], resolver, owner) for name, resolver in pairs]

    def clear_faults(self) -> None:
        self.faults, self.applied = [], []
        self.faults_cleared += 1

    def active_faults(self) -> list[Fault]:
        return [Fault(f.kind, f.protocol or None, f.resolver, f.owner) for f in self.applied]

    @property
    def clear_faults_command(self) -> str:
        return "fake clear"


class FakeShaper(Shaper):
    """Shapes nothing; remembers which links it was asked for."""

    def __init__(self, place: Place):
        super().__init__(place)
        self.applied: list[str] = []

    def choose_backend(self) -> str:
        return "fake"

    def state(self) -> dict | None:
        return {"backend": "fake", "profile": self.applied[-1]} if self.applied else None

    def problem(self) -> str | None:
        return None

    def apply(self, profile: LinkProfile) -> bool:
        self.applied.append(profile.name)
        return True

    def clear(self) -> None:
        self.applied.append("(cleared)")


class FakeStation(Station):
    """A real station (its visits' retries and halts, its block starts) over a fake shaper and an instant timer."""

    def __init__(
        self,
        place: Place,
        study: Study,
        results_dir: Path,
        backend: str = "auto",
        console: Console | None = None,
        stopping: Callable[[], bool] = lambda: False,
    ):
        super().__init__(place, study, results_dir, backend, console, stopping)
        self.shaper = self.fake_shaper = FakeShaper(place)
        self.cleaned_up = 0
        self.timed: list[int] = []  # blocks, in the order they were timed

    def clean_up_after_a_kill(self) -> list[str]:
        self.cleaned_up += 1
        return []

    def time_hostnames(self, block: int, network: str, names: list[str]) -> tuple[list[dict], list[str]] | None:
        """One successful query per name and resolver/protocol pair, at once."""
        self.timed.append(block)
        records = [
            {"resolver": r, "protocol": p, "name": n, "type": "A", "start": 0.0, "status": "ok", "network": network}
            for r, p in self.study.timer_pairs
            for n in names
        ]
        return records, []


def fake_har(url: str) -> bytes:
    """A HAR of one page with one request, to ``url``: what the timer reads the block's hostnames from."""
    when = "2026-01-01T00:00:00.000Z"
    page = {"id": "page_1", "startedDateTime": when, "title": url, "pageTimings": {"onLoad": 1}}
    entry = {
        "pageref": "page_1",
        "startedDateTime": when,
        "time": 1,
        "request": {"method": "GET", "url": url, "httpVersion": "HTTP/2", "headers": [], "cookies": []},
        "response": {"status": 200, "httpVersion": "HTTP/2", "headers": [], "cookies": [], "content": {}},
        "timings": {"send": 0, "wait": 1, "receive": 0},
    }
    har = {"log": {"version": "1.2", "creator": {"name": "fake", "version": "1"}, "pages": [page], "entries": [entry]}}
    return gzip.compress(json.dumps(har).encode())


class FakeVisitor(Visitor):
    """Visits at once; ``script`` maps the Nth call of `visit_once` (from 1) to what goes wrong in it."""

    def __init__(self, place: FakePlace, results_dir: Path, script: dict[int, str] | None = None):
        # No browser, no root: nothing of Visitor's own set-up runs.
        self.place, self.fake_place, self.results_dir = place, place, results_dir
        self.script = dict(script or {})
        self.network = "wired"
        self.versions = {"firefox": "fake", "geckodriver": "fake", "dnsstudy": "test"}
        self.calls: list[tuple[str, str, str, str]] = []  # (url, resolver, protocol, network) of every visit_once

    def close(self) -> None:
        """No browser to end."""

    def visit_once(self, url: str, protocol: str, resolver: str) -> VisitResult:
        self.calls.append((url, resolver, protocol, self.network))
        n = len(self.calls)
        action = self.script.get(n, "ok")
        visit_id = uuid.uuid4().hex  # unique across runs, as a real visit's: a resumed crawl's HARs never collide
        har = self.results_dir / "hars" / f"{visit_id}.har.gz"
        if action == "disk full":
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(har))
        har.parent.mkdir(parents=True, exist_ok=True)
        har.write_bytes(fake_har(url))
        if action == "interrupt":
            raise KeyboardInterrupt
        if action in ("sigint", "sigterm"):
            os.kill(os.getpid(), signal.SIGINT if action == "sigint" else signal.SIGTERM)
        if action == "dead":
            self.fake_place.dead = ["unbound-near"]
        error = {"harness": "Infrastructure Failure", "dead": "DNS Error"}.get(action, "Successful")
        return VisitResult(
            visit_id=visit_id,
            url=url,
            protocol=protocol,
            resolver=resolver,
            network=self.network,
            started_at="2026-01-01T00:00:00+00:00",
            error_class=error,
            detail="" if error == "Successful" else f"fake {action}",
            paper_2019=error,
            counted=action != "harness",
            on_load_ms=100.0 if error == "Successful" else None,
            on_content_load_ms=None,
            bidi_on_load_ms=None,
            on_load_agrees=None,
            wall_s=0.01,
            phases={},
            signal={},
            proof={},
            arm={},
            har_path=str(har),
            har_entries=1,
            har_problem=None,
            next_hop_protocol=None,
            timeout_s=30.0,
        )


class FakeWorker(VantageWorker):
    """A vantage point's worker (its real task code) over a FakeStation that visits with a FakeVisitor."""

    def __init__(self, vantage_point: str, place: FakePlace, work_dir: Path, script: dict[int, str] | None = None):
        (work_dir / "hars").mkdir(parents=True, exist_ok=True)
        super().__init__(vantage_point, place, work_dir, "auto", Console(file=io.StringIO()))
        self.fake_place, self.script = place, script
        self.visitor: FakeVisitor | None = None

    def station(self, message: dict) -> Station:
        known = self.stations.get(message["study_id"])
        if known is not None:
            return known[1]
        station = FakeStation(self.place, Study.model_validate(message["study"]), self.work_dir, console=self.console)
        station.visitor = self.visitor = FakeVisitor(self.fake_place, self.work_dir, self.script)
        self.stations[message["study_id"]] = (message["digest"], station)
        return station


@dataclass
class FakeResults:
    """Celery's result backend as the coordinator reads it: JSON values by key."""

    values: dict[str, str] = field(default_factory=dict)
    on_task_call: object = None

    def get_key_for_task(self, task_id: str) -> str:
        return f"celery-task-meta-{task_id}"

    def mget(self, keys: list[str]) -> list[str | None]:
        return [self.values.get(k) for k in keys]

    def decode_result(self, value: str) -> dict:
        return json.loads(value)

    def get_task_meta(self, task_id: str) -> dict:
        value = self.values.get(self.get_key_for_task(task_id))
        return json.loads(value) if value else {"status": "PENDING", "result": None}


class FakeBroker:
    """Redis and the Celery application as the coordinator uses them; a task runs at once, at its vantage point's
    worker, and its result (JSON, as Celery keeps it) waits for the coordinator to read it."""

    def __init__(self, workers: dict[str, VantageWorker]):
        self.workers = workers
        self.backend = FakeResults()
        self.sent: list[str] = []  # task ids, in the order they were sent
        self.halted: dict[str, str] = {}  # halt key -> reason, as a halted worker leaves it

    def send_task(self, name: str, args: list[dict], task_id: str, queue: str) -> None:
        """Run the task at once, unless its vantage point's worker halted: then it waits (pending)."""
        self.sent.append(task_id)
        vantage_point = queue.removeprefix("dnsstudy.vp.")
        if halt_key(vantage_point) in self.halted:
            return
        worker = self.workers[vantage_point]
        task = worker.visit if name == VISIT_TASK else worker.time_block
        try:
            result = task(args[0])
        except HarnessError as exc:  # as the real worker: the task goes back to the queue, the reason to the broker
            self.halted[halt_key(vantage_point)] = str(exc)
            return
        meta = {"status": "SUCCESS", "result": result, "task_id": task_id}
        self.backend.values[self.backend.get_key_for_task(task_id)] = json.dumps(meta)

    def worker_back(self, vantage_point: str) -> None:
        """A worker started again: its halt is cleared (its place must be healthy again)."""
        self.halted.pop(halt_key(vantage_point), None)

    # -- the Redis client's part --------------------------------------------------------------------------------

    def get(self, key: str) -> str | None:
        return self.halted.get(key)

    def delete(self, *keys: str) -> None:
        for key in keys:
            self.backend.values.pop(key, None)

    def lrange(self, name: str, start: int, end: int) -> list[bytes]:
        return []  # a task is run as it is sent: none waits in a queue

    def hvals(self, name: str) -> list[bytes]:
        return []
