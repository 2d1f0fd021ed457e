"""DNS arms: how the browser's queries reach the resolver, one module per transport."""

from __future__ import annotations

from harness.arms.base import ClientSide, DnsArm, Resolver
from harness.arms.do53 import Do53Arm
from harness.arms.doh import DohArm
from harness.arms.dot import DotArm
from harness.errors import HarnessError

#: protocol name -> arm class. A new transport is one module and one line here.
ARMS: dict[str, type[DnsArm]] = {arm.protocol: arm for arm in (Do53Arm, DotArm, DohArm)}


def make_arm(protocol: str, resolver: Resolver, client: ClientSide, persistent: bool = False) -> DnsArm:
    """The arm for ``protocol`` (do53, dot, doh)."""
    try:
        cls = ARMS[protocol]
    except KeyError:
        raise HarnessError(f"unknown protocol '{protocol}': choose one of {', '.join(ARMS)}") from None
    return cls(resolver, client, persistent=persistent)


__all__ = ["ARMS", "ClientSide", "DnsArm", "Resolver", "make_arm"]
