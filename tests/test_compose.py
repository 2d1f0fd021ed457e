"""docker/compose.yaml under a real engine: podman, through docker/podman-compose.sh (image marker).

The podman route of docs/deploy.md, command by command: the broker, the coordinator and one worker
from the compose file run a small lab study (one vantage point, the lab demo's two sites, three
protocols) to its end, with the worker's process killed mid-study (the container comes back by its
restart policy); the store then holds every planned visit once, each Successful, and the worker's
log has no "shutdown" line. Then the page's operations: `ps`, `logs`, `podman exec ... status`, a
worker container killed (it stays down) and brought back by `up -d`, `podman cp` of the results while
the coordinator runs, `stop`, `run ... export` and `podman volume export` of the stopped project's
results. The study file is mounted into the services by an override file, as docs/deploy.md
tells a user to do with a study of their own. The project is brought down afterwards with its
volumes, and nothing it made may be left: containers, networks, volumes.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import tarfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.conftest import ROOT, TEST_PREFIX
from tests.test_image import IMAGE, image  # noqa: F401 (the session's image fixture: one build for both files)

DOCKER = ROOT / "docker"
STUDY = f"{TEST_PREFIX}-compose"
SERVICES = ["broker", "coordinator", "worker-lab-a"]
DONE = "every vantage point is done"  # the coordinator's line once the study is finished (--stay)
# The compose demo cut to one vantage point, one network and one resolver: 2 sites x 3 protocols.
CUTS = {
    'name = "compose-demo"': f'name = "{STUDY}"',
    'vantage_points = ["lab-a", "lab-b"]': 'vantage_points = ["lab-a"]',
    'networks = ["wired", "4g"]': 'networks = ["wired"]',
    'resolvers = ["near", "far"]': 'resolvers = ["near"]',
}
PLANNED = 2 * 3
MAX_RESTARTS = 3  # a worker whose lab did not come up on a loaded host, twice, and the test's own kill


@dataclass
class Project:
    """One compose project run by docker/podman-compose.sh, with the study file mounted in."""

    name: str
    tmp: Path
    made: dict[str, set[str]] = field(default_factory=dict)

    def compose(self, *args: str, timeout: float = 900) -> subprocess.CompletedProcess[str]:
        files = ["-f", "compose.yaml", "-f", str(self.tmp / "override.yaml")]
        argv = ["bash", "podman-compose.sh", "-p", self.name, *files, *args]
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "DNSSTUDY_IMAGE": IMAGE, "DNSSTUDY_STUDY": STUDY}
        return subprocess.run(argv, cwd=DOCKER, env=env, capture_output=True, text=True, timeout=timeout)

    def podman(self, *args: str) -> str:
        env = {"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "CONTAINERS_CONF": str(DOCKER / "containers.conf")}
        done = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=300, env=env)
        return done.stdout + done.stderr

    def container(self, service: str) -> str:
        return f"{self.name}_{service}_1"  # docker-compose 1.x's naming

    def state(self, service: str) -> tuple[str, int, int]:
        """(status, exit code, restarts) of a service's container, as podman inspects it."""
        out = self.podman(
            "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}} {{.RestartCount}}", self.container(service)
        )
        status, code, restarts = out.split()
        return status, int(code), int(restarts)

    def wait_until(self, service: str, wanted: Callable[[tuple[str, int, int]], bool], seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while not wanted(self.state(service)):
            assert time.monotonic() < deadline, f"{service} is {self.state(service)} after {seconds:g} s"
            time.sleep(1)

    def kill_worker_process(self, service: str) -> None:
        """SIGKILL the worker's own process (the child of the container's init), as a crash or the OOM killer
        would end it: not a stop by the user, as `podman kill` is."""
        init = self.podman("inspect", "--format", "{{.State.Pid}}", self.container(service)).strip()
        children = Path(f"/proc/{init}/task/{init}/children").read_text().split()
        # The init also adopts orphans (a daemon that forked away): the service's process runs its command.
        main = [pid for pid in children if b"--vantage" in Path(f"/proc/{pid}/cmdline").read_bytes()]
        assert len(main) == 1, f"{service}'s init has children {children}, of which {main} run the worker"
        os.kill(int(main[0]), signal.SIGKILL)

    def labelled(self, kind: str) -> set[str]:
        """IDs or names of the project's containers, networks or volumes, by compose's project label."""
        label = f"label=com.docker.compose.project={self.name}"
        listing = {
            "container": ["ps", "-a", "-q"],
            "network": ["network", "ls", "-q"],
            "volume": ["volume", "ls", "-q"],
        }
        return set(self.podman(*listing[kind], "--filter", label).split())

    def note_what_it_made(self) -> None:
        """Everything the project made, anonymous volumes of the image's VOLUMEs included."""
        self.made = {kind: self.labelled(kind) for kind in ("container", "network", "volume")}
        for container in self.made["container"]:
            names = self.podman("inspect", "--format", "{{range .Mounts}}{{.Name}} {{end}}", container).split()
            self.made["volume"].update(names)


def write_study_and_override(tmp: Path) -> None:
    text = (ROOT / "profiles" / "studies" / "compose-demo.toml").read_text()
    for old, new in CUTS.items():
        assert old in text, f"compose-demo.toml no longer has {old!r}: update the cuts"
        text = text.replace(old, new)
    (tmp / f"{STUDY}.toml").write_text(text)
    mount = f"{tmp / STUDY}.toml:/opt/dnsstudy/src/profiles/studies/{STUDY}.toml:ro"
    (tmp / "override.yaml").write_text(
        "services:\n" + "".join(f"  {service}:\n    volumes: ['{mount}']\n" for service in SERVICES[1:])
    )


@pytest.fixture
def project(image: str, tmp_path: Path) -> Iterator[Project]:  # noqa: F811 (the fixture imported above)
    tmp_path.chmod(0o755)  # the study file is read inside the containers
    write_study_and_override(tmp_path)
    running = Project(name=f"{TEST_PREFIX}compose", tmp=tmp_path)
    running.compose("down", "-v", "--remove-orphans", timeout=300)  # what an interrupted run left
    yield running
    if not running.made:
        running.note_what_it_made()
    down = running.compose("down", "-v", "--remove-orphans", "-t", "60", timeout=600)
    assert down.returncode == 0, down.stderr[-2000:]
    for kind in ("container", "network"):
        assert not running.labelled(kind), f"{kind}s left by the compose project"
    volumes = set(running.podman("volume", "ls", "-q").split())
    assert not running.made["volume"] & volumes, "volumes left by the compose project"


def wait_for_the_study(project: Project, seconds: float) -> str:
    """The coordinator's log once the study is done. A service that stopped, or restarts in a loop, fails at
    once; a restart or two is the compose file's design at work (a worker whose lab did not come up on a
    loaded host exits, and `unless-stopped` starts it again)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        logs = project.podman("logs", project.container("coordinator"))
        if DONE in logs:
            return logs
        for service in SERVICES:
            state = project.podman(
                "inspect", "--format", "{{.State.Status}} {{.RestartCount}}", project.container(service)
            )
            status, restarts = state.split()
            if status != "running" or int(restarts) > MAX_RESTARTS:
                tail = project.podman("logs", "--tail", "40", project.container(service))
                raise AssertionError(f"{service} is '{state.strip()}' (status, restarts) mid-study:\n{tail}")
        time.sleep(5)
    worker = project.podman("logs", "--tail", "40", project.container("worker-lab-a"))
    raise AssertionError(f"the study did not finish in {seconds:g} s:\n{logs[-2500:]}\nworker:\n{worker}")


def status(project: Project) -> str:
    """`dnsstudy status` of the study's store, through `podman exec` in the coordinator (docs/deploy.md: on podman,
    docker-compose 1.29's `exec -T` returned 1 and printed nothing where `podman exec` printed the status)."""
    command = [
        "podman",
        "exec",
        project.container("coordinator"),
        "dnsstudy",
        "status",
        f"/results/{STUDY}/store.sqlite",
    ]
    status = subprocess.run(command, capture_output=True, text=True, timeout=120)
    assert status.returncode == 0, status.stdout[-1000:] + status.stderr[-1000:]
    return status.stdout


@pytest.mark.image
def test_compose_runs_a_small_lab_study_to_its_end_under_podman(project: Project) -> None:
    up = project.compose("up", "-d", *SERVICES)
    assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-3000:]
    project.note_what_it_made()
    ps = project.compose("ps")
    assert ps.returncode == 0 and all(project.container(s) in ps.stdout for s in SERVICES), ps.stdout + ps.stderr
    # The worker's process killed once it works, as a crash would: its restart policy brings the container back.
    worker = "worker-lab-a"
    deadline = time.monotonic() + 600
    while "visit " not in project.podman("logs", project.container(worker)):
        assert time.monotonic() < deadline, project.podman("logs", "--tail", "40", project.container(worker))
        time.sleep(2)
    project.kill_worker_process(worker)
    project.wait_until(worker, lambda s: s[0] == "running" and s[2] >= 1, 120)
    logs = wait_for_the_study(project, 1500)
    assert "report:" in logs, logs[-2000:]  # --report: written once every vantage point is done
    assert DONE in project.compose("logs", "coordinator").stdout
    assert f"progress: {PLANNED}/{PLANNED} visits" in status(project)
    worker_log = project.podman("logs", project.container(worker))
    assert "shutdown" not in worker_log.lower(), worker_log[-3000:]  # it worked, and said so (tests/test_worker_log.py)

    kill_and_bring_back(project, worker)
    # The results copied out while the coordinator runs (idle once the study is done: --stay), as the page says.
    copy = project.tmp / "results"
    copied = project.podman("cp", f"{project.container('coordinator')}:/results", str(copy))
    check_the_store(copy / STUDY, copied)
    stop_back_up_and_export(project, worker)


def kill_and_bring_back(project: Project, worker: str) -> None:
    """`podman kill` is a stop by the user: the container stays down until `up -d`."""
    project.podman("kill", project.container(worker))
    project.wait_until(worker, lambda s: s[0] == "exited" and s[1] == 137, 60)
    restarts = project.state(worker)[2]
    time.sleep(15)
    assert project.state(worker)[0] == "exited" and project.state(worker)[2] == restarts
    again = project.compose("up", "-d", *SERVICES)
    assert again.returncode == 0, again.stderr[-2000:]
    project.wait_until(worker, lambda s: s[0] == "running", 120)


def stop_back_up_and_export(project: Project, worker: str) -> None:
    """The upgrade's stop and backup (docs/deploy.md, "Upgrading mid-study"), then the stopped project's volume
    out: podman 4.3's `cp` from a stopped container copies nothing of a named volume and exits 0."""
    stop = project.compose("stop", "coordinator", worker)
    assert stop.returncode == 0, stop.stderr[-2000:]
    assert project.state("coordinator")[:2] == ("exited", 0)  # a finished study's coordinator, idle, ends 0
    backup = f"/results/{STUDY}/backup"
    # docs/deploy.md's podman line: `podman run` of the image on the project's results volume (docker-compose
    # 1.29's `run` without -d needs the docker binary to attach: "Couldn't find `docker` binary").
    limits = ["--ulimit", "nofile=20000:20000", "--ulimit", "nproc=1000:1000"]
    volume = f"{project.name}_results"
    export = project.podman(
        "run",
        "--rm",
        *limits,
        "-v",
        f"{volume}:/results",
        IMAGE,
        "export",
        f"/results/{STUDY}/store.sqlite",
        "--out",
        backup,
    )
    tar = project.tmp / "results.tar"
    exported = project.podman("volume", "export", volume, "--output", str(tar))
    with tarfile.open(tar) as archive:
        names = archive.getnames()
    assert any(n.endswith(f"{STUDY}/store.sqlite") for n in names), exported + " ".join(names[:20])
    assert any(
        n.startswith(f"{STUDY}/backup/") and n.endswith(".parquet") for n in (n.removeprefix("./") for n in names)
    ), export[-2000:]


def check_the_store(results: Path, said: str) -> None:
    """Every planned visit recorded once, each Successful, and the report written (``said``: what copied it)."""
    assert (results / "store.sqlite").exists(), said
    db = sqlite3.connect(results / "store.sqlite")
    planned, done, ids, places = db.execute(
        "SELECT COUNT(*), SUM(status = 'done'), COUNT(DISTINCT visit_id), GROUP_CONCAT(DISTINCT vantage_point)"
        " FROM visits"
    ).fetchone()
    assert (planned, done, ids, places) == (PLANNED, PLANNED, PLANNED, "lab-a")
    outcomes = db.execute("SELECT protocol, site, error_class FROM visits WHERE error_class != 'Successful'")
    assert outcomes.fetchall() == []
    db.close()
    assert (results / "report").is_dir()


@pytest.mark.image
def test_podman_restarts_a_crashed_container_and_never_a_killed_one() -> None:
    """The restart rule docs/deploy.md states, on this host's podman with the project's containers.conf and the
    compose file's init and restart policy, in a container of the base image alone: a process that dies inside is
    a crash (the container comes back); `podman kill` is a stop by the user (it stays `Exited (137)`)."""
    base = "localhost/dnsstudy-base:bookworm"
    made = subprocess.run(["bash", str(DOCKER / "base-image.sh"), base], capture_output=True, text=True, timeout=900)
    assert made.returncode == 0, made.stderr[-2000:]
    project = Project(name=f"{TEST_PREFIX}restart", tmp=Path("/nonexistent"))
    name = project.container("sleeper")
    project.podman("rm", "-f", name)
    options = ["--init", "--restart", "unless-stopped", "--ulimit", "nofile=20000:20000", "--ulimit", "nproc=1000:1000"]
    try:
        project.podman("run", "-d", "--name", name, *options, base, "sleep", "600")
        project.wait_until("sleeper", lambda s: s[0] == "running", 60)
        init = project.podman("inspect", "--format", "{{.State.Pid}}", name).strip()
        (sleeper,) = Path(f"/proc/{init}/task/{init}/children").read_text().split()
        os.kill(int(sleeper), signal.SIGKILL)  # as a crash or the OOM killer ends a worker
        project.wait_until("sleeper", lambda s: s[0] == "running" and s[2] == 1, 60)
        project.podman("kill", name)
        project.wait_until("sleeper", lambda s: s[0] == "exited" and s[1] == 137, 60)
        time.sleep(10)
        assert project.state("sleeper") == ("exited", 137, 1), "a killed container was started again"
    finally:
        project.podman("rm", "-f", name)
