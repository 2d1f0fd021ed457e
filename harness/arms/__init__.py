"""DNS arms: how the browser's queries reach the resolver, one module per transport.

Each module in this package registers its arm with `harness.protocols.register_arm`
when imported, and every module here is imported below: a new transport is one new
file in this directory, and nothing else changes.
"""

from __future__ import annotations

import importlib
import pkgutil

from harness.arms.base import ClientSide, DnsArm, Resolver
from harness.protocols import arm_class

for _module in pkgutil.iter_modules(__path__):
    importlib.import_module(f"{__name__}.{_module.name}")


def make_arm(
    protocol: str,
    resolver: Resolver,
    client: ClientSide,
    persistent: bool = False,
    idle_timeout_ms: int = 10_000,
    stub: str | None = None,
) -> DnsArm:
    """A new arm for ``protocol`` (one of `harness.protocols.browser_protocols()`); ``stub`` picks the stub
    program of an arm that runs one (None: its default)."""
    cls = arm_class(protocol)
    return cls(resolver, client, persistent=persistent, idle_timeout_ms=idle_timeout_ms, stub=stub)


__all__ = ["ClientSide", "DnsArm", "Resolver", "make_arm"]
