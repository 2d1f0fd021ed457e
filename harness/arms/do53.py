"""Do53: the browser's system resolver (resolv.conf) points at the resolver."""

from __future__ import annotations

from typing import TYPE_CHECKING

from harness.arms.base import DnsArm, register_arm
from harness.protocols import DO53

if TYPE_CHECKING:
    from harness.arms.evidence import ClientCount


@register_arm(DO53)
class Do53Arm(DnsArm):
    def start(self) -> None:
        self.client.set_system_resolver(self.resolver.address)

    def connection_unopened(self, counted: ClientCount | None) -> bool:
        """Plain DNS opens no connection: a query is a datagram of its own."""
        return True
