"""The Internet side's namespaces, veths, addresses and routes (the lab's are in harness/lab/topology.py).

    client  --c0 ==== sc--  shaper  --ss ==== <prefix>-up--  host
     .2/30    .1/30           .6/30   .5/30

The client's /30 is .0, the host link's .4; the host routes the client's /30 back through the shaper.
"""

from __future__ import annotations

from pyroute2 import IPRoute

from harness import netns
from harness.internet.config import InternetConfig
from harness.place import CLIENT_IF, SHAPER_CLIENT_IF, SHAPER_SERVER_IF


def build(cfg: InternetConfig) -> None:
    """Create the client and shaper namespaces, link them to each other and the shaper to the host, and route."""
    ns = cfg.namespaces
    for name in ns.values():
        netns.create(name)
    netns.write_hosts(ns["client"])
    a = cfg.address
    with IPRoute(netns=ns["client"]) as ipr:
        ipr.link("add", ifname=CLIENT_IF, kind="veth", peer={"ifname": SHAPER_CLIENT_IF, "net_ns_fd": ns["shaper"]})
    with IPRoute() as ipr:
        ipr.link("add", ifname=cfg.host_if, kind="veth", peer={"ifname": SHAPER_SERVER_IF, "net_ns_fd": ns["shaper"]})
    _configure(ns["client"], CLIENT_IF, a(2), 30, default_via=a(1))
    _configure(ns["shaper"], SHAPER_CLIENT_IF, a(1), 30)
    _configure(ns["shaper"], SHAPER_SERVER_IF, a(6), 30, default_via=a(5))
    _configure(None, cfg.host_if, a(5), 30, routes=((f"{a(0)}/30", a(6)),))
    netns.set_sysctl(ns["shaper"], "net.ipv4.ip_forward", "1")


def _configure(
    ns: str | None,
    ifname: str,
    address: str,
    prefixlen: int,
    default_via: str | None = None,
    routes: tuple[tuple[str, str], ...] = (),
) -> None:
    """Address ``ifname`` in namespace ``ns`` (None: the host's), bring it up and add its routes."""
    with IPRoute(netns=ns) if ns else IPRoute() as ipr:
        index = ipr.link_lookup(ifname=ifname)[0]
        ipr.addr("add", index=index, address=address, prefixlen=prefixlen)
        ipr.link("set", index=index, state="up")
        if default_via:
            ipr.route("add", dst="0.0.0.0/0", gateway=default_via)
        for dst, gateway in routes:
            ipr.route("add", dst=dst, gateway=gateway)
