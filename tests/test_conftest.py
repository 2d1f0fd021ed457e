"""The test suite's own plumbing (tests/conftest.py), tested as a user of it would meet it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_a_sigterm_to_pytest_still_tears_every_fixture_down(tmp_path):
    """CI cancelling a run must not leave a test's lab or crawl behind: our conftest turns SIGTERM into Ctrl-C
    (in pytest's own process only: a forked helper still dies of it)."""
    started, torn_down = tmp_path / "started", tmp_path / "torn-down"
    test_file = tmp_path / "test_sleeper.py"
    test_file.write_text(
        "import os, pathlib, signal, time, pytest\n"
        "@pytest.fixture\n"
        "def held():\n"
        "    yield\n"
        f"    pathlib.Path({str(torn_down)!r}).write_text('down')\n"
        "def test_sleeps(held):\n"
        "    ready_r, ready_w = os.pipe()\n"
        "    child = os.fork()\n"  # a forked helper, as pyroute2 makes: SIGTERM kills it, never unwinds pytest
        "    if child == 0:\n"
        "        os.write(ready_w, b'1')\n"  # past Python's after-fork reset, which drops pending signals
        # Short sleeps: a SIGTERM landing between the eval loop's last check and a long sleep's system call
        # would wait the whole sleep for its handler (CI waited 120 s once).
        "        for _ in range(1200):\n"
        "            time.sleep(0.1)\n"
        "        os._exit(0)\n"
        "    os.close(ready_w)\n"  # a child that died before writing gives EOF here, not a wait forever
        "    os.read(ready_r, 1)\n"
        "    os.kill(child, signal.SIGTERM)\n"
        "    assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == -signal.SIGTERM\n"
        f"    assert not pathlib.Path({str(torn_down)!r}).exists()\n"
        f"    pathlib.Path({str(started)!r}).write_text('up')\n"
        "    time.sleep(120)\n"
    )
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "tests.conftest", "-p", "no:cacheprovider", str(test_file)]
    proc = subprocess.Popen(argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        deadline = time.monotonic() + 60
        while not started.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert started.exists(), proc.communicate(timeout=10)[0] if proc.poll() is not None else "never started"
        proc.send_signal(signal.SIGTERM)
        output = proc.communicate(timeout=30)[0]
    finally:
        proc.kill()
        proc.wait()
    assert torn_down.read_text() == "down", output
    assert proc.returncode == 2, output  # pytest's "interrupted"
