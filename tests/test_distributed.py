"""A study over two vantage points: a real Redis, two workers on two labs, the coordinator, and faults.

Every fault ends with the store compared with the plan: each planned visit
recorded once, every HAR it names on disk and none besides, every block
timed. Workers and the coordinator run as the commands a user runs.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from harness.distributed.app import queue_of
from harness.distributed.broker import BROKER_DIR, RedisService
from harness.distributed.worker import halt_key
from harness.errors import HarnessError
from tests.conftest import TEST_PREFIX, TEST_SUBNET
from tests.helpers import DNSSTUDY, ROOT, hars_on_disk, live_processes_mentioning, study_file, wait_for

pytestmark = pytest.mark.lab

#: A port of the suite's own, from its pool: two suites side by side get two brokers.
PORT = 16000 + int(TEST_SUBNET.split(".")[2])
VISIBILITY_S = 45  # a lost worker's visit is handed out again after this long (the default is an hour)


def study(tmp: Path, name: str, places: list[str], rounds: int = 1) -> Path:
    """The tests' small lab crawl (tests/helpers.py) on the wired link, through `near`, at ``places``."""
    listed = ", ".join(f'"{p}"' for p in places)
    return study_file(
        tmp,
        name,
        changes={
            '["wired", "4g"]': '["wired"]',
            '["near", "far"]': '["near"]',
            "rounds = 1": f"rounds = {rounds}\nvantage_points = [{listed}]",
        },
    )


class Deployment:
    """A broker, two labs as vantage points, their workers and a coordinator, all as processes of their own."""

    def __init__(self, tmp: Path, labs: list, broker: RedisService):
        self.tmp, self.labs, self.broker = tmp, labs, broker
        self.names = [f"{TEST_PREFIX[:8]}-{x}" for x in ("a", "b")]
        self.workers: dict[str, subprocess.Popen] = {}
        self.coordinator: subprocess.Popen | None = None
        self.study = study(tmp, f"vp-{tmp.name[-8:].lower()}", self.names)
        self.store = tmp / "results" / "store.sqlite"
        self.env = {**os.environ, "PYTHONPATH": str(ROOT), "DNSSTUDY_BROKER": broker.url}

    def start_worker(self, index: int) -> None:
        lab, name = self.labs[index], self.names[index]
        argv = [
            *DNSSTUDY,
            "worker",
            "--vantage",
            name,
            "--prefix",
            lab.config.prefix,
            "--subnet",
            lab.config.settings.subnet,
        ]
        argv += ["--visibility-timeout", str(VISIBILITY_S)]
        log = open(self.tmp / f"worker-{name}.log", "a")
        self.workers[name] = subprocess.Popen(argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)

    def start_coordinator(self, *options: str) -> None:
        argv = [*DNSSTUDY, "coordinate", str(self.study), "--store", str(self.store), *options]
        log = open(self.tmp / "coordinator.log", "a")
        self.coordinator = subprocess.Popen(argv, cwd=ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT)

    def log(self, name: str) -> str:
        return (self.tmp / f"{name}.log").read_text()

    def done(self) -> dict[str, int]:
        if not self.store.exists():
            return {}
        db = sqlite3.connect(f"file:{self.store}?mode=ro", uri=True)
        try:
            rows = db.execute("SELECT vantage_point, COUNT(*) FROM visits WHERE status = 'done' GROUP BY 1")
            return dict(rows.fetchall())
        except sqlite3.OperationalError:
            return {}
        finally:
            db.close()

    def wait_for(self, condition: Callable[[], bool], seconds: float, what: str) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if condition():
                return
            time.sleep(0.5)
        raise AssertionError(f"{what} not within {seconds:g} s; coordinator log:\n{self.log('coordinator')[-2000:]}")

    def halted(self, vantage_point: str) -> bool:
        import redis

        return bool(redis.Redis.from_url(self.broker.url).exists(halt_key(vantage_point)))

    def finish(self, seconds: float = 420) -> int:
        assert self.coordinator is not None
        return self.coordinator.wait(timeout=seconds)

    def stop(self) -> None:
        for process in [*self.workers.values(), self.coordinator]:
            if process is not None and process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in [*self.workers.values(), self.coordinator]:
            if process is not None:
                try:
                    process.wait(timeout=60)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()


@pytest.fixture
def broker() -> Iterator[RedisService]:
    service = RedisService(name=f"{TEST_PREFIX}-test", port=PORT)
    service.down()
    if service.directory.exists():  # a fresh broker: no queue left by an earlier run
        subprocess.run(["rm", "-rf", str(service.directory)], check=True)
    service.up()
    yield service
    service.down()


@pytest.fixture
def deployment(tmp_path, private_lab, broker) -> Iterator[Deployment]:
    labs = [private_lab(up=True), private_lab(up=True)]
    deployed = Deployment(tmp_path, labs, broker)
    yield deployed
    deployed.stop()
    for lab in labs:
        assert not live_processes_mentioning(f"{lab.config.prefix}-client firefox"), "a browser was left running"


def check_against_plan(deployed: Deployment) -> None:
    """Every planned visit recorded once with a HAR on disk, no HAR besides, every block timed."""
    db = sqlite3.connect(deployed.store)
    planned, done, ids = db.execute(
        "SELECT COUNT(*), SUM(status = 'done'), COUNT(DISTINCT visit_id) FROM visits"
    ).fetchone()
    sites = db.execute("SELECT COUNT(DISTINCT site) FROM visits").fetchone()[0]
    assert planned == 2 * sites * 2 and done == planned and ids == planned
    hars = {r[0] for r in db.execute("SELECT har_path FROM visits WHERE har_path IS NOT NULL")}
    on_disk = hars_on_disk(deployed.store)
    assert hars == on_disk and len(hars) == planned
    assert db.execute("SELECT COUNT(*) FROM blocks").fetchone()[0] == 2  # one wired block per vantage point
    per_place = dict(db.execute("SELECT vantage_point, COUNT(DISTINCT name) FROM timings GROUP BY 1").fetchall())
    assert set(per_place) == set(deployed.names) and min(per_place.values()) > 0
    # A fault the test injected into the harness is never a protocol's failure.
    counted_failures = db.execute(
        "SELECT ordinal, error_class, detail FROM visits WHERE counted = 1 AND error_class != 'Successful'"
    ).fetchall()
    assert not counted_failures
    db.close()


def unacked_visit(broker: RedisService, vantage_point: str) -> int | None:
    """The ordinal of the visit the vantage point's worker holds (taken, not yet acknowledged), if any."""
    import redis

    client = redis.Redis.from_url(broker.url)
    for value in client.hvals("unacked"):
        message, _exchange, routing_key = json.loads(value)
        task_id = message["headers"]["id"]
        if routing_key == queue_of(vantage_point) and ":visit:" in task_id:
            return int(task_id.rsplit(":", 1)[1])
    return None


def test_worker_killed_broker_restarted_coordinator_killed_nothing_lost_nothing_twice(deployment):
    d = deployment
    d.start_worker(0)
    d.start_worker(1)
    d.start_coordinator()
    a = d.names[0]
    # A worker SIGKILLed in the middle of a visit: its browser is running.
    d.wait_for(lambda: d.done().get(a, 0) >= 1, 240, "a first visit at a")
    d.wait_for(lambda: unacked_visit(d.broker, a) is not None, 60, "a second visit at a")
    time.sleep(4)  # into the visit: the browser has started
    held = unacked_visit(d.broker, a)
    d.workers[a].send_signal(signal.SIGKILL)
    d.workers[a].wait()
    d.start_worker(0)  # started again, it puts back what the killed one held (no wait for the visibility timeout)
    # Connected before the broker goes down: a worker that starts while it is down stops at once (one line).
    d.wait_for(lambda: "went back to its queue" in d.log(f"worker-{a}"), 120, "the worker of a back")
    # Redis restarted mid-crawl: its append-only file keeps the queues and results.
    d.wait_for(lambda: sum(d.done().values()) >= 3, 300, "three visits")
    d.broker.down()
    time.sleep(2)
    d.broker.up()
    # The coordinator killed and started again: it adopts what is queued and goes on.
    d.wait_for(lambda: sum(d.done().values()) >= 5, 300, "five visits")
    assert d.coordinator is not None
    d.coordinator.send_signal(signal.SIGKILL)
    d.coordinator.wait()
    d.start_coordinator()
    assert d.finish() == 0, d.log("coordinator")[-3000:]
    check_against_plan(d)
    assert held is not None
    worker_log = d.log(f"worker-{a}")
    assert f"visit {held}:" in worker_log  # the visit the kill interrupted was done again
    assert f"1 visits a killed worker of {a} held went back to its queue" in worker_log
    assert "was lost by the broker" not in d.log("coordinator")  # the AOF kept every queued task
    for name in d.names:  # a working worker logs no "shutdown" (pyroute2's forked helpers: tests/test_worker_log.py)
        assert "shutdown" not in d.log(f"worker-{name}").lower(), d.log(f"worker-{name}")[-2000:]
    # Started again on the finished study, as compose's coordinator is after a reboot: the report, then it stays.
    d.start_coordinator("--report", "--stay")
    d.wait_for(lambda: "staying until stopped" in d.log("coordinator"), 300, "the finished coordinator staying")
    assert (d.store.parent / "report" / "report.html").exists()
    assert d.coordinator.poll() is None
    d.coordinator.send_signal(signal.SIGTERM)
    assert d.coordinator.wait(timeout=30) == 0
    check_against_plan(d)  # nothing recorded twice


def test_a_vantage_point_whose_lab_dies_halts_while_the_other_goes_on(deployment):
    d = deployment
    d.start_worker(0)
    d.start_worker(1)
    d.start_coordinator()
    a, b = d.names
    d.wait_for(lambda: d.done().get(a, 0) >= 1, 240, "a first visit at a")
    lab = d.labs[0]
    resolver = next(x for x in lab.status().daemons if x["name"] == "resolver-near")
    os.kill(resolver["pid"], signal.SIGKILL)
    assert d.workers[a].wait(timeout=240) == 2  # the worker halts with the place's own message
    assert "daemons died" in d.log(f"worker-{a}") or "resolver-near" in d.log(f"worker-{a}")
    assert d.finish() == 2  # b finished; a halted
    assert d.done().get(b) == 4 and d.done().get(a, 0) < 4  # two sites, Do53 and DoH
    assert f"vantage point {a} halted" in d.log("coordinator")
    # Brought back: the same commands finish the study, each visit once.
    lab.down()
    lab.up()
    d.start_worker(0)
    # The worker clears its halt once its place passed its checks; a coordinator started before then would
    # see only halted or finished vantage points, and end at once (status 2) as it should.
    d.wait_for(lambda: not d.halted(a), 120, "the worker back")
    d.start_coordinator()
    assert d.finish() == 0, d.log("coordinator")[-3000:]
    check_against_plan(d)


def test_a_wrong_broker_password_is_one_line(broker, tmp_path):
    wrong = broker.url.replace(broker.password(), "not-the-password")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "DNSSTUDY_BROKER": wrong}
    worker = subprocess.run(
        [*DNSSTUDY, "worker", "--vantage", "x", "--prefix", "dsnolab"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert worker.returncode == 2
    assert worker.stderr.strip().count("\n") == 0 and "the password was refused" in worker.stderr
    assert "not-the-password" not in worker.stderr  # a password is never printed
    path = study(tmp_path, "pw", ["pa", "pb"])
    coordinator = subprocess.run(
        [*DNSSTUDY, "coordinate", str(path), "--store", str(tmp_path / "s.sqlite")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert coordinator.returncode == 2 and "the password was refused" in coordinator.stderr
    assert not (tmp_path / "s.sqlite").exists()  # refused before the store was touched
    no_password = subprocess.run(
        [*DNSSTUDY, "coordinate", str(path), "--broker", f"redis://127.0.0.1:{PORT}/0"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert no_password.returncode == 2 and "no password" in no_password.stderr


def test_the_broker_binds_loopback_with_a_password_and_an_fsynced_aof(broker):
    config = (broker.directory / "redis.conf").read_text()
    assert f"bind {broker.host}" in config and "appendfsync always" in config and "requirepass" in config
    listening = subprocess.run(["ss", "-ltnH", f"sport = :{PORT}"], capture_output=True, text=True).stdout
    assert [line.split()[3] for line in listening.splitlines()] == [f"127.0.0.1:{PORT}"]
    owner = os.stat(f"/proc/{broker.pid()}").st_uid
    assert owner != 0  # Redis parses network data: never root
    assert BROKER_DIR in broker.directory.parents
    assert queue_of("x") == "dnsstudy.vp.x"


def test_a_vantage_point_added_mid_study_gets_its_part_and_other_changes_are_refused(broker, tmp_path):
    from harness.distributed.coordinator import Coordinator
    from harness.store import Store
    from harness.store.records import VisitCounts
    from harness.study import load_study

    def prepare(places: list[str], rounds: int = 1) -> int:
        path = study(tmp_path, "grow", places, rounds)
        store = Store(tmp_path / "results" / "store.sqlite")
        try:
            return Coordinator(load_study(str(path)), store, broker.url, store.path.parent).prepare()
        finally:
            store.close()

    first = prepare(["x"])
    assert prepare(["x", "y"]) == 2 * first
    store = Store(tmp_path / "results" / "store.sqlite")
    parts = store.vantage_points("grow")
    assert parts == {"x": VisitCounts(0, first), "y": VisitCounts(0, first)}
    assert [v.ordinal for v in store.planned_at("grow", "y", 1)] == [first]
    store.close()
    with pytest.raises(HarnessError, match="may only be added at the end"):
        prepare(["y", "x"])
    with pytest.raises(HarnessError, match="differs in: rounds"):
        prepare(["x", "y"], rounds=2)


def test_a_tls_broker_carries_tasks_and_results_and_is_verified(tmp_path):
    from harness.distributed.app import make_app
    from harness.distributed.broker import connect

    service = RedisService(name=f"{TEST_PREFIX}-tls", port=PORT + 1, tls=True)
    service.down()
    subprocess.run(["rm", "-rf", str(service.directory)], check=True)
    try:
        url = service.up()
        assert url.startswith("rediss://") and "ssl_ca_certs=" in url
        client = connect(url)
        app = make_app(url)
        app.send_task("dnsstudy.visit", args=[{"over": "tls"}], task_id="tls-1", queue=queue_of("tls"))
        assert client.llen(queue_of("tls")) == 1
        app.backend.store_result("tls-2", {"ok": True}, "SUCCESS")
        assert app.backend.get_task_meta("tls-2")["result"] == {"ok": True}
        plain = url.replace("rediss://", "redis://").split("?")[0]
        with pytest.raises(HarnessError, match="cannot connect"):  # the port speaks TLS only
            connect(plain, timeout=2)
        untrusted = url.split("?")[0]  # the system's CAs do not know the broker's
        with pytest.raises(HarnessError, match="cannot connect.*certificate verify failed"):
            connect(untrusted, timeout=2)
        with pytest.raises(HarnessError, match="always verified"):
            connect(url.replace("ssl_cert_reqs=required", "ssl_cert_reqs=none"))
    finally:
        service.down()


def test_a_worker_starting_takes_back_what_a_killed_one_of_its_queue_held(broker):
    import redis

    from harness.distributed.app import make_app
    from harness.distributed.worker import restore_unacked

    client = redis.Redis.from_url(broker.url)
    app = make_app(broker.url)
    for name in ("mine", "other"):
        app.send_task("dnsstudy.visit", args=[{"n": name}], task_id=f"t-{name}", queue=queue_of(name))
        raw = client.rpop(queue_of(name))  # as a worker takes it: out of the queue, into `unacked`
        assert isinstance(raw, bytes)
        client.hset("unacked", f"tag-{name}", json.dumps([json.loads(raw), "", queue_of(name)]))
        client.zadd("unacked_index", {f"tag-{name}": time.time()})
    assert restore_unacked(client, queue_of("mine")) == 1
    assert client.llen(queue_of("mine")) == 1 and client.llen(queue_of("other")) == 0
    assert client.hkeys("unacked") == [b"tag-other"]  # another vantage point's is not ours to take
    client.delete("unacked", "unacked_index", queue_of("mine"))


def test_a_foreground_broker_publishes_its_url_while_it_answers(tmp_path):
    """`broker up --foreground` (compose's broker): bound to what its name resolves to, `url` only while up."""
    service = RedisService(name=f"{TEST_PREFIX}-fg", host="localhost", port=PORT + 2)
    subprocess.run(["rm", "-rf", str(service.directory)], check=True)
    url_file = service.directory / "url"
    argv = [*DNSSTUDY, "broker", "up", "--foreground", "--name", service.name, "--host", "localhost"]
    server = subprocess.Popen([*argv, "--port", str(PORT + 2)], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        deadline = time.monotonic() + 20
        while not url_file.exists() and server.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert url_file.read_text().strip() == service.url  # the name stays in the URL...
        assert "bind 127.0.0.1\n" in (service.directory / "redis.conf").read_text()  # ...the address is bound
        assert oct(url_file.stat().st_mode & 0o777) == "0o600"
        env = {k: v for k, v in os.environ.items() if k != "DNSSTUDY_BROKER"}
        env |= {"PYTHONPATH": str(ROOT), "DNSSTUDY_BROKER_FILE": str(url_file)}
        path = study(tmp_path, "fg", ["fa"])
        store = tmp_path / "fg.sqlite"
        # The coordinator reaches the broker through the file: it plans, then waits for a worker (none runs).
        coordinator = subprocess.Popen([*DNSSTUDY, "coordinate", str(path), "--store", str(store)], cwd=ROOT, env=env)
        # its signal handlers are in place once it records itself as the study's crawler (harness/study_run.py)
        wait_for(lambda: coordinator.poll() is not None or _crawler_pid(store) == coordinator.pid, 60, "the crawler")
        assert coordinator.poll() is None and store.exists()
        coordinator.send_signal(signal.SIGTERM)
        assert coordinator.wait(timeout=60) == 3  # stopped
        missing = subprocess.run(
            [*DNSSTUDY, "worker", "--vantage", "fa", "--broker-file", str(tmp_path / "nothing")],
            cwd=ROOT,
            env={**env, "DNSSTUDY_BROKER_FILE": ""},
            capture_output=True,
            text=True,
        )
        assert missing.returncode == 2 and "broker URL file" in missing.stderr and "nothing" in missing.stderr
    finally:
        server.send_signal(signal.SIGTERM)
        status = server.wait(timeout=30)
    assert status == 0
    assert not url_file.exists()  # gone with the server: compose's health check turns red
    assert service.pid() is None


def one_host_block() -> str:
    """The shell block of docs/distributed.md's "One host", as a reader copies it."""
    text = (ROOT / "docs" / "distributed.md").read_text()
    section = text[text.index("## One host") :]
    return section[section.index("```sh\n") + 6 : section.index("```", section.index("```sh\n") + 6)]


def test_the_one_host_block_of_distributed_md_runs_as_written(tmp_path, private_lab):
    """The page's commands, in order, in one shell: only the suite's own prefixes, subnets, broker and store, and
    the compose demo cut to Do53 on the wired link through `near` (2 sites x 2 vantage points: 4 visits)."""
    labs = [private_lab(up=False), private_lab(up=False)]  # named here, brought down by the fixture whatever happens
    name = f"{TEST_PREFIX}-docs"
    cuts = {
        'name = "compose-demo"': f'name = "{name}"',
        'networks = ["wired", "4g"]': 'networks = ["wired"]',
        'resolvers = ["near", "far"]': 'resolvers = ["near"]',
        'protocols = ["do53", "dot", "doh"]': 'protocols = ["do53"]',
    }
    text = (ROOT / "profiles" / "studies" / "compose-demo.toml").read_text()
    for old, new in cuts.items():
        assert old in text, f"compose-demo.toml no longer has {old!r}"
        text = text.replace(old, new)
    (tmp_path / f"{name}.toml").write_text(text)
    store = tmp_path / "results" / "store.sqlite"
    broker = f"--name {TEST_PREFIX}-docs --port {PORT + 1}"
    script = one_host_block()
    places = [f"--prefix {lab.config.prefix} --subnet {lab.config.settings.subnet}" for lab in labs]
    for old, new in {
        "--prefix vpa --subnet 198.18.8.0/23": places[0],
        "--prefix vpb --subnet 198.18.10.0/23": places[1],
        "--prefix vpa": f"--prefix {labs[0].config.prefix}",
        "--prefix vpb": f"--prefix {labs[1].config.prefix}",
        "dnsstudy broker up": f"dnsstudy broker up {broker}",
        "dnsstudy broker url": f"dnsstudy broker url {broker}",
        "dnsstudy broker down": f"dnsstudy broker down {broker}",
        "dnsstudy coordinate compose-demo": f"dnsstudy coordinate {tmp_path / name}.toml --store {store}",
    }.items():
        assert old in script, f"docs/distributed.md's block no longer has {old!r}: update the test"
        script = script.replace(old, new)
    RedisService(name=f"{TEST_PREFIX}-docs", port=PORT + 1).down()  # what an interrupted run left
    stop_jobs = "trap 'kill $(jobs -p) 2>/dev/null || true; wait' EXIT\n"  # a failed line leaves no worker running
    try:
        done = subprocess.run(
            ["bash", "-e", "-c", stop_jobs + script], cwd=ROOT, capture_output=True, text=True, timeout=900
        )
    finally:
        RedisService(name=f"{TEST_PREFIX}-docs", port=PORT + 1).down()
    out = done.stdout[-3000:] + done.stderr[-3000:]
    assert done.returncode == 0, out
    db = sqlite3.connect(store)
    rows = db.execute("SELECT vantage_point, COUNT(*), SUM(status = 'done') FROM visits GROUP BY 1").fetchall()
    db.close()
    assert rows == [("lab-a", 2, 2), ("lab-b", 2, 2)], out


def _crawler_pid(store: Path) -> int | None:
    """The pid the store records as its study's running crawler, if any yet."""
    if not store.exists():
        return None
    db = sqlite3.connect(f"{store.resolve().as_uri()}?mode=ro", uri=True)
    try:
        row = db.execute("SELECT pid FROM crawler").fetchone()
    except sqlite3.OperationalError:  # no crawler table yet
        return None
    finally:
        db.close()
    return row[0] if row else None
