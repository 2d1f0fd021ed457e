"""`lab up | down | status`: the lab as one object with a state file.

The state file (/run/dnsstudy/<prefix>/state.json) lists every daemon with
its pid and start time. `down` does not trust it alone: it also kills any
process left in the lab's namespaces and removes everything derived from the
prefix, so it cleans up after crashes and half-finished `up`s.
"""

from __future__ import annotations

import grp
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives.asymmetric import ec

from harness import netns
from harness.accounts import helper, helper_dir
from harness.daemons import Daemon, kill_namespace_processes, stop_all
from harness.errors import HarnessError, require_program, require_root
from harness.lab import faults, topology, upstream
from harness.lab.ca import CertificateAuthority, new_key, write_key
from harness.lab.checks import CheckResult
from harness.lab.config import LabConfig, RecursiveResolver
from harness.lab.nginx import nginx_config
from harness.lab.pageshape import load_page_shape
from harness.lab.unbound import (
    DOH3_PORT,
    DOQ_PORT,
    authoritative_config,
    nodelay_env,
    openssl_conf,
    resolver_config,
)
from harness.lab.web import SyntheticWeb, build_web
from harness.lab.webcache import ensure_web
from harness.lab.zones import (
    LAB_ZONE,
    ZoneData,
    build_zones,
    infrastructure_names,
    resolver_tls_name,
    root_zone_file,
    unbound_local_data,
)
from harness.paths import PROJECT_ROOT, RUN_ROOT, project_path
from harness.place import CLIENT_IF, SHAPER_CLIENT_IF, SHAPER_SERVER_IF, ClientSide, Place, ProbePeer, Resolver
from harness.protocols import DO53, DOH, DOH3, DOQ, DOT
from harness.sitelist import load_site_list

PROGRAMS = {"ip": "iproute2", "unbound": "unbound", "nginx": "nginx", "iptables": "iptables"}
DNSPROXY = PROJECT_ROOT / "build" / "bin" / "dnsproxy"
OUTSIDE_NAME = "this-name-is-not-in-the-lab.net"

_Endpoint = tuple[str, int]  # (address, TCP port) that must accept before the lab is up
_Daemons = tuple[list[Daemon], list[_Endpoint]]  # daemons and the endpoints that show they are up


@dataclass
class _Tls:
    """What `_up` makes for TLS: the CA, and the keys and certificates the daemons load."""

    ca: CertificateAuthority
    resolver_key: ec.EllipticCurvePrivateKey
    resolver_key_file: Path
    web_key_file: Path
    zone_certs: dict[str, Path]
    badcert: tuple[str, Path, Path]  # (address, certificate, key), as nginx_config takes it


@dataclass
class LabStatus:
    """What `lab status` reports."""

    prefix: str
    up: bool
    namespaces: dict[str, bool]
    daemons: list[dict] = field(default_factory=list)
    resolvers: list[dict] = field(default_factory=list)
    run_dir: str = ""
    ca: str = ""

    @property
    def dead(self) -> list[str]:
        return [d["name"] for d in self.daemons if not d["alive"]]

    @property
    def healthy(self) -> bool:
        return self.up and all(self.namespaces.values()) and not self.dead


class Lab(Place):
    """One lab, named by its prefix."""

    kind = "lab"

    def __init__(self, config: LabConfig):
        self.config = config
        self.name = config.prefix
        self.run_dir = RUN_ROOT / config.prefix
        self.state_file = self.run_dir / "state.json"

    # -- the place ------------------------------------------------------

    @property
    def namespaces(self) -> dict[str, str]:
        return self.config.namespaces

    @property
    def up_command(self) -> str:
        return "dnsstudy lab up"

    def bring_up(self) -> bool:
        """`lab up` with the lab's profile (a no-op if it is up)."""
        return self.up()

    def resolver_names(self) -> list[str]:
        return [r.name for r in self.config.settings.resolvers]

    def link_ends(self) -> list[tuple[str, str]]:
        """Both ends of both veths: client, shaper (twice), server."""
        ns = self.namespaces
        return [
            (ns["client"], CLIENT_IF),
            (ns["shaper"], SHAPER_CLIENT_IF),
            (ns["shaper"], SHAPER_SERVER_IF),
            (ns["server"], topology.SERVER_IF),
        ]

    def probe_peer(self) -> ProbePeer:
        """The echo and the rate receiver run in the server namespace on the authoritative's address."""
        return ProbePeer(self.namespaces["client"], self.namespaces["server"], self.config.addresses.auth)

    def describe(self) -> dict[str, str]:
        return {"place": f"{self.kind}:{self.name}", "lab_profile": str(self.config.source)}

    def served_sites(self) -> set[str]:
        """The sites of the lab profile's list, all of which the synthetic web serves."""
        settings = self.config.settings.web
        return {site.domain for site in load_site_list(project_path(settings.sites), settings.top)}

    def apply_faults(self, pairs: list[tuple[str, str]]) -> None:
        """Apply (fault name, resolver) pairs (see harness/lab/faults.py)."""
        for name, resolver in pairs:
            faults.apply(self, faults.parse_fault(name, resolver))

    def clear_faults(self) -> None:
        faults.clear(self)

    def web(self) -> SyntheticWeb:
        """The synthetic web this lab's profile describes (built in memory, not cached)."""
        settings = self.config.settings.web
        sites = load_site_list(project_path(settings.sites), settings.top)
        return build_web(sites, load_page_shape(settings.shape), settings.seed)

    # -- state ----------------------------------------------------------

    def _load_daemons(self) -> list[Daemon]:
        try:
            state = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return []
        return [Daemon(**d) for d in state.get("daemons", [])]

    def _save(self, daemons: list[Daemon]) -> None:
        state = {
            "prefix": self.config.prefix,
            "subnet": self.config.settings.subnet,
            "profile": str(self.config.source),
            "daemons": [d.to_dict() for d in daemons],
        }
        tmp = self.state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(state, indent=1))
        tmp.replace(self.state_file)

    @property
    def ca_path(self) -> Path:
        return self.run_dir / "ca.pem"

    def status(self) -> LabStatus:
        """Namespaces, daemons (alive or dead) and resolver endpoints of this lab."""
        namespaces = {role: netns.exists(name) for role, name in self.config.namespaces.items()}
        daemons = self._load_daemons()
        plan = self.config.addresses
        return LabStatus(
            prefix=self.config.prefix,
            up=self.state_file.exists(),
            namespaces=namespaces,
            daemons=[
                {
                    "name": d.name,
                    "namespace": d.namespace,
                    "pid": d.pid,
                    "alive": d.alive(),
                    "addresses": d.addresses,
                    "log": d.log,
                }
                for d in daemons
            ],
            resolvers=[
                {
                    "name": r.name,
                    "kind": r.kind,
                    "address": plan.resolver(i),
                    "tls_name": resolver_tls_name(r.name),
                    # The endpoint of every protocol a lab resolver serves (unbound, and dnsproxy for QUIC).
                    DO53.name: f"{plan.resolver(i)}:{DO53.port}",
                    DOT.name: f"{plan.resolver(i)}:{DOT.port}",
                    DOH.name: f"https://{resolver_tls_name(r.name)}/dns-query",
                    DOQ.name: f"{plan.resolver(i)}:{DOQ_PORT}",
                    DOH3.name: f"https://{resolver_tls_name(r.name)}:{DOH3_PORT}/dns-query",
                    "description": r.description,
                }
                for i, r in enumerate(self.config.settings.resolvers)
            ],
            run_dir=str(self.run_dir),
            ca=str(self.ca_path),
        )

    def client_side(self) -> ClientSide:
        """The client namespace as a place where DNS arms and the browser run."""
        return ClientSide(
            namespace=self.config.namespaces["client"],
            run_dir=self.run_dir,
            ca_file=self.ca_path,
            dead_resolver=self.config.addresses.refused,
            system_resolver=self.config.addresses.resolver(0),
        )

    def resolver(self, name: str) -> Resolver:
        """A lab resolver by name, with its statistics for arm proofs."""
        for i, settings in enumerate(self.config.settings.resolvers):
            if settings.name == name:
                address, tls_name = self.config.addresses.resolver(i), resolver_tls_name(name)
                return Resolver(
                    name=name,
                    address=address,
                    tls_name=tls_name,
                    doh_uri=f"https://{tls_name}/dns-query",
                    control_config=self.run_dir / f"resolver-{name}.conf",
                    doq_port=DOQ_PORT,
                    doh3_uri=f"https://{tls_name}:{DOH3_PORT}/dns-query",
                )
        names = ", ".join(r.name for r in self.config.settings.resolvers)
        raise HarnessError(f"lab '{self.config.prefix}' has no resolver '{name}' (it has: {names})")

    # -- up -------------------------------------------------------------

    def up(self, wait: float = 10.0) -> bool:
        """Bring the lab up. Returns False if it was already up (a no-op)."""
        require_root("lab up")
        for program, package in PROGRAMS.items():
            require_program(program, package)
        if not DNSPROXY.exists():
            raise HarnessError(f"{DNSPROXY} is missing: run 'bash scripts/setup.sh' (it builds the DoQ/DoH3 front)")
        if self.state_file.exists():
            status = self.status()
            if status.healthy:
                return False
            raise HarnessError(
                f"lab '{self.config.prefix}' is up but broken "
                f"(dead: {', '.join(status.dead) or 'namespaces missing'}): "
                "run 'dnsstudy lab down' first"
            )
        topology.check_collisions(self.config)
        if any(netns.exists(n) for n in self.config.namespaces.values()):
            raise HarnessError(
                f"namespaces of lab '{self.config.prefix}' exist without a state file: run 'dnsstudy lab down' first"
            )
        old_umask = os.umask(0o022)  # daemons that drop privileges must read their files
        try:
            self._up(wait)
        except BaseException:
            self.down()
            raise
        finally:
            os.umask(old_umask)
        return True

    def _up(self, wait: float) -> None:
        cfg = self.config
        self._prepare_run_dir()
        web_root, host_domain = ensure_web(cfg)
        zones = build_zones(cfg, host_domain)
        tls = self._make_certificates(zones)
        self._write_zone_and_web_configs(zones, web_root, tls)
        topology.build(cfg)
        topology.set_client_resolver(cfg, cfg.addresses.resolver(0))
        # Start order: authoritative and delayers, resolvers (each with its QUIC front), web, tarpit.
        parts = [
            self._authoritative_daemons(),
            self._resolver_daemons(tls),
            self._web_daemons(),
            self._tarpit_daemons(),
        ]
        daemons = [d for part_daemons, _ in parts for d in part_daemons]
        endpoints = [e for _, part_endpoints in parts for e in part_endpoints]
        self._start_and_wait(daemons, endpoints, wait)

    def _prepare_run_dir(self) -> None:
        """Make the run directories and an empty state file."""
        run = self.run_dir
        for d in (run, run / "logs", run / "certs", run / "nginx-tmp"):
            d.mkdir(parents=True, exist_ok=True)
        self._save([])  # from here on, `down` knows this lab exists

    def _make_certificates(self, zones: ZoneData) -> _Tls:
        """The lab CA (written to ca_path), the resolver and web keys, a certificate per zone, badcert."""
        certs = self.run_dir / "certs"
        # A fresh CA for every lab; a second CA nobody trusts for badcert.
        ca = CertificateAuthority.create(f"dnsstudy lab CA ({self.config.prefix})")
        self.ca_path.write_bytes(ca.cert_pem)
        unbound_gid = grp.getgrnam("unbound").gr_gid
        resolver_key = new_key()
        resolver_key_file = write_key(resolver_key, certs / "resolver.key")
        # unbound drops privileges to its group and must still read the key.
        os.chown(resolver_key_file, 0, unbound_gid)
        resolver_key_file.chmod(0o640)
        web_key = new_key()
        web_key_file = write_key(web_key, certs / "web.key")
        zone_certs: dict[str, Path] = {}
        for zone in zones.records:
            zone_certs[zone] = certs / f"{zone}.pem"
            zone_certs[zone].write_bytes(ca.issue([zone, f"*.{zone}"], [], web_key))
        return _Tls(ca, resolver_key, resolver_key_file, web_key_file, zone_certs, self._make_badcert())

    def _make_badcert(self) -> tuple[str, Path, Path]:
        """badcert's (address, certificate, key), signed by a CA no client trusts."""
        address = self.config.addresses.badcert
        rogue = CertificateAuthority.create("untrusted CA")
        key = new_key()
        key_file = write_key(key, self.run_dir / "certs" / "badcert.key")
        cert_file = self.run_dir / "certs" / "badcert.pem"
        cert_file.write_bytes(rogue.issue([f"badcert.{LAB_ZONE}"], [address], key))
        return address, cert_file, key_file

    def _write_zone_and_web_configs(self, zones: ZoneData, web_root: Path, tls: _Tls) -> None:
        """Resolver local data, the authoritative's root zone and nginx.conf."""
        run = self.run_dir
        (run / "local-data.conf").write_text(unbound_local_data(zones))
        (run / "root.zone").write_text(root_zone_file(zones, self.config.addresses.auth))
        (run / "nginx.conf").write_text(
            nginx_config(zones, run, web_root, tls.zone_certs, tls.web_key_file, tls.badcert)
        )

    def _daemon(self, name: str, argv: list[str], addresses: list[str], env: dict[str, str] | None = None) -> Daemon:
        """A daemon in the server namespace, logging to logs/<name>.log."""
        return Daemon(
            name,
            self.config.namespaces["server"],
            argv,
            str(self.run_dir / "logs" / f"{name}.log"),
            addresses,
            env=env or {},
        )

    def _authoritative_daemons(self) -> _Daemons:
        """The authoritative and one delayer per recursive resolver; none if every resolver is local."""
        cfg, run, auth = self.config, self.run_dir, self.config.addresses.auth
        recursive = [(i, r) for i, r in enumerate(cfg.settings.resolvers) if isinstance(r, RecursiveResolver)]
        if not recursive:
            return [], []
        (run / "auth.conf").write_text(authoritative_config(cfg, run, run / "root.zone"))
        daemons = [self._daemon("auth", ["unbound", "-d", "-c", str(run / "auth.conf")], [f"{auth}:53"])]
        for i, r in recursive:
            upstream.install_rules(cfg, i)
            argv = upstream.delayer_argv(i, r, str(helper_dir(run) / f"delayer-{r.name}.json"))
            daemons.append(self._daemon(f"delayer-{r.name}", argv, []))
        return daemons, [(auth, 53)]

    def _resolver_daemons(self, tls: _Tls) -> _Daemons:
        """Per resolver: its certificate and configuration, its unbound and its QUIC front.

        With `tls_resumption` unbound issues TLS 1.3 session tickets and runs with the DoT nodelay shim.
        """
        cfg, run = self.config, self.run_dir
        resumption = cfg.settings.tls_resumption
        (run / "openssl.cnf").write_text(openssl_conf(resumption))
        env = {"OPENSSL_CONF": str(run / "openssl.cnf")} | (nodelay_env() if resumption else {})
        daemons: list[Daemon] = []
        endpoints: list[_Endpoint] = []
        for i, r in enumerate(cfg.settings.resolvers):
            addr = cfg.addresses.resolver(i)
            cert = run / "certs" / f"resolver-{r.name}.pem"
            cert.write_bytes(tls.ca.issue([resolver_tls_name(r.name)], [addr], tls.resolver_key))
            faults.write_certificates(run / "certs", tls.ca, tls.resolver_key, r.name, addr)
            conf = run / f"resolver-{r.name}.conf"
            conf.write_text(resolver_config(cfg, i, r, run, cert, tls.resolver_key_file, run / "local-data.conf"))
            daemons.append(
                self._daemon(
                    f"resolver-{r.name}",
                    ["unbound", "-d", "-c", str(conf)],
                    [f"{addr}:53", f"{addr}:853", f"{addr}:443"],
                    env=env,
                )
            )
            daemons.append(self._quic_front(r.name, addr, cert, tls.resolver_key_file))
            endpoints += [(addr, 53), (addr, 853), (addr, 443), (addr, DOH3_PORT)]
        return daemons, endpoints

    def _quic_front(self, name: str, addr: str, cert: Path, key: Path) -> Daemon:
        """DoQ and DoH3 in front of a resolver's unbound, over loopback-fast Do53, run unprivileged."""
        account = helper()
        own_key = self.run_dir / "certs" / f"quic-{name}.key"  # its own copy: the resolver key is unbound's group's
        shutil.copyfile(key, own_key)
        os.chown(own_key, account.uid, account.gid)
        own_key.chmod(0o400)
        key = own_key
        # `--port 0` still opens plain DNS on ephemeral ports; nothing uses them.
        argv = [
            account.program(DNSPROXY),
            "--listen",
            addr,
            "--port",
            "0",
            "--quic-port",
            str(DOQ_PORT),
            "--https-port",
            str(DOH3_PORT),
            "--http3",
            "--tls-crt",
            str(cert),
            "--tls-key",
            str(key),
            "--upstream",
            f"{addr}:53",
            "--timeout",
            "10s",
        ]
        return self._daemon(f"quic-{name}", account.run_as(argv), [f"{addr}:{DOQ_PORT}/udp", f"{addr}:{DOH3_PORT}"])

    def _web_daemons(self) -> _Daemons:
        """One nginx for every web address and badcert."""
        plan, run = self.config.addresses, self.run_dir
        web_addrs = plan.web(self.config.settings.web_addresses)
        nginx = self._daemon(
            "nginx",
            ["nginx", "-p", str(run), "-c", str(run / "nginx.conf"), "-g", "daemon off;"],
            [f"{a}:443" for a in web_addrs + [plan.badcert]],
        )
        # One nginx listens on all web addresses: waiting for the first stands for the rest.
        return [nginx], [(a, 443) for a in web_addrs[:1] + [plan.badcert]]

    def _tarpit_daemons(self) -> _Daemons:
        """The tarpit on the hang address (it accepts and never answers)."""
        hang = self.config.addresses.hang
        tarpit = self._daemon(
            "tarpit",
            [sys.executable, "-I", str(Path(__file__).resolve().with_name("tarpit.py")), hang, helper().name],
            [f"{hang}:{p}" for p in ("80", "443", "853", "53/udp")],
        )
        return [tarpit], [(hang, 443)]

    def _start_and_wait(self, daemons: list[Daemon], endpoints: list[_Endpoint], wait: float) -> None:
        """Start the daemons in order, record them, then wait up to `wait` s for every endpoint to accept."""
        for d in daemons:
            d.start()
        self._save(daemons)
        self._wait_for(daemons, endpoints, wait)

    def restart(self, names: set[str], wait: float = 10.0) -> None:
        """Restart the named daemons (a lab fault changed their certificate) and wait for their TCP ports."""
        daemons = self._load_daemons()
        chosen = [d for d in daemons if d.name in names]
        stop_all(chosen)
        for d in chosen:
            d.start()
        self._save(daemons)
        tcp = [a.rpartition(":") for d in chosen for a in d.addresses if not a.endswith("/udp")]
        self._wait_for(chosen, [(host, int(port)) for host, _, port in tcp], wait)

    def _wait_for(self, daemons: list[Daemon], endpoints: list[_Endpoint], wait: float) -> None:
        """Wait up to `wait` s for every endpoint to accept, but give up at once if a daemon died."""
        deadline = time.monotonic() + wait
        missing = endpoints
        while True:
            missing = netns.wait_tcp(self.config.namespaces["server"], missing, timeout=0.5)
            dead = [d.name for d in daemons if not d.alive()]
            if dead or not missing or time.monotonic() >= deadline:
                break
        if dead or missing:
            logs = "; ".join(f"{d.name}: {_tail(d.log)}" for d in daemons if d.name in dead)
            raise HarnessError(f"lab did not come up: dead {dead or 'none'}, not listening {missing or 'none'}. {logs}")

    # -- checks ---------------------------------------------------------

    def check_spec(self, web_sites: int = 3) -> dict:
        """What `checks` should verify from the client namespace."""
        status = self.status()
        names = infrastructure_names(self.config)
        manifest = json.loads((self._web_root() / "manifest.json").read_text())
        sites = [p["url"] for p in manifest["pages"][:web_sites]]
        return {
            "ca": str(self.ca_path),
            "probe_name": f"www.{LAB_ZONE}",
            "probe_address": names[f"www.{LAB_ZONE}"],
            "outside_name": OUTSIDE_NAME,
            "resolvers": status.resolvers,
            "web_urls": [f"https://www.{LAB_ZONE}/"] + sites,
            "wait": 5,
        }

    def web_hostnames(self) -> list[str]:
        """Every hostname the lab's synthetic web uses, sorted (a domain list for resolver benchmarks)."""
        manifest = json.loads((self._web_root() / "manifest.json").read_text())
        return sorted({h for page in manifest["pages"] for h in page["hostnames"] + page["late_hostnames"]})

    def _web_root(self) -> Path:
        return ensure_web(self.config)[0]

    def run_checks(self) -> list[CheckResult]:
        """Query every resolver over every transport and fetch lab pages, from the client namespace."""
        spec_path = self.run_dir / "checks.json"
        spec_path.write_text(json.dumps(self.check_spec()))
        env = dict(os.environ, PYTHONPATH=str(PROJECT_ROOT))
        proc = subprocess.run(
            netns.command(
                self.config.namespaces["client"],
                [sys.executable, "-I", str(Path(__file__).resolve().with_name("checks.py")), str(spec_path)],
            ),
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )
        if proc.returncode != 0:
            raise HarnessError(
                f"lab checks crashed: {proc.stderr.strip().splitlines()[-1] if proc.stderr else proc.returncode}"
            )
        return [CheckResult(**r) for r in json.loads(proc.stdout)]

    # -- down -----------------------------------------------------------

    def down(self) -> list[str]:
        """Remove everything this lab made, whatever state it is in. Returns what was removed."""
        require_root("lab down")
        removed = []
        daemons = self._load_daemons()
        stop_all(daemons)
        removed += [f"process {d.name}" for d in daemons]
        stray = kill_namespace_processes(list(self.config.namespaces.values()))
        removed += [f"stray process {pid}" for pid in stray]
        for name in self.config.namespaces.values():
            if netns.exists(name) or (netns.ETC_NETNS / name).exists():
                removed.append(f"namespace {name}")
        topology.destroy(self.config)
        if self.run_dir.exists():
            shutil.rmtree(self.run_dir, ignore_errors=True)
            removed.append(f"directory {self.run_dir}")
        return removed


def _tail(path: str, lines: int = 2) -> str:
    try:
        return " | ".join(Path(path).read_text(errors="replace").strip().splitlines()[-lines:])
    except OSError:
        return "(no log)"
