"""`InternetSide`: visits and timers on the real Internet, through namespaces the harness creates.

    client  --c0 ==== sc--  shaper  --ss ==== <prefix>-up--  host  --> chosen interface
    (browser, stubs,        (forwards; shaping               (forwards; NAT out of
     timer)                  attaches here)                   the chosen interface)

The browser never runs in the host's namespace: the client namespace gives
it its own resolv.conf and packet counters (the arm proof), and the shaper
namespace gives the same link emulation as the lab, on a link that ends at
the host. What the client may reach through the host is the side's
`Firewall` (firewall.py); the host's ip_forward is shared by every live side
(forwarding.py).
"""

from __future__ import annotations

import ipaddress
import json
import shutil
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from pyroute2 import IPRoute

from harness import netns
from harness.daemons import kill_namespace_processes
from harness.errors import HarnessError, require_root
from harness.internet import nft, topology
from harness.internet.config import InternetConfig, internet_config
from harness.internet.firewall import Allowance, Firewall
from harness.internet.forwarding import acquire_forwarding, release_forwarding
from harness.paths import RUN_ROOT
from harness.place import CLIENT_IF, SHAPER_CLIENT_IF, SHAPER_SERVER_IF, ClientSide, Place, Resolver
from harness.resolvers import load_resolver

SYSTEM_CA = Path("/etc/ssl/certs/ca-certificates.crt")  # Debian's bundle: what Stubby and the timer trust


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

    def bring_up(self) -> bool:
        """Refused: which interface and resolvers a side uses is the user's choice, made with `internet up`."""
        raise HarnessError("worker --up brings up a lab; an Internet side needs 'dnsstudy internet up' first")

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
            quic_ca_hosts=(),  # the real web's certificates are real: nothing to allow over QUIC
            web_http3=True,
        )

    def firewall(self) -> Firewall | None:
        """The firewall `up` installed, as it recorded it (None when the side is not up)."""
        try:
            saved = json.loads(self.state_file.read_text())["firewall"]
        except (OSError, ValueError, KeyError):
            return None
        cfg = self.config
        return Firewall(
            cfg.firewall_table,
            cfg.host_if,
            cfg.interface,
            cfg.subnet,
            tuple(ipaddress.IPv4Network(n) for n in saved["refused"]),
            tuple(Allowance.from_json(a) for a in saved["allowed"]),
        )

    def resolver(self, name: str) -> Resolver:
        """A resolver profile (profiles/resolvers/NAME.toml), or `default`: the host's own plain-DNS resolver.

        One the firewall refuses (a private address, say) is an error naming `--allow`, before any visit.
        """
        found = load_resolver(name)
        firewall = self.firewall()
        if firewall is not None:
            firewall.require_reachable(self.name, name, found)
        return found

    def resolver_names(self) -> None:
        return None  # any resolver profile: a study checks its names when it loads

    def link_ends(self) -> list[tuple[str, str]]:
        """The link ends at the host, which the harness leaves alone: only the namespaces' ends."""
        ns = self.namespaces
        return [(ns["client"], CLIENT_IF), (ns["shaper"], SHAPER_CLIENT_IF), (ns["shaper"], SHAPER_SERVER_IF)]

    def probe_peer(self) -> None:
        return None  # no echo or rate peer on the Internet: the timer's RTTs are the check there

    def describe(self) -> dict[str, str]:
        return {"place": f"{self.kind}:{self.name}", "interface": self.config.interface}

    def up(self, allow: Sequence[str] = ()) -> bool:
        """Create the firewall, namespaces, links, routes and NAT. False if already up (a no-op).

        ``allow``: addresses or resolver names the client may reach although the firewall refuses
        their range (`--allow`); the host's own resolver is always allowed, on port 53 only.
        """
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
        firewall = Firewall.build(cfg.firewall_table, cfg.host_if, cfg.interface, cfg.subnet, allow)
        (self.run_dir / "logs").mkdir(parents=True, exist_ok=True)  # shaping daemons log here
        state = {"interface": cfg.interface, "subnet": str(cfg.subnet), "firewall": firewall.to_json()}
        self.state_file.write_text(json.dumps(state))
        try:
            # The table first: its rules name interfaces, so they hold from the moment the veth exists.
            nft.load(firewall.script(), "the Internet side's table")
            topology.build(cfg)
            acquire_forwarding(cfg.prefix, cfg.host_if)
        except BaseException:
            self.down()
            raise
        return True

    def down(self) -> list[str]:
        """Remove everything `up` made, whatever state it is in; the last side down restores ip_forward.

        Works from the name alone (after `lab down` of the same prefix removed the side's directory).
        A lab brought up under the name since keeps its namespaces and directory.
        """
        require_root("internet down")
        cfg, removed = self.config, []
        lab_here = (self.run_dir / "state.json").exists()
        if not lab_here:
            removed += [f"stray process {p}" for p in kill_namespace_processes(list(cfg.namespaces.values()))]
            for name in cfg.namespaces.values():
                if netns.exists(name):
                    netns.remove(name)
                    removed.append(f"namespace {name}")
        if netns.delete_host_link(cfg.host_if):  # normally it dies with the shaper namespace; a lab has none
            removed.append(f"interface {cfg.host_if}")
        removed += release_forwarding(cfg.prefix)
        for family in ("inet", "ip"):  # "ip": the NAT-only table of earlier versions
            if nft.delete_table(family, cfg.firewall_table):
                removed.append(f"nft table {family} {cfg.firewall_table}")
        if not lab_here and self.run_dir.exists():
            shutil.rmtree(self.run_dir, ignore_errors=True)
            removed.append(f"directory {self.run_dir}")
        return removed
