"""`InternetConfig`: the names and addresses of one Internet side, validated from its name, interface and /29."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass, field

from harness.errors import HarnessError
from harness.internet.nft import IFNAME

DEFAULT_SUBNET = "198.19.255.248/29"  # RFC 2544 benchmarking space: rarely routed anywhere


@dataclass(frozen=True)
class InternetConfig:
    """Names and addresses of one Internet side."""

    prefix: str
    interface: str  # the host interface traffic leaves by
    subnet: ipaddress.IPv4Network  # a /29: two point-to-point /30s
    namespaces: dict[str, str] = field(default_factory=dict)

    @property
    def host_if(self) -> str:
        return f"{self.prefix}-up"

    def address(self, offset: int) -> str:
        return str(self.subnet.network_address + offset)

    @property
    def firewall_table(self) -> str:
        return f"dnsstudy_{self.prefix.replace('-', '_')}"


def internet_config(prefix: str, interface: str, subnet: str = DEFAULT_SUBNET) -> InternetConfig:
    """Validate the names and the /29 (one-line errors naming the value)."""
    if not re.fullmatch(r"[a-z][a-z0-9-]{0,7}", prefix):
        raise HarnessError(f"name '{prefix}': use at most 8 lower-case letters, digits or '-'")
    # Linux interface names; checked because the name goes into nftables rules.
    if not IFNAME.fullmatch(interface):
        raise HarnessError(f"interface '{interface}' is not a Linux interface name")
    try:
        net = ipaddress.ip_network(subnet)
    except ValueError:
        raise HarnessError(f"subnet '{subnet}' is not an IPv4 network") from None
    if net.version != 4 or net.prefixlen != 29:
        raise HarnessError(f"subnet '{subnet}' must be an IPv4 /29")
    return InternetConfig(
        prefix=prefix,
        interface=interface,
        subnet=net,
        namespaces={"client": f"{prefix}-client", "shaper": f"{prefix}-shaper"},
    )
