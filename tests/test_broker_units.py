"""The broker's bookkeeping without a server: whether the server its pid file names still runs."""

from __future__ import annotations

import subprocess
from pathlib import Path

from harness.distributed.broker import RedisService
from tests.helpers import wait_for


def _state(pid: int) -> str:
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]


def test_a_killed_server_not_yet_reaped_is_not_running(tmp_path):
    # A SIGKILLed redis-server leaves its pid file, and until it is reaped signal 0 still finds it: a chaos
    # run's `broker up` then took the zombie for a live server and never started one.
    service = RedisService(name="zombie", root=tmp_path)
    service.directory.mkdir()
    child = subprocess.Popen(["sleep", "30"])
    try:
        (service.directory / "redis.pid").write_text(f"{child.pid}\n")
        assert service.pid() == child.pid
        child.kill()
        wait_for(lambda: _state(child.pid) == "Z", 5, "the killed child to be a zombie")  # we have not reaped it
        assert service.pid() is None
    finally:
        child.kill()
        child.wait()


def test_no_pid_file_or_a_broken_one_is_no_server(tmp_path):
    service = RedisService(name="none", root=tmp_path)
    assert service.pid() is None
    service.directory.mkdir()
    (service.directory / "redis.pid").write_text("not a pid\n")
    assert service.pid() is None
