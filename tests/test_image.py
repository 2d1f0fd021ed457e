"""The container image and the compose deployment (docker/, docs/deploy.md).

The compose tests are fast: the file is validated by docker-compose (Debian's, which
checks it against the Compose Specification's schema without an engine) and read
for what the deployment promises. The `image` tests build the image from this
checkout with docker/build.sh (a debootstrapped base, `podman build
--isolation=chroot`): its `runtime` stage, the shipped image, and its `test` stage,
the same plus the test tools. Commands run inside them with `buildah run --isolation
chroot`, and the compose file runs under podman (docker/podman-compose.sh: runc,
podman's API, docker-compose) to the end of a small lab study (tests/test_compose.py).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, TEST_POOL, TEST_PREFIX
from tests.helpers import live_processes_mentioning

COMPOSE = ROOT / "docker" / "compose.yaml"
# Named after the test prefix: helpers building at the same time on one host keep their own images.
IMAGE = f"localhost/dnsstudy-{TEST_PREFIX}:latest"  # the runtime stage
TEST_IMAGE = f"localhost/dnsstudy-{TEST_PREFIX}-test:latest"  # the test stage
IMAGE_LIMIT_MB = 1200  # issue 33: at most 1.2 GB with Firefox (docs/deploy.md, "Size")
#: KiB of the packages Chromium brings and nothing else needs: what `apt-get purge --auto-remove` would remove.
CHROMIUM_KIB = (
    "apt-get -s purge --auto-remove chromium chromium-driver | sed -n 's/^Purg \\([^ ]*\\).*/\\1/p'"
    " | xargs dpkg-query -W -f='${Installed-Size}\\n' | awk '{s += $1} END {print s + 0}'"
)
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


def leftovers(prefix: str) -> list[str]:
    """Links of the host's namespace and processes that name a lab prefix: what a lab down must not leave."""
    links = subprocess.run(["ip", "-o", "link", "show"], capture_output=True, text=True, check=True).stdout
    found = [line.split(":")[1].strip() for line in links.splitlines() if prefix in line]
    return found + live_processes_mentioning(prefix)


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
def test_container(image: str) -> Iterator[str]:
    """A working container of the test stage: the runtime image with the lock's development half."""
    yield from working_container(TEST_IMAGE, "test")


def image_size_mb(image: str) -> float:
    inspect = ["podman", "image", "inspect", "--format", "{{.Size}}", image]
    return int(subprocess.run(inspect, capture_output=True, text=True, check=True).stdout) / 1e6


@pytest.mark.image
def test_image_is_lean_and_runs_as_documented(image: str, container: str) -> None:
    """At most 1.2 GB with Firefox: what Chromium adds (the packages that removing chromium and
    chromium-driver would auto-remove, at dpkg's installed size) is left out of the limit and named in the
    message, so that the figure stays Firefox's (docs/deploy.md, "Size")."""
    inspect = ["podman", "image", "inspect", "--format", "{{json .Config.Entrypoint}}", image]
    entrypoint = subprocess.run(inspect, capture_output=True, text=True, check=True).stdout
    assert entrypoint.strip() == '["dnsstudy"]'
    added = buildah_run(container, "sh", "-c", CHROMIUM_KIB)
    assert added.returncode == 0, added.stderr
    chromium = int(added.stdout.split()[0] or 0) * 1024 / 1e6
    assert chromium > 0  # the image has Chromium (scripts/packages/runtime.txt)
    size = image_size_mb(image)
    assert size - chromium <= IMAGE_LIMIT_MB, f"image is {size:.0f} MB, {chromium:.0f} MB of it Chromium's packages"


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
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    assert " passed" in result.stdout.splitlines()[-1]


# One `buildah run`: each run is a new mount namespace, so the lab's /run/netns mounts
# live only as long as the command that made them. The lab is taken down on any exit.
LAB_SCRIPT = """
set -u
# chroot isolation mounts /proc/sys read-only, as Docker does without systempaths=unconfined (what
# compose gives a worker): remounted here, in this run's own mount namespace only.
mount -o remount,rw /proc/sys || exit 1
# buildah run, unlike Docker, leaves the container's host name out of /etc/hosts: the lab's
# client namespace has a hosts file of its own that names it (netns.write_hosts).
lab() { dnsstudy lab "$@" --prefix "$PREFIX" --subnet "$SUBNET"; }
trap 'lab down >/dev/null 2>&1; echo "lab down: $?"' EXIT
lab up || exit 1
for protocol in $PROTOCOLS; do
  dnsstudy visit https://google.com/ --protocol "$protocol" --prefix "$PREFIX" --subnet "$SUBNET" \\
    --results /tmp/visits >/dev/null 2>/tmp/visit.err
  echo "visit $protocol: $?"
  tail -3 /tmp/visit.err
done
"""


@pytest.mark.image
def test_lab_up_a_visit_per_arm_and_lab_down_inside_the_image(container: str) -> None:
    from harness.arms import browser_protocols

    protocols = sorted(browser_protocols())
    # The namespaces are made from the host's network namespace (chroot isolation shares it):
    # a prefix and a /23 of the test pool's last, which no other test lab takes at the same time.
    subnet = str(list(TEST_POOL.subnets(new_prefix=23))[-1])
    result = buildah_run(
        container,
        "env",
        f"PREFIX={TEST_PREFIX[:6]}img",
        f"SUBNET={subnet}",
        f"PROTOCOLS={' '.join(protocols)}",
        "bash",
        "-c",
        LAB_SCRIPT,
        capabilities=["CAP_NET_ADMIN", "CAP_SYS_ADMIN", "CAP_NET_RAW"],
        timeout=900,
    )
    out = result.stdout
    assert [line for line in out.splitlines() if line.startswith("visit ")] == [f"visit {p}: 0" for p in protocols], (
        out[-3000:] + result.stderr[-2000:]
    )
    assert out.rstrip().endswith("lab down: 0"), out[-1000:]
    assert not leftovers(f"{TEST_PREFIX[:6]}img"), "the lab left links or processes"
