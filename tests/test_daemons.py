"""Stopping supervised processes (harness/daemons.py): SIGTERM, then SIGKILL after the grace, each held by a pidfd."""

from __future__ import annotations

import subprocess
import sys

from harness.daemons import running, terminate

#: Children that say they are ready, then on SIGTERM say so and exit, or ignore it.
POLITE = "import signal, sys, time\n"
POLITE += "signal.signal(signal.SIGTERM, lambda *_: (print('term', flush=True), sys.exit(0)))\n"
POLITE += "print('ready', flush=True); time.sleep(60)"
STUBBORN = (
    "import signal, time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nprint('ready', flush=True); time.sleep(60)"
)


def _child(source: str) -> subprocess.Popen:
    child = subprocess.Popen([sys.executable, "-c", source], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline().strip() == "ready"
    return child


def test_terminate_ends_a_process_on_sigterm_and_kills_one_that_ignores_it():
    polite, stubborn = _child(POLITE), _child(STUBBORN)
    terminate([polite.pid, stubborn.pid], grace=0.3)  # it reaps them: their status is its
    assert polite.stdout is not None and polite.stdout.read().strip() == "term"  # SIGTERM ended it
    assert not running(polite.pid) and not running(stubborn.pid)  # the one that ignored SIGTERM was killed


def test_terminate_passes_over_a_process_that_is_gone():
    done = subprocess.Popen(["true"])
    done.wait()
    alive = _child(POLITE)
    terminate([done.pid, alive.pid], grace=1.0)  # the first pid names no process now: no error, the second ends
    assert alive.stdout is not None and alive.stdout.read().strip() == "term" and not running(alive.pid)
