"""Do53: the browser's system resolver (resolv.conf) points at the resolver."""

from __future__ import annotations

from harness.arms.base import DnsArm


class Do53Arm(DnsArm):
    protocol = "do53"
    transport = "do53"
    client_required = ("dns53_resolver",)
    client_forbidden = ("dns53_loopback", "dns53_other", "dot_new_any", "https_connections")

    def start(self) -> None:
        self.client.set_system_resolver(self.resolver.address)
