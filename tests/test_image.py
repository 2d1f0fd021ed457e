"""The container image and the compose deployment (docker/, docs/deploy.md).

The compose tests are fast: the file is validated by docker-compose (Debian's, which
checks it against the Compose Specification's schema without an engine) and read
for what the deployment promises. The `image` tests build the image from this
checkout with docker/build.sh (a debootstrapped base, `podman build
--isolation=chroot`): its `runtime` stage, the shipped image, and its `test` stage,
the same plus the test tools, and its `runtime-firefox` stage (`--browsers firefox`), which
shares every layer of the default image but Chromium's. Commands run inside them with `buildah
run --isolation chroot`; a lab and its visits run in a container with a compose worker's options
(`podman run`), and the compose file runs under podman (docker/podman-compose.sh: runc, podman's
API, docker-compose) to the end of a small lab study (tests/test_compose.py).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, TEST_PREFIX

COMPOSE = ROOT / "docker" / "compose.yaml"
# Named after the test prefix: helpers building at the same time on one host keep their own images.
IMAGE = f"localhost/dnsstudy-{TEST_PREFIX}:latest"  # the runtime stage: Firefox and Chromium
FIREFOX_IMAGE = f"localhost/dnsstudy-{TEST_PREFIX}:firefox"  # the runtime-firefox stage: Firefox alone
TEST_IMAGE = f"localhost/dnsstudy-{TEST_PREFIX}-test:latest"  # the test stage
IMAGE_LIMIT_MB = 1200  # issues 33 and 45: the image with Firefox alone at most 1.2 GB (docs/deploy.md, "Size")
CHROMIUM = "/usr/lib/chromium/chromium"
SRC = "/opt/dnsstudy/src"  # the checkout inside the image
CRAWLER_CAPS = {"NET_ADMIN", "SYS_ADMIN", "NET_RAW"}


def compose_config(path: Path = COMPOSE) -> subprocess.CompletedProcess[str]:
    """`docker-compose config` on a file: the merged, validated file on stdout, or the schema error."""
    assert shutil.which("docker-compose"), "docker-compose is missing: run scripts/setup.sh"
    return subprocess.run(
        ["docker-compose", "-f", str(path), "config"], capture_output=True, text=True, timeout=60, cwd=path.parent
    )


@pytest.fixture(scope="module")
def services() -> dict:
    result = compose_config()
    assert result.returncode == 0, result.stderr
    return yaml.safe_load(result.stdout)["services"]


def test_compose_file_is_valid(services: dict) -> None:
    assert {"broker", "coordinator"} <= set(services)


def test_the_validator_rejects_a_broken_file(tmp_path: Path) -> None:
    """A misspelt key fails validation: the check above is not a formality."""
    broken = tmp_path / "compose.yaml"
    broken.write_text(COMPOSE.read_text().replace("cap_add:", "capabilities:"))
    result = compose_config(broken)
    assert result.returncode != 0
    assert "capabilities" in result.stderr


def test_one_worker_per_vantage_point_of_the_default_study(services: dict) -> None:
    command = services["coordinator"]["command"]
    study = tomllib.loads((ROOT / "profiles" / "studies" / f"{command[1]}.toml").read_text())
    served = [
        s["command"][s["command"].index("--vantage") + 1] for s in services.values() if s["command"][0] == "worker"
    ]
    assert sorted(served) == sorted(study["vantage_points"])


def test_workers_get_capabilities_not_privilege(services: dict) -> None:
    for name, service in services.items():
        assert not service.get("privileged"), name
        if service["command"][0] == "worker":
            assert set(service["cap_add"]) == CRAWLER_CAPS, name
            assert service["restart"] == "unless-stopped"
        else:
            assert not service.get("cap_add"), f"{name} needs no capability"


def volume_names(service: dict) -> set[str]:
    """Named volumes a service mounts (docker-compose 1.x prints them as `NAME:PATH[:MODE]`)."""
    mounts = [m if isinstance(m, str) else f"{m['source']}:{m['target']}" for m in service.get("volumes", [])]
    return {m.split(":")[0] for m in mounts if not m.startswith(("/", "."))}


def test_state_survives_on_volumes_and_restarts(services: dict) -> None:
    volumes = {name: volume_names(service) for name, service in services.items()}
    assert "broker" in volumes["broker"] and "results" in volumes["coordinator"]
    assert services["broker"]["restart"] == services["coordinator"]["restart"] == "unless-stopped"
    assert "--stay" in services["coordinator"]["command"]  # a finished study's coordinator idles: no restart loop
    assert "ports" not in services["broker"], "the broker is reached on the project network only"


# --- the image, built and entered ------------------------------------------------


def buildah_run(
    container: str, *argv: str, capabilities: Sequence[str] = (), timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run argv in the working container (chroot isolation: the host's network namespace, a mount one of its own)."""
    options = [f"--cap-add={cap}" for cap in capabilities]
    command = ["buildah", "run", "--isolation", "chroot", *options, "--workingdir", SRC, container, "--", *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=timeout)


@pytest.fixture(scope="session")
def image() -> str:
    """The runtime image and (as TEST_IMAGE) its test stage, built from this checkout by the project's script."""
    for tool in ("podman", "buildah", "debootstrap"):
        assert shutil.which(tool), f"{tool} is missing: run scripts/setup.sh"
    build = subprocess.run(
        ["bash", str(ROOT / "docker" / "build.sh"), IMAGE],
        capture_output=True,
        text=True,
        timeout=3600,
        env={**os.environ, "DNSSTUDY_TEST_IMAGE": TEST_IMAGE},
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    return IMAGE


@pytest.fixture(scope="session")
def firefox_image(image: str) -> str:
    """The Firefox-only image, built after the default one: every layer but Chromium's comes from the cache."""
    build = subprocess.run(
        ["bash", str(ROOT / "docker" / "build.sh"), "--browsers", "firefox", FIREFOX_IMAGE],
        capture_output=True,
        text=True,
        timeout=1800,
    )
    assert build.returncode == 0, build.stdout[-3000:] + build.stderr[-3000:]
    return FIREFOX_IMAGE


def layers(image: str) -> list[str]:
    inspect = ["podman", "image", "inspect", "--format", "{{json .RootFS.Layers}}", image]
    return json.loads(subprocess.run(inspect, capture_output=True, text=True, check=True).stdout)


def working_container(image: str, role: str) -> Iterator[str]:
    name = f"dnsstudy-{role}-{os.getpid()}"
    subprocess.run(["buildah", "from", "--name", name, image], check=True, capture_output=True, timeout=120)
    yield name
    subprocess.run(["buildah", "rm", name], capture_output=True, timeout=120)


@pytest.fixture(scope="module")
def container(image: str) -> Iterator[str]:
    """A working container of the runtime image."""
    yield from working_container(image, "runtime")


@pytest.fixture(scope="module")
def firefox_container(firefox_image: str) -> Iterator[str]:
    """A working container of the Firefox-only image."""
    yield from working_container(firefox_image, "firefox")


@pytest.fixture(scope="module")
def test_container(image: str) -> Iterator[str]:
    """A working container of the test stage: the runtime image with the lock's development half."""
    yield from working_container(TEST_IMAGE, "test")


def image_size_mb(image: str) -> float:
    inspect = ["podman", "image", "inspect", "--format", "{{.Size}}", image]
    return int(subprocess.run(inspect, capture_output=True, text=True, check=True).stdout) / 1e6


@pytest.mark.image
def test_the_firefox_image_is_lean_and_shares_the_default_images_layers(
    image: str, firefox_image: str, container: str, firefox_container: str
) -> None:
    """At most 1.2 GB with Firefox alone; the default image is the same layers plus Chromium's, last."""
    for built in (image, firefox_image):
        inspect = ["podman", "image", "inspect", "--format", "{{json .Config.Entrypoint}}", built]
        assert subprocess.run(inspect, capture_output=True, text=True, check=True).stdout.strip() == '["dnsstudy"]'
    size = image_size_mb(firefox_image)
    assert size <= IMAGE_LIMIT_MB, f"the Firefox image is {size:.0f} MB"
    firefox, both = layers(firefox_image), layers(image)
    assert both[: len(firefox)] == firefox and len(both) > len(firefox), "not Firefox's layers, then Chromium's"
    assert buildah_run(container, "test", "-x", CHROMIUM).returncode == 0, "no Chromium in the default image"
    assert buildah_run(firefox_container, "test", "-e", CHROMIUM).returncode != 0, "Chromium in the Firefox image"


@pytest.mark.image
def test_no_test_or_lint_tool_in_the_runtime_image(container: str, test_container: str) -> None:
    """The runtime stage has the lock's run-time half only; the test stage adds the tools on top of it."""
    tools = ["pytest", "mypy", "ruff", "jedi", "IPython", "ipykernel", "nbclient"]
    probe = "import importlib.util, sys; print(' '.join(m for m in sys.argv[1:] if importlib.util.find_spec(m)))"
    found = buildah_run(container, ".venv/bin/python", "-c", probe, *tools)
    assert found.returncode == 0, found.stderr
    assert found.stdout.split() == [], "test or lint tools in the runtime image"
    found = buildah_run(test_container, ".venv/bin/python", "-c", probe, *tools)
    assert found.stdout.split() == tools, found.stderr  # the probe sees them where they are


@pytest.mark.image
def test_version_inside_the_image(container: str) -> None:
    result = buildah_run(container, "dnsstudy", "--version")
    from harness import __version__ as version  # the one place the version lives (pyproject reads it)

    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"dnsstudy, version {version}"


@pytest.mark.image
def test_no_build_tool_in_the_runtime_stage(container: str) -> None:
    for tool in ("cargo", "go", "gcc"):
        assert buildah_run(container, "sh", "-c", f"command -v {tool}").returncode != 0, f"{tool} in the image"
    helpers = buildah_run(container, "ls", "/opt/dnsstudy/bin")
    assert set(helpers.stdout.split()) >= {"nfqdelay", "dnstimer", "nodelay.so", "quictimer", "dnsproxy"}


@pytest.mark.image
def test_fast_tests_pass_inside_the_image(test_container: str) -> None:
    result = buildah_run(
        test_container,
        *(".venv/bin/python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not lab and not image"),
        *("--ignore", "tests/test_image.py"),  # the compose checks need docker-compose, a host tool
        # It compiles a C program against getdns: the runtime image has no compiler, by design.
        *(
            "--deselect",
            "tests/test_timer_units.py::test_without_reuse_every_getdns_context_is_destroyed_past_1024_in_flight",
        ),
        # It runs the Go front's own tests: the runtime image has no Go either (its builder stage does).
        *("--deselect", "tests/test_h3front.py::test_the_front_s_own_go_tests_pass"),
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout.splitlines()[-1]


# The lab runs where a compose worker's does: in a container of its own (`podman run` with the worker's
# options from compose.yaml), not under `buildah run`. chroot isolation puts the command in a chroot, and the
# kernel refuses a chrooted process a new user namespace (unshare(2): EPERM), which Chromium's sandbox needs
# (2026-11-28: "the browser account cannot create a user namespace" under buildah; Successful in podman run).
LAB_SCRIPT = """
set -u
lab() { dnsstudy lab "$@" --prefix "$PREFIX" --subnet "$SUBNET"; }
trap 'lab down >/dev/null 2>&1; echo "lab down: $?"' EXIT
lab up >/tmp/lab.out 2>&1 || { tail -20 /tmp/lab.out; exit 1; }
for visit in $VISITS; do
  browser="${visit%%:*}" protocol="${visit#*:}"
  dnsstudy visit https://google.com/ --browser "$browser" --protocol "$protocol" --prefix "$PREFIX" \\
    --subnet "$SUBNET" --results /tmp/visits >/dev/null 2>/tmp/visit.err
  echo "visit $browser $protocol: $?"
  tail -3 /tmp/visit.err
done
"""


def worker_options() -> list[str]:
    """`podman run` options of compose.yaml's worker (x-worker): capabilities, security options, /run, shm, init."""
    worker = yaml.safe_load(COMPOSE.read_text())["x-worker"]
    options = ["--init"] if worker.get("init") else []
    for name, limit in worker["ulimits"].items():
        options.append(f"--ulimit={name}={limit['soft']}:{limit['hard']}")
    options += [f"--cap-add={cap}" for cap in worker["cap_add"]]
    options += [f"--security-opt={opt}" for opt in worker["security_opt"]]
    options += [f"--tmpfs={path}" for path in worker["tmpfs"]]
    return options + [f"--shm-size={worker['shm_size']}"]


def visits_in_a_lab(image: str, visits: list[str]) -> str:
    """Bring a lab up in a worker's container of ``image``, make each visit (BROWSER:PROTOCOL), bring it down."""
    name = f"dnsstudy-visits-{os.getpid()}"
    env = {**os.environ, "CONTAINERS_CONF": str(ROOT / "docker" / "containers.conf")}
    script = ["-e", "PREFIX=imglab", "-e", "SUBNET=10.250.254.0/23", "-e", f"VISITS={' '.join(visits)}"]
    command = ["podman", "run", "--rm", "--name", name, *worker_options(), *script, "--entrypoint", "bash"]
    try:
        result = subprocess.run(
            [*command, image, "-c", LAB_SCRIPT], capture_output=True, text=True, timeout=900, env=env
        )
    finally:
        subprocess.run(["podman", "rm", "-f", "-t", "5", name], capture_output=True, timeout=120, env=env)
    out = result.stdout
    assert out.rstrip().endswith("lab down: 0"), out[-3000:] + result.stderr[-2000:]
    return out


def visit_lines(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("visit ")]


@pytest.mark.image
def test_lab_up_a_visit_per_arm_and_lab_down_inside_the_image(image: str) -> None:
    """The default image: Firefox through every arm, and Chromium once."""
    from harness.arms import browser_protocols

    visits = [f"firefox:{p}" for p in sorted(browser_protocols())] + ["chromium:do53"]
    out = visits_in_a_lab(image, visits)
    assert visit_lines(out) == [f"visit {v.replace(':', ' ')}: 0" for v in visits], out[-3000:]


@pytest.mark.image
def test_the_firefox_image_visits_with_firefox_and_names_chromium_missing(firefox_image: str) -> None:
    """The Firefox-only image: a Firefox visit succeeds, and a Chromium one fails in one line naming what is missing."""
    out = visits_in_a_lab(firefox_image, ["firefox:doh", "chromium:do53"])
    lines = visit_lines(out)
    assert lines[0] == "visit firefox doh: 0", out[-3000:]
    assert lines[1].startswith("visit chromium do53: ") and not lines[1].endswith(": 0"), out[-3000:]
    assert "chromium is missing" in out, out[-3000:]
