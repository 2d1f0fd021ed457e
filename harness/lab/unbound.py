"""unbound configurations: the lab resolvers (Do53, DoT, DoH) and the lab authoritative."""

from __future__ import annotations

from pathlib import Path

from harness.errors import HarnessError
from harness.lab.config import LabConfig, LocalResolver, RecursiveResolver
from harness.paths import PROJECT_ROOT

DOT_PORT = 853
DOH_PORT = 443
DOH_PATH = "/dns-query"
# The QUIC front (dnsproxy) beside each resolver. unbound already holds UDP
# 853 on the resolver's address (it binds UDP on every interface port), so
# DoQ moves to 8853; DoH3 needs a port whose TCP twin is free as well.
DOQ_PORT = 8853
DOH3_PORT = 8443


def _common(run: Path, interfaces: list[str], allow: list[str]) -> list[str]:
    lines = [
        "server:",
        "  verbosity: 1",
        '  username: "unbound"',
        '  chroot: ""',
        f'  directory: "{run}"',
        '  pidfile: ""',
        "  use-syslog: no",
        '  logfile: ""',
        "  log-time-ascii: yes",
        "  num-threads: 1",
        "  do-ip6: no",
        '  module-config: "iterator"',
        "  extended-statistics: yes",
        "  statistics-cumulative: no",
        "  incoming-num-tcp: 256",
    ]
    lines += [f"  interface: {i}" for i in interfaces]
    lines += ["  access-control: 0.0.0.0/0 refuse"] + [f"  access-control: {net} allow" for net in allow]
    return lines


def _remote_control(socket: Path) -> list[str]:
    return [
        "remote-control:",
        "  control-enable: yes",
        f"  control-interface: {socket}",
        "  control-use-cert: no",
    ]


# unbound sets TCP_NODELAY on its DoH sockets (http-nodelay) but not on DoT
# ones. With TLS 1.3 the server sends session tickets right after the
# handshake; Nagle then holds the first DoT answer until the client's delayed
# ACK arrives: +40 ms on the first query of every DoT connection, measured in
# this lab (0.25 ms with TLS 1.2 or without tickets). No public resolver we
# compare against behaves like that, so by default lab resolvers send no
# tickets. This costs nothing a fresh browser or stub could use (they never
# resume). A lab with `tls_resumption` sends tickets and lifts the stall
# another way: see nodelay_env().
OPENSSL_CONF = """openssl_conf = openssl_init
[openssl_init]
ssl_conf = ssl_module
[ssl_module]
system_default = tls_defaults
[tls_defaults]
MinProtocol = TLSv1.2
NumTickets = 0
"""
# OpenSSL's own default number of tickets per handshake.
TICKETS_WHEN_RESUMING = 2


def openssl_conf(resumption: bool) -> str:
    """The resolvers' OpenSSL configuration: no TLS 1.3 session tickets, unless the lab resumes."""
    if not resumption:
        return OPENSSL_CONF
    return OPENSSL_CONF.replace("NumTickets = 0", f"NumTickets = {TICKETS_WHEN_RESUMING}")


def nodelay_env() -> dict[str, str]:
    """What unbound's environment needs for TCP_NODELAY on its DoT connections (labs with tickets).

    unbound 1.17 has no option for it, so a shim preloaded into unbound
    (timer/nodelay/nodelay.c) sets it on every connection it accepts on the
    DoT port: the ticket segment then no longer holds back the first answer
    (measured in docs/lab.md, "Resumption"). The shim is installed beside
    dnstimer (scripts/setup.sh builds both with timer/Makefile).
    """
    shim = (PROJECT_ROOT / "build" / "bin" / "dnstimer").resolve().with_name("nodelay.so")
    if not shim.exists():
        raise HarnessError(f"{shim} is missing: run 'bash scripts/setup.sh' (it builds unbound's DoT nodelay shim)")
    return {"LD_PRELOAD": str(shim), "DNSSTUDY_NODELAY_PORTS": str(DOT_PORT)}


def resolver_config(
    config: LabConfig,
    index: int,
    resolver: LocalResolver | RecursiveResolver,
    run: Path,
    cert: Path,
    key: Path,
    local_data: Path,
    zone_file: Path | None = None,
) -> str:
    """A lab resolver serving Do53 (UDP, TCP), DoT on 853 and DoH on 443 (HTTP/2, GET and POST).

    ``zone_file`` (a lab replaying an archive): a local resolver answers from the lab's root zone instead of
    local data, because unbound's local data does not follow CNAME chains and an archive's names have them.
    """
    address = config.addresses.resolver(index)
    lines = _common(
        run,
        [f"{address}@53", f"{address}@{DOT_PORT}", f"{address}@{DOH_PORT}"],
        [str(config.network)],
    )
    lines += [
        f"  tls-port: {DOT_PORT}",
        f"  https-port: {DOH_PORT}",
        f'  http-endpoint: "{DOH_PATH}"',
        f'  tls-service-key: "{key}"',
        f'  tls-service-pem: "{cert}"',
        # Every query is logged, so tests can show which names reached the lab.
        "  log-queries: yes",
        "  log-replies: yes",
    ]
    if isinstance(resolver, LocalResolver) and zone_file is not None:
        lines += ['  local-zone: "test." nodefault'] + _zone(zone_file, downstream=False)
    elif isinstance(resolver, LocalResolver):
        # Everything outside the lab's zones gets NXDOMAIN here, at once.
        lines += ['  local-zone: "." static', f'  include: "{local_data}"']
    else:
        lines += [
            # test. is a built-in empty zone; lab.test lives at the authoritative.
            '  local-zone: "test." nodefault',
            f"  outgoing-interface: {address}",
            f"  cache-max-ttl: {resolver.cache_max_ttl}",
            f"  cache-max-negative-ttl: {resolver.cache_max_ttl}",
            # One upstream query per miss: the cost of a miss is one upstream round trip.
            "  qname-minimisation: no",
            "  prefetch: no",
            "stub-zone:",
            '  name: "."',
            f"  stub-addr: {config.addresses.auth}@53",
        ]
    lines += _remote_control(run / f"{resolver.name}.ctl")
    return "\n".join(lines) + "\n"


def authoritative_config(config: LabConfig, run: Path, zone_file: Path) -> str:
    """The lab authoritative: every lab record in one zone for ".", for recursive lab resolvers."""
    lines = _common(run, [f"{config.addresses.auth}@53"], [str(config.addresses.server_net)])
    lines += ['  local-zone: "test." nodefault'] + _zone(zone_file, downstream=True)
    lines += _remote_control(run / "auth.ctl")
    return "\n".join(lines) + "\n"


def _zone(zone_file: Path, downstream: bool) -> list[str]:
    """The lab's root zone: served as an authoritative (downstream), or read as a resolver's own upstream."""
    return [
        "auth-zone:",
        '  name: "."',
        f'  zonefile: "{zone_file}"',
        f"  for-downstream: {'yes' if downstream else 'no'}",
        f"  for-upstream: {'no' if downstream else 'yes'}",
        "  fallback-enabled: no",
    ]
