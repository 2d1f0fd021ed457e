"""`Shaper`: applies a network profile to a place's link, idempotently, and remembers what it applied."""

from __future__ import annotations

import hashlib
import json
import subprocess

from harness import netns
from harness.daemons import Daemon, stop_all
from harness.errors import HarnessError
from harness.place import SHAPER_CLIENT_IF, SHAPER_SERVER_IF, Place
from harness.shaping.backend import ShapingBackend, ShapingPoint
from harness.shaping.link_profile import LinkProfile
from harness.shaping.netem import NetemBackend, netem_available
from harness.shaping.userspace import UserspaceBackend

#: backend name -> class. A new backend is one module and one line here.
BACKENDS: dict[str, type[ShapingBackend]] = {b.name: b for b in (NetemBackend, UserspaceBackend)}


def fingerprint(profile: LinkProfile) -> str:
    return hashlib.sha256(profile.model_dump_json().encode()).hexdigest()[:16]


class Shaper:
    """The shaper namespace of a place, and what is applied there (state in <run>/shaping.json)."""

    def __init__(self, place: Place, backend: str = "auto"):
        if backend not in ("auto", *BACKENDS):
            raise HarnessError(f"unknown shaping backend '{backend}': choose auto, {', '.join(BACKENDS)}")
        self.place = place
        self.point = ShapingPoint(
            namespace=place.namespaces["shaper"],
            uplink_if=SHAPER_SERVER_IF,
            downlink_if=SHAPER_CLIENT_IF,
            run_dir=place.run_dir,
        )
        self.requested = backend
        self.state_file = place.run_dir / "shaping.json"

    def choose_backend(self) -> str:
        """netem where the kernel has it, else the user-space fallback; a forced choice is checked."""
        has_netem = netem_available(self.point.namespace, self.point.downlink_if)
        if self.requested == "netem" and not has_netem:
            raise HarnessError("this kernel has no sch_netem: use --backend userspace (or auto)")
        if self.requested != "auto":
            return self.requested
        return "netem" if has_netem else "userspace"

    def state(self) -> dict | None:
        try:
            return json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return None

    def daemons(self) -> list[Daemon]:
        return [Daemon(**d) for d in (self.state() or {}).get("daemons", [])]

    def problem(self) -> str | None:
        """Why the applied shaping is broken (a delayer died), or None."""
        dead = [d.name for d in self.daemons() if not d.alive()]
        return f"shaping daemon(s) not running: {', '.join(dead)}" if dead else None

    def apply(self, profile: LinkProfile) -> bool:
        """Apply ``profile``; False if exactly it is already applied and healthy (a no-op)."""
        self.place.require_healthy()
        state = self.state()
        if (
            state
            and state.get("fingerprint") == fingerprint(profile)
            and self.problem() is None
            and self.requested in ("auto", state.get("backend"))
        ):
            return False
        backend_name = self.choose_backend()
        self.clear()
        _offloads_off(self.place)
        backend = BACKENDS[backend_name](self.point)
        try:
            daemons = backend.apply(profile)
        except BaseException:
            backend.clear()
            raise
        self.state_file.write_text(
            json.dumps(
                {
                    "profile": profile.name,
                    "fingerprint": fingerprint(profile),
                    "backend": backend_name,
                    "settings": profile.model_dump(),
                    "daemons": [d.to_dict() for d in daemons],
                },
                indent=1,
            )
        )
        return True

    def clear(self) -> None:
        """Remove any shaping, whichever backend installed it."""
        stop_all(self.daemons(), grace=0.5)
        for cls in BACKENDS.values():
            cls(self.point).clear()
        self.state_file.unlink(missing_ok=True)


def _offloads_off(place: Place) -> None:
    """Segmentation offloads would let tbf and loss act on 64 KB super-packets instead of real ones."""
    for namespace, ifname in place.link_ends():
        subprocess.run(
            netns.command(namespace, ["ethtool", "-K", ifname, "tso", "off", "gso", "off", "gro", "off"]),
            capture_output=True,
            timeout=10,
        )


def shape(place: Place, network: str) -> bool:
    """Shape the place's link as the network profile ``network`` says; False if it already is (a no-op)."""
    from harness.shaping.link_profile import load_link_profile

    return Shaper(place).apply(load_link_profile(network))
