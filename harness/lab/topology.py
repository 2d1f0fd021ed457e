"""The lab's three namespaces and the links between them.

    client  --c0 ==== sc--  shaper  --ss ==== v0--  server
    (browser, stubs,        (forwards; shaping      (resolvers, authoritative,
     timer)                  attaches here)          web servers, tarpit)

Interfaces are created directly inside the namespaces, so their fixed names
never appear in the host's namespace and two labs cannot collide on them.
"""

from __future__ import annotations

from pyroute2 import IPRoute

from harness import netns
from harness.errors import HarnessError
from harness.lab.config import LabConfig
from harness.place import CLIENT_IF, SHAPER_CLIENT_IF, SHAPER_SERVER_IF  # shared with the Internet side

SERVER_IF = "v0"  # the server namespace's end: only the lab has one


def check_collisions(config: LabConfig) -> None:
    """Refuse a lab subnet that overlaps an address or route of the host."""
    lab = config.network
    for ifname, net in netns.host_networks():
        if net.overlaps(lab):
            raise HarnessError(
                f"lab subnet {lab} (from {config.source}, key 'subnet') collides with {net} on "
                f"host interface {ifname}: choose another /23, e.g. with --subnet"
            )


def server_addresses(config: LabConfig) -> list[str]:
    """Every address the server namespace carries."""
    plan = config.addresses
    addrs = [plan.auth, plan.refused, plan.hang, plan.badcert]
    addrs += [plan.resolver(i) for i in range(len(config.settings.resolvers))]
    addrs += plan.web(config.settings.web_addresses)
    return addrs


def _veth(ns_a: str, if_a: str, ns_b: str, if_b: str) -> None:
    with IPRoute(netns=ns_a) as ipr:
        if not ipr.link_lookup(ifname=if_a):
            ipr.link("add", ifname=if_a, kind="veth", peer={"ifname": if_b, "net_ns_fd": ns_b})


def _configure(ns: str, ifname: str, addresses: list[str], routes: list[tuple[str, str]]) -> None:
    with IPRoute(netns=ns) as ipr:
        index = ipr.link_lookup(ifname=ifname)[0]
        for addr in addresses:
            ipr.addr("add", index=index, address=addr, prefixlen=24)
        ipr.link("set", index=index, state="up")
        for dst, gateway in routes:
            ipr.route("add", dst=dst, gateway=gateway)


def build(config: LabConfig) -> None:
    """Create namespaces, links, addresses, routes; enable forwarding in the shaper."""
    ns = config.namespaces
    plan = config.addresses
    for name in ns.values():
        netns.create(name)
    netns.write_hosts(ns["client"])
    _veth(ns["client"], CLIENT_IF, ns["shaper"], SHAPER_CLIENT_IF)
    _veth(ns["shaper"], SHAPER_SERVER_IF, ns["server"], SERVER_IF)
    # The client's default route goes to the shaper, as a real client's goes to its router. The shaper routes
    # only the lab's own subnets (it has no other link), so nothing can leave the lab. Without a default route
    # Firefox on Linux finds no route to its link-check address (network.netlink.route.check.IPv4, read before
    # the profile's preferences), calls the link down about a second after it starts, and closes its
    # connections then: the resolver connection a warm visit opened among them (3 of 6 fresh browsers).
    client_routes = [(str(plan.server_net), plan.shaper_client_side), ("0.0.0.0/0", plan.shaper_client_side)]
    _configure(ns["client"], CLIENT_IF, [plan.client], client_routes)
    _configure(ns["shaper"], SHAPER_CLIENT_IF, [plan.shaper_client_side], [])
    _configure(ns["shaper"], SHAPER_SERVER_IF, [plan.shaper_server_side], [])
    _configure(ns["server"], SERVER_IF, server_addresses(config), [(str(plan.client_net), plan.shaper_server_side)])
    netns.set_sysctl(ns["shaper"], "net.ipv4.ip_forward", "1")


def set_client_resolver(config: LabConfig, address: str) -> None:
    """Point the client namespace's system resolver (resolv.conf) at ``address``."""
    etc = netns.ETC_NETNS / config.namespaces["client"]
    etc.mkdir(parents=True, exist_ok=True)
    (etc / "resolv.conf").write_text(f"# written by dnsstudy lab\nnameserver {address}\n")


def destroy(config: LabConfig) -> None:
    """Remove the namespaces (their veths go with them) and /etc/netns files."""
    for name in config.namespaces.values():
        netns.remove(name)
