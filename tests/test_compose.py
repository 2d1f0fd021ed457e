"""docker/compose.yaml under a real engine: podman, through docker/podman-compose.sh (image marker).

The broker, the coordinator and one worker from the compose file run a small lab study (one
vantage point, the lab demo's two sites, three protocols) to its end; the store then holds every
planned visit once, each Successful. The study file is mounted into the services by an override
file, as docs/deploy.md tells a user to do with a study of their own. The project is brought
down afterwards with its volumes, and nothing it made may be left: containers, networks, volumes.
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
from collections.abc import Iterator
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
MAX_RESTARTS = 2


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


@pytest.mark.image
def test_compose_runs_a_small_lab_study_to_its_end_under_podman(project: Project) -> None:
    up = project.compose("up", "-d", *SERVICES)
    assert up.returncode == 0, up.stdout[-2000:] + up.stderr[-3000:]
    project.note_what_it_made()
    assert {project.container(s) for s in SERVICES} <= set(project.podman("ps", "--format", "{{.Names}}").split())
    logs = wait_for_the_study(project, 1500)
    assert "report:" in logs, logs[-2000:]  # --report: written once every vantage point is done

    copy = project.tmp / "results"
    copied = project.podman("cp", f"{project.container('coordinator')}:/results/{STUDY}", str(copy))
    assert (copy / "store.sqlite").exists(), copied
    db = sqlite3.connect(copy / "store.sqlite")
    planned, done, ids, places = db.execute(
        "SELECT COUNT(*), SUM(status = 'done'), COUNT(DISTINCT visit_id), GROUP_CONCAT(DISTINCT vantage_point)"
        " FROM visits"
    ).fetchone()
    assert (planned, done, ids, places) == (PLANNED, PLANNED, PLANNED, "lab-a")
    outcomes = db.execute("SELECT protocol, site, error_class FROM visits WHERE error_class != 'Successful'")
    assert outcomes.fetchall() == []
    db.close()
    assert (copy / "report").is_dir()
