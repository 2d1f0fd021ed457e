"""DNS arms: how the browser's queries reach the resolver, one module per transport.

Each module in this package registers its arm with `register_arm` (harness/arms/base.py)
when imported, and every module here is imported below: a new transport is one new
file in this directory, and nothing else changes.
"""

from __future__ import annotations

import importlib
import pkgutil

from harness.arms.base import DnsArm, registered_arms
from harness.errors import HarnessError
from harness.place import ClientSide, Resolver
from harness.protocols import protocols

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")


def browser_protocols() -> list[str]:
    """Protocols a browser visit can use: those with an arm, in rank order."""
    arms = registered_arms()
    return [p.name for p in protocols() if p.name in arms]


def arm_class(name: str) -> type[DnsArm]:
    """The arm class of protocol ``name``; a one-line error naming the protocols that have one."""
    try:
        return registered_arms()[name]
    except KeyError:
        raise HarnessError(
            f"unknown protocol '{name}' for a visit: choose one of {', '.join(browser_protocols())}"
        ) from None


def make_arm(
    protocol: str,
    resolver: Resolver,
    client: ClientSide,
    persistent: bool = False,
    idle_timeout_ms: int = 10_000,
    stub: str | None = None,
) -> DnsArm:
    """A new arm for ``protocol`` (one of `browser_protocols()`); ``stub`` picks the stub
    program of an arm that runs one (None: its default)."""
    cls = arm_class(protocol)
    return cls(resolver, client, persistent=persistent, idle_timeout_ms=idle_timeout_ms, stub=stub)


__all__ = ["ClientSide", "DnsArm", "Resolver", "arm_class", "browser_protocols", "make_arm"]
