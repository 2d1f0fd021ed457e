"""Do53: the browser's system resolver (resolv.conf) points at the resolver."""

from __future__ import annotations

from harness.arms.base import DnsArm, register_arm
from harness.protocols import DO53


@register_arm(DO53)
class Do53Arm(DnsArm):
    def start(self) -> None:
        self.client.set_system_resolver(self.resolver.address)
