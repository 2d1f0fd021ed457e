"""A watch on a place's daemons while a visit's browser runs: one stopped for a while leaves no other trace."""

from __future__ import annotations

import threading

from harness.daemons import stopped
from harness.place import Place

#: How often the place's daemons are looked at during a visit (a frozen resolver shows within this).
WATCH_S = 0.25


class DaemonWatch:
    """Looks at the place's daemons every WATCH_S while the browser runs: one stopped (SIGSTOP) for a while
    and then resumed leaves no trace afterwards, yet its answers came late and the page may have failed."""

    def __init__(self, place: Place):
        daemons = getattr(place.status(), "daemons", [])
        self.pids = {d["name"]: d["pid"] for d in daemons if d.get("alive")}
        self.problem: str | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> DaemonWatch:
        if self.pids:
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join()

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_S):
            frozen = [name for name, pid in self.pids.items() if stopped(pid)]
            if frozen:
                self.problem = f"{', '.join(frozen)} stopped during the visit"
                return


def place_problem(place: Place) -> str | None:
    """Which of the place's daemons died, if any (a dead lab resolver is our fault, not the protocol's)."""
    dead = place.status().dead
    return f"{', '.join(dead)} not running" if dead else None
