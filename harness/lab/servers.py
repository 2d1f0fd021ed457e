"""The lab's servers: the daemons `lab up` starts in the server namespace, with their configurations.

In start order: the authoritative and one delayer per recursive resolver,
the resolvers (unbound, each with its DoQ/DoH3 front), nginx for the
synthetic web and badcert, and the tarpit. Each part also names the
endpoints that accept once it is up.
"""

from __future__ import annotations

import os
import shutil
import sys
from pathlib import Path

from harness.accounts import helper, helper_dir
from harness.daemons import Daemon
from harness.lab import faults, upstream
from harness.lab.certificates import LabTls
from harness.lab.config import LabConfig, RecursiveResolver
from harness.lab.h3front import READY, front_argv
from harness.lab.replayweb import ReplayWeb
from harness.lab.unbound import DOH3_PORT, DOQ_PORT, authoritative_config, nodelay_env, openssl_conf, resolver_config
from harness.lab.zones import local_data_file, replay_zone_file, resolver_tls_name
from harness.paths import PROJECT_ROOT

DNSPROXY = PROJECT_ROOT / "build" / "bin" / "dnsproxy"

Endpoint = tuple[str, int]  # (address, TCP port) that must accept before the lab is up
ServerDaemons = tuple[list[Daemon], list[Endpoint]]  # daemons and the endpoints that show they are up


class LabServers:
    """The daemons of one lab's server namespace; each part writes its configuration as it is made."""

    def __init__(self, config: LabConfig, run_dir: Path, replay: ReplayWeb | None = None):
        self.config = config
        self.run_dir = run_dir
        self.replay = replay  # the web replayed from an archive, beside nginx's www.lab.test and badcert

    def daemons(self, tls: LabTls) -> ServerDaemons:
        """Every daemon, in start order, and the endpoints that show they are up."""
        parts = [self._authoritative(), self._resolvers(tls), self._web(), self._replay(tls), self._tarpit()]
        daemons = [d for part_daemons, _ in parts for d in part_daemons]
        endpoints = [e for _, part_endpoints in parts for e in part_endpoints]
        return daemons, endpoints

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

    def _authoritative(self) -> ServerDaemons:
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

    def _resolvers(self, tls: LabTls) -> ServerDaemons:
        """Per resolver: its certificate and configuration, its unbound and its QUIC front.

        With `tls_resumption` unbound issues TLS 1.3 session tickets and runs with the DoT nodelay shim.
        """
        cfg, run = self.config, self.run_dir
        resumption = cfg.settings.tls_resumption
        (run / "openssl.cnf").write_text(openssl_conf(resumption))
        env = {"OPENSSL_CONF": str(run / "openssl.cnf")} | (nodelay_env() if resumption else {})
        daemons: list[Daemon] = []
        endpoints: list[Endpoint] = []
        for i, r in enumerate(cfg.settings.resolvers):
            addr = cfg.addresses.resolver(i)
            cert = run / "certs" / f"resolver-{r.name}.pem"
            cert.write_bytes(tls.ca.issue([resolver_tls_name(r.name)], [addr], tls.resolver_key))
            faults.write_certificates(run / "certs", tls.ca, tls.resolver_key, r.name, addr)
            conf = run / f"resolver-{r.name}.conf"
            zone = replay_zone_file(run, r) if self.replay else None
            data = local_data_file(run, r)
            conf.write_text(resolver_config(cfg, i, r, run, cert, tls.resolver_key_file, data, zone))
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

    def _web(self) -> ServerDaemons:
        """One nginx for every web address and badcert; with `http3` under `[web]`, the HTTP/3 front beside it."""
        plan, run = self.config.addresses, self.run_dir
        web_addrs = plan.web(self.config.settings.web_addresses)
        synthetic_h3 = self.config.settings.web.http3 and self.replay is None  # a replay's front is its own
        front_tcp = synthetic_h3 and self.config.settings.web.ech  # the front takes TCP 443 (h3front/tcp.go)
        tcp = [f"{a}:443" for a in web_addrs]
        nginx_conf = ["nginx", "-p", str(run), "-c", str(run / "nginx.conf"), "-g", "daemon off;"]
        nginx = self._daemon("nginx", nginx_conf, ([] if front_tcp else tcp) + [f"{plan.badcert}:443"])
        # One server listens on all web addresses: waiting for the first stands for the rest.
        endpoints = [(a, 443) for a in web_addrs[:1] + [plan.badcert]]
        if not synthetic_h3:
            return [nginx], endpoints
        conf = run / "h3front.json"  # written with nginx.conf (harness/lab/lab.py)
        udp = [f"{a}:443/udp" for a in web_addrs]
        front = self._daemon("h3front", front_argv(conf, helper()), udp + (tcp if front_tcp else []))
        return [nginx, front], endpoints + [READY]

    def _replay(self, tls: LabTls) -> ServerDaemons:
        """The replay server and its nginx front on the archive's lab addresses (none for the synthetic web)."""
        if self.replay is None or not self.replay.hosts_at:
            return [], []
        http3 = self.config.settings.web.http3
        self.replay.server_config(self.run_dir, tls.ca, self.config.settings.web.replay_wait, http3)
        daemons = self.replay.daemons(self.config.namespaces["server"], self.run_dir, http3)
        endpoints = [(a, port) for a in sorted(self.replay.hosts_at) for port in self.replay.ports(a)]
        return daemons, endpoints + ([READY] if self.replay.h3_served(http3) else [])

    def _tarpit(self) -> ServerDaemons:
        """The tarpit on the hang address (it accepts and never answers)."""
        hang = self.config.addresses.hang
        tarpit = self._daemon(
            "tarpit",
            [sys.executable, "-I", str(Path(__file__).resolve().with_name("tarpit.py")), hang, helper().name],
            [f"{hang}:{p}" for p in ("80", "443", "853", "53/udp")],
        )
        return [tarpit], [(hang, 443)]
