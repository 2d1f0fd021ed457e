"""The interface every shaping backend implements.

A backend impairs the two egress interfaces of the shaper namespace: the
one towards the servers carries the uplink (client -> servers), the one
towards the client carries the downlink. Adding a backend is one module
with a `ShapingBackend` subclass, registered in `harness.shaping.BACKENDS`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar

from harness.daemons import Daemon
from harness.shaping.link_profile import Direction, LinkProfile


@dataclass(frozen=True)
class ShapingPoint:
    """Where shaping happens: a namespace that forwards between client and servers."""

    namespace: str
    uplink_if: str  # egress towards the servers
    downlink_if: str  # egress towards the client
    run_dir: Path

    def directions(self, profile: LinkProfile) -> list[tuple[str, str, str, Direction]]:
        """(name, egress interface, ingress interface, impairments) for both directions."""
        return [
            ("uplink", self.uplink_if, self.downlink_if, profile.uplink),
            ("downlink", self.downlink_if, self.uplink_if, profile.downlink),
        ]


class ShapingBackend(ABC):
    name: ClassVar[str]

    def __init__(self, point: ShapingPoint):
        self.point = point

    @abstractmethod
    def apply(self, profile: LinkProfile) -> list[Daemon]:
        """Impair the link as ``profile`` says (from a clean state); return daemons started."""

    @abstractmethod
    def clear(self) -> None:
        """Remove every impairment this backend may have installed (safe in any state)."""
