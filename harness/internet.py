"""`InternetSide`: visits and timers on the real Internet, through namespaces the harness creates.

    client  --c0 ==== sc--  shaper  --ss ==== <prefix>-up--  host  --> chosen interface
    (browser, stubs,        (forwards; shaping               (forwards; NAT out of
     timer)                  attaches here)                   the chosen interface)

The browser never runs in the host's namespace: the client namespace gives
it its own resolv.conf and packet counters (the arm proof), and the shaper
namespace gives the same link emulation as the lab, on a link that ends at
the host. The host forwards and masquerades only the project's own /29 out
of the interface the user chose. `down` removes the namespaces, the NAT
table and the route, and restores the host's ip_forward.
"""

from __future__ import annotations

import ipaddress
import json
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from pyroute2 import IPRoute

from harness import netns
from harness.arms.base import ClientSide, Resolver
from harness.daemons import kill_namespace_processes
from harness.errors import HarnessError, require_root
from harness.paths import RUN_ROOT
from harness.place import CLIENT_IF, SHAPER_CLIENT_IF, SHAPER_SERVER_IF, Place
from harness.resolvers import load_resolver

SYSTEM_CA = Path("/etc/ssl/certs/ca-certificates.crt")  # Debian's bundle: what Stubby and the timer trust
DEFAULT_SUBNET = "198.19.255.248/29"  # RFC 2544 benchmarking space: rarely routed anywhere
IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")


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
    def nat_table(self) -> str:
        return f"dnsstudy_{self.prefix.replace('-', '_')}"


def internet_config(prefix: str, interface: str, subnet: str = DEFAULT_SUBNET) -> InternetConfig:
    """Validate the names and the /29 (one-line errors naming the value)."""
    if not re.fullmatch(r"[a-z][a-z0-9-]{0,7}", prefix):
        raise HarnessError(f"name '{prefix}': use at most 8 lower-case letters, digits or '-'")
    # Linux interface names; checked because the name goes into nftables rules.
    if not re.fullmatch(r"[A-Za-z0-9_.:-]{1,15}", interface):
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


@dataclass
class InternetStatus:
    up: bool
    namespaces: dict[str, bool]
    interface: str

    @property
    def healthy(self) -> bool:
        return self.up and all(self.namespaces.values())

    @property
    def dead(self) -> list[str]:
        return [f"namespace {role}" for role, ok in self.namespaces.items() if self.up and not ok]


class InternetSide(Place):
    """A client namespace routed to the Internet through a shaper namespace and the host."""

    kind = "internet"

    @classmethod
    def named(cls, prefix: str) -> InternetSide:
        """The Internet side `internet up` created under ``prefix``."""
        state = RUN_ROOT / prefix / "internet.json"
        try:
            saved = json.loads(state.read_text())
        except (OSError, ValueError):
            raise HarnessError(
                f"no Internet side '{prefix}': run 'dnsstudy internet up --interface IF --name {prefix}' first"
            ) from None
        return cls(internet_config(prefix, saved["interface"], saved["subnet"]))

    def __init__(self, config: InternetConfig):
        self.config = config
        self.name = config.prefix
        self.run_dir = RUN_ROOT / config.prefix
        self.state_file = self.run_dir / "internet.json"

    @property
    def namespaces(self) -> dict[str, str]:
        return self.config.namespaces

    @property
    def up_command(self) -> str:
        return f"dnsstudy internet up --interface IF --name {self.name}"

    # The addresses: client link .0/30, host link .4/30.
    @property
    def client_address(self) -> str:
        return self.config.address(2)

    @property
    def gateway(self) -> str:
        """The shaper's client-side address: the client's next hop, and an address where no DNS answers."""
        return self.config.address(1)

    def status(self) -> InternetStatus:
        return InternetStatus(
            up=self.state_file.exists(),
            namespaces={r: netns.exists(n) for r, n in self.config.namespaces.items()},
            interface=self.config.interface,
        )

    def client_side(self) -> ClientSide:
        """The client namespace as a place for arms, browser and timer; the system CA bundle, not a lab CA."""
        return ClientSide(
            namespace=self.config.namespaces["client"],
            run_dir=self.run_dir,
            ca_file=SYSTEM_CA,
            dead_resolver=self.gateway,
            browser_trusts_ca=False,
        )

    def resolver(self, name: str) -> Resolver:
        """A resolver profile (profiles/resolvers/NAME.toml), or `default`: the host's own plain-DNS resolver."""
        return load_resolver(name)

    def resolver_names(self) -> None:
        return None  # any resolver profile: a study checks its names when it loads

    def link_ends(self) -> list[tuple[str, str]]:
        """The link ends at the host, which the harness leaves alone: only the namespaces' ends."""
        ns = self.namespaces
        return [(ns["client"], CLIENT_IF), (ns["shaper"], SHAPER_CLIENT_IF), (ns["shaper"], SHAPER_SERVER_IF)]

    def probe_peer(self) -> None:
        return None  # no echo or iperf3 peer on the Internet: the timer's RTTs are the check there

    def describe(self) -> dict[str, str]:
        return {"place": f"{self.kind}:{self.name}", "interface": self.config.interface}

    def up(self) -> bool:
        """Create namespaces, links, routes and NAT. False if already up (a no-op)."""
        require_root("internet up")
        cfg = self.config
        if self.state_file.exists():
            if self.status().healthy:
                return False
            raise HarnessError(f"internet side '{cfg.prefix}' is broken: run 'dnsstudy internet down' first")
        if (self.run_dir / "state.json").exists():
            raise HarnessError(f"'{cfg.prefix}' is the name of a lab: choose another --name")
        with IPRoute() as ipr:
            if not ipr.link_lookup(ifname=cfg.interface):
                raise HarnessError(f"interface '{cfg.interface}' does not exist on this host")
        for ifname, net in netns.host_networks():
            if net.overlaps(cfg.subnet):
                raise HarnessError(f"subnet {cfg.subnet} collides with {net} on {ifname}: choose another /29")
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)  # shaping daemons log here
        self.state_file.write_text(
            json.dumps(
                {"interface": cfg.interface, "subnet": str(cfg.subnet), "ip_forward": IP_FORWARD.read_text().strip()}
            )
        )
        try:
            self._build()
        except BaseException:
            self.down()
            raise
        return True

    def _build(self) -> None:
        cfg, ns = self.config, self.config.namespaces
        for name in ns.values():
            netns.create(name)
        a = cfg.address
        with IPRoute(netns=ns["client"]) as ipr:
            ipr.link("add", ifname=CLIENT_IF, kind="veth", peer={"ifname": SHAPER_CLIENT_IF, "net_ns_fd": ns["shaper"]})
        with IPRoute() as ipr:
            ipr.link(
                "add", ifname=cfg.host_if, kind="veth", peer={"ifname": SHAPER_SERVER_IF, "net_ns_fd": ns["shaper"]}
            )
        _configure(ns["client"], CLIENT_IF, a(2), 30, default_via=a(1))
        _configure(ns["shaper"], SHAPER_CLIENT_IF, a(1), 30)
        _configure(ns["shaper"], SHAPER_SERVER_IF, a(6), 30, default_via=a(5))
        _configure(None, cfg.host_if, a(5), 30, routes=((f"{a(0)}/30", a(6)),))
        netns.set_sysctl(ns["shaper"], "net.ipv4.ip_forward", "1")
        IP_FORWARD.write_text("1\n")
        rules = f"""table ip {cfg.nat_table} {{
  chain forward {{ type filter hook forward priority 0; policy accept;
    iifname "{cfg.host_if}" oifname "{cfg.interface}" accept
    iifname "{cfg.interface}" oifname "{cfg.host_if}" ct state established,related accept
    iifname "{cfg.host_if}" drop
    oifname "{cfg.host_if}" drop
  }}
  chain postrouting {{ type nat hook postrouting priority 100;
    ip saddr {cfg.subnet} oifname "{cfg.interface}" masquerade
  }}
}}
"""
        done = subprocess.run(["nft", "-f", "-"], input=rules, capture_output=True, text=True)
        if done.returncode != 0:
            raise HarnessError(f"nft refused the NAT table: {done.stderr.strip()}")

    def down(self) -> list[str]:
        """Remove everything `up` made, whatever state it is in; restore ip_forward."""
        require_root("internet down")
        cfg, removed = self.config, []
        removed += [f"stray process {p}" for p in kill_namespace_processes(list(cfg.namespaces.values()))]
        for name in cfg.namespaces.values():
            if netns.exists(name):
                netns.remove(name)
                removed.append(f"namespace {name}")
        if subprocess.run(["nft", "delete", "table", "ip", cfg.nat_table], capture_output=True).returncode == 0:
            removed.append(f"nft table {cfg.nat_table}")
        if netns.delete_host_link(cfg.host_if):  # normally it dies with the shaper namespace
            removed.append(f"interface {cfg.host_if}")
        try:
            previous = json.loads(self.state_file.read_text()).get("ip_forward")
        except (OSError, ValueError):
            previous = None
        if previous in ("0", "1") and IP_FORWARD.read_text().strip() != previous:
            IP_FORWARD.write_text(previous + "\n")
            removed.append(f"ip_forward back to {previous}")
        if self.run_dir.exists():
            shutil.rmtree(self.run_dir, ignore_errors=True)
            removed.append(f"directory {self.run_dir}")
        return removed


def _configure(
    ns: str | None,
    ifname: str,
    address: str,
    prefixlen: int,
    default_via: str | None = None,
    routes: tuple[tuple[str, str], ...] = (),
) -> None:
    with IPRoute(netns=ns) if ns else IPRoute() as ipr:
        index = ipr.link_lookup(ifname=ifname)[0]
        ipr.addr("add", index=index, address=address, prefixlen=prefixlen)
        ipr.link("set", index=index, state="up")
        if default_via:
            ipr.route("add", dst="0.0.0.0/0", gateway=default_via)
        for dst, gateway in routes:
            ipr.route("add", dst=dst, gateway=gateway)
