"""DNS arms: how the browser's queries reach the resolver, one module per transport.

Each module registers its arm with `harness.protocols.register_arm`; importing
it here is all a new transport needs.
"""

from __future__ import annotations

from harness.arms import do53, doh, dot  # noqa: F401  (registers the arms)
from harness.arms.base import ClientSide, DnsArm, Resolver
from harness.protocols import arm_class


def make_arm(
    protocol: str, resolver: Resolver, client: ClientSide, persistent: bool = False, idle_timeout_ms: int = 10_000
) -> DnsArm:
    """A new arm for ``protocol`` (one of `harness.protocols.browser_protocols()`)."""
    return arm_class(protocol)(resolver, client, persistent=persistent, idle_timeout_ms=idle_timeout_ms)


__all__ = ["ClientSide", "DnsArm", "Resolver", "make_arm"]
