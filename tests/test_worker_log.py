"""A working worker's log says no "shutdown": a child it forks is not the worker.

The compose deployment's workers printed "worker: Warm shutdown (MainProcess)" at the first link
shaping of a block and went on working. pyroute2 runs each `IPRoute(netns=...)` in a forked child
and stops it with SIGTERM; the child had inherited Celery's worker handlers, whose test for the
main process (multiprocessing's name, unchanged by a fork) took it for the worker. Each test runs
a worker's signal set-up in a process of its own (Celery's handlers, as `app.Worker` installs them
at start), forks a pyroute2 child there and stops it as pyroute2 does. The lab test of two workers
(tests/test_distributed.py) reads the real workers' logs for the same line.
"""

from __future__ import annotations

import subprocess
import sys

from tests.conftest import ROOT

SCRIPT = """
import sys, time
from harness.distributed.app import make_app
from harness.distributed.worker import forked_children_take_default_signals
from pyroute2.process import ChildProcess

if sys.argv[1] == "fixed":
    forked_children_take_default_signals()
worker = make_app("redis://:password@127.0.0.1:1/0").Worker(pool="solo", concurrency=1, quiet=True, hostname="vp@h")
worker.install_platform_tweaks(worker)  # Celery's SIGTERM, SIGINT, SIGQUIT... handlers, as at the worker's start
child = ChildProcess(target=time.sleep, args=[2])
child.run()
time.sleep(0.5)  # the child is in its work when pyroute2 stops it
child.stop()  # SIGTERM, as pyroute2 stops every IPRoute(netns=...) helper
print(f"child ended {child.exitcode}; worker still working")
"""


def worker_with_a_forked_helper(mode: str) -> str:
    """What a worker process prints when pyroute2 stops a child it forked; ``mode`` 'fixed' or 'as before'."""
    run = subprocess.run([sys.executable, "-c", SCRIPT, mode], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr[-2000:]
    assert "worker still working" in run.stdout
    return run.stdout + run.stderr


def test_a_child_the_worker_forks_logs_no_shutdown_when_stopped():
    out = worker_with_a_forked_helper("fixed")
    assert "shutdown" not in out.lower(), out
    assert "child ended -15" in out  # it died of the signal, as any helper process does


def test_without_the_fix_the_stopped_child_logged_the_workers_shutdown():
    """The cause, shown: Celery's handler, inherited by the child, prints the line the workers' logs had."""
    out = worker_with_a_forked_helper("as before")
    assert "worker: Warm shutdown (MainProcess)" in out, out
