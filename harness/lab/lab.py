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

from harness import netns
from harness.arms.base import ClientSide, Resolver
from harness.errors import HarnessError, require_program, require_root
from harness.lab import topology, upstream
from harness.lab.ca import CertificateAuthority, new_key, write_key
from harness.lab.checks import CheckResult
from harness.lab.config import LabConfig, RecursiveResolver
from harness.lab.daemons import Daemon, kill_namespace_processes, stop_all
from harness.lab.nginx import nginx_config
from harness.lab.unbound import (DOH3_PORT, DOQ_PORT, OPENSSL_CONF, authoritative_config,
                                 resolver_config)
from harness.lab.webcache import ensure_web
from harness.lab.zones import LAB_ZONE, build_zones, infrastructure_names, resolver_tls_name, root_zone_file, unbound_local_data
from harness.paths import PROJECT_ROOT, RUN_ROOT

PROGRAMS = {"ip": "iproute2", "unbound": "unbound", "nginx": "nginx", "iptables": "iptables"}
DNSPROXY = PROJECT_ROOT / "build" / "bin" / "dnsproxy"
OUTSIDE_NAME = "this-name-is-not-in-the-lab.net"


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


class Lab:
    """One lab, named by its prefix."""

    def __init__(self, config: LabConfig):
        self.config = config
        self.run_dir = RUN_ROOT / config.prefix
        self.state_file = self.run_dir / "state.json"

    # -- state ----------------------------------------------------------

    def _load_daemons(self) -> list[Daemon]:
        try:
            state = json.loads(self.state_file.read_text())
        except (OSError, ValueError):
            return []
        return [Daemon(**d) for d in state.get("daemons", [])]

    def _save(self, daemons: list[Daemon]) -> None:
        state = {"prefix": self.config.prefix, "subnet": self.config.settings.subnet,
                 "profile": str(self.config.source), "daemons": [d.to_dict() for d in daemons]}
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
            daemons=[{"name": d.name, "namespace": d.namespace, "pid": d.pid, "alive": d.alive(),
                      "addresses": d.addresses, "log": d.log} for d in daemons],
            resolvers=[{"name": r.name, "kind": r.kind, "address": plan.resolver(i),
                        "tls_name": resolver_tls_name(r.name), "do53": f"{plan.resolver(i)}:53",
                        "dot": f"{plan.resolver(i)}:853", "doh": f"https://{resolver_tls_name(r.name)}/dns-query",
                        "doq": f"{plan.resolver(i)}:{DOQ_PORT}",
                        "doh3": f"https://{resolver_tls_name(r.name)}:{DOH3_PORT}/dns-query",
                        "description": r.description}
                       for i, r in enumerate(self.config.settings.resolvers)],
            run_dir=str(self.run_dir),
            ca=str(self.ca_path),
        )

    def client_side(self) -> ClientSide:
        """The client namespace as a place where DNS arms and the browser run."""
        return ClientSide(namespace=self.config.namespaces["client"], run_dir=self.run_dir, ca_file=self.ca_path,
                          dead_resolver=self.config.addresses.refused,
                          system_resolver=self.config.addresses.resolver(0))

    def resolver(self, name: str) -> Resolver:
        """A lab resolver by name, with its statistics for arm proofs."""
        for i, settings in enumerate(self.config.settings.resolvers):
            if settings.name == name:
                address, tls_name = self.config.addresses.resolver(i), resolver_tls_name(name)
                return Resolver(name=name, address=address, tls_name=tls_name,
                                doh_uri=f"https://{tls_name}/dns-query",
                                control_config=self.run_dir / f"resolver-{name}.conf",
                                doq_port=DOQ_PORT, doh3_uri=f"https://{tls_name}:{DOH3_PORT}/dns-query")
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
                f"lab '{self.config.prefix}' is up but broken (dead: {', '.join(status.dead) or 'namespaces missing'}): "
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
        cfg, plan, run = self.config, self.config.addresses, self.run_dir
        for d in (run, run / "logs", run / "certs", run / "nginx-tmp"):
            d.mkdir(parents=True, exist_ok=True)
        self._save([])  # from here on, `down` knows this lab exists

        web_root, host_domain = ensure_web(cfg)
        zones = build_zones(cfg, host_domain)

        # A fresh CA for every lab; a second CA nobody trusts for badcert.
        ca = CertificateAuthority.create(f"dnsstudy lab CA ({cfg.prefix})")
        self.ca_path.write_bytes(ca.cert_pem)
        unbound_gid = grp.getgrnam("unbound").gr_gid
        resolver_key_obj = new_key()
        resolver_key = write_key(resolver_key_obj, run / "certs" / "resolver.key")
        os.chown(resolver_key, 0, unbound_gid)
        resolver_key.chmod(0o640)
        web_key_obj = new_key()
        web_key = write_key(web_key_obj, run / "certs" / "web.key")
        certs: dict[str, Path] = {}
        for zone, names in zones.records.items():
            path = run / "certs" / f"{zone}.pem"
            path.write_bytes(ca.issue([zone, f"*.{zone}"], [], web_key_obj))
            certs[zone] = path
        rogue = CertificateAuthority.create("untrusted CA")
        bad_key_obj = new_key()
        bad_key = write_key(bad_key_obj, run / "certs" / "badcert.key")
        bad_cert = run / "certs" / "badcert.pem"
        bad_cert.write_bytes(rogue.issue([f"badcert.{LAB_ZONE}"], [plan.badcert], bad_key_obj))

        (run / "local-data.conf").write_text(unbound_local_data(zones))
        (run / "root.zone").write_text(root_zone_file(zones, plan.auth))
        (run / "nginx.conf").write_text(
            nginx_config(zones, run, web_root, certs, web_key, (plan.badcert, bad_cert, bad_key))
        )

        topology.build(cfg)
        topology.set_client_resolver(cfg, plan.resolver(0))

        server = cfg.namespaces["server"]
        daemons: list[Daemon] = []
        endpoints: list[tuple[str, int]] = []
        recursive = [(i, r) for i, r in enumerate(cfg.settings.resolvers) if isinstance(r, RecursiveResolver)]
        if recursive:
            (run / "auth.conf").write_text(authoritative_config(cfg, run, run / "root.zone"))
            daemons.append(Daemon("auth", server, ["unbound", "-d", "-c", str(run / "auth.conf")],
                                  str(run / "logs" / "auth.log"), [f"{plan.auth}:53"]))
            endpoints.append((plan.auth, 53))
        for i, r in recursive:
            upstream.install_rules(cfg, i)
            daemons.append(Daemon(f"delayer-{r.name}", server,
                                  upstream.delayer_argv(i, r, str(run / f"delayer-{r.name}.json")),
                                  str(run / "logs" / f"delayer-{r.name}.log"), []))
        (run / "openssl.cnf").write_text(OPENSSL_CONF)
        for i, r in enumerate(cfg.settings.resolvers):
            tls = resolver_tls_name(r.name)
            cert = run / "certs" / f"resolver-{r.name}.pem"
            cert.write_bytes(ca.issue([tls], [plan.resolver(i)], resolver_key_obj))
            conf = run / f"resolver-{r.name}.conf"
            conf.write_text(resolver_config(cfg, i, r, run, cert, resolver_key, run / "local-data.conf"))
            addr = plan.resolver(i)
            daemons.append(Daemon(f"resolver-{r.name}", server, ["unbound", "-d", "-c", str(conf)],
                                  str(run / "logs" / f"resolver-{r.name}.log"),
                                  [f"{addr}:53", f"{addr}:853", f"{addr}:443"],
                                  env={"OPENSSL_CONF": str(run / "openssl.cnf")}))
            endpoints += [(addr, 53), (addr, 853), (addr, 443)]
            # DoQ and DoH3 in front of the same unbound, over loopback-fast Do53.
            # `--port 0` still opens plain DNS on ephemeral ports; nothing uses them.
            daemons.append(Daemon(f"quic-{r.name}", server,
                                  [str(DNSPROXY), "--listen", addr, "--port", "0", "--quic-port", str(DOQ_PORT),
                                   "--https-port", str(DOH3_PORT), "--http3", "--tls-crt", str(cert),
                                   "--tls-key", str(resolver_key), "--upstream", f"{addr}:53", "--timeout", "10s"],
                                  str(run / "logs" / f"quic-{r.name}.log"),
                                  [f"{addr}:{DOQ_PORT}/udp", f"{addr}:{DOH3_PORT}"]))
            endpoints.append((addr, DOH3_PORT))
        web_addrs = plan.web(cfg.settings.web_addresses)
        daemons.append(Daemon("nginx", server,
                              ["nginx", "-p", str(run), "-c", str(run / "nginx.conf"), "-g", "daemon off;"],
                              str(run / "logs" / "nginx.log"), [f"{a}:443" for a in web_addrs + [plan.badcert]]))
        endpoints += [(a, 443) for a in web_addrs[:1] + [plan.badcert]]
        daemons.append(Daemon("tarpit", server, [sys.executable, "-m", "harness.lab.tarpit", plan.hang],
                              str(run / "logs" / "tarpit.log"),
                              [f"{plan.hang}:{p}" for p in ("80", "443", "853", "53/udp")]))
        endpoints.append((plan.hang, 443))

        for d in daemons:
            d.start()
        self._save(daemons)
        # Wait for every port, but give up at once if a daemon died.
        deadline = time.monotonic() + wait
        missing = endpoints
        while True:
            missing = netns.wait_tcp(server, missing, timeout=0.5)
            dead = [d.name for d in daemons if not d.alive()]
            if dead or not missing or time.monotonic() >= deadline:
                break
        if dead or missing:
            logs = "; ".join(f"{d.name}: {_tail(d.log)}" for d in daemons if d.name in dead)
            raise HarnessError(f"lab did not come up: dead {dead or 'none'}, not listening {missing or 'none'}. {logs}")

    # -- checks ---------------------------------------------------------

    def check_spec(self, web_sites: int = 3) -> dict:
        """What `checks` should verify from the client namespace."""
        plan = self.config.addresses
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
            netns.command(self.config.namespaces["client"], [sys.executable, "-m", "harness.lab.checks", str(spec_path)]),
            capture_output=True, text=True, timeout=120, env=env,
        )
        if proc.returncode != 0:
            raise HarnessError(f"lab checks crashed: {proc.stderr.strip().splitlines()[-1] if proc.stderr else proc.returncode}")
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
