"""DoT: a stub on 127.0.0.1:53 of the client namespace, TLS to the resolver's port 853.

The stub is Stubby (the reference study's) or dnsproxy (`stub="dnsproxy"`,
harness/arms/dnsproxy.py): Stubby's first query on every new connection
waits about 40 ms for Nagle (docs/visit.md), a cost of the stub, not of
DoT, which dnsproxy does not pay. The record names the stub.

Stubby authenticates the resolver by name against the lab CA
(GETDNS_AUTHENTICATION_REQUIRED: no opportunistic fallback) and keeps its
TLS connection open for `idle_timeout` ms. `persistent` decides what a
fresh visit means: False (the reference study: one container, so one stub,
per visit) starts a new stub for every visit, so each visit pays the TLS
handshake; True keeps one stub and its connection across visits.
"""

from __future__ import annotations

import ipaddress
import json
import time

from harness import netns
from harness.accounts import BIND_LOW_PORT, helper
from harness.arms.base import DnsArm, register_arm
from harness.arms.dnsproxy import STAMP_DOT, STUB_ADDRESS, DnsproxyStub, log_size, stamp, verify_failed_since
from harness.daemons import Daemon, terminate
from harness.errors import HarnessError, require_program
from harness.protocols import DO53, DOT

#: The DoT stubs a study may choose (`[arms] stubs = {dot = "dnsproxy"}`): the reference study's first, then AdGuard's.
STUBS = ("stubby", "dnsproxy")
#: What Stubby (getdns) logs when the resolver's certificate does not verify, followed by OpenSSL's
#: verify code: "<address> : Verify failed : TLS - *Failure* - (21) ...". A fixed marker, not prose.
VERIFY_FAILED = b": Verify failed : "


@register_arm(DOT)
class DotArm(DnsArm):
    uses_stub = True
    stubs = STUBS

    def set_up(self) -> None:
        resolver, client = self.resolver, self.client
        self.stub: Daemon | None = None  # Stubby, when it is the stub
        self.stubby_started_at: float | None = None  # monotonic seconds, when the running Stubby was started
        self.log = client.run_dir / "logs" / "stubby.log"
        self.log_mark = 0  # the stub log's size when the visit began
        self.proxy: DnsproxyStub | None = None
        if self.stub_program == "dnsproxy":
            upstream = stamp(STAMP_DOT, resolver.address, resolver.port(DOT), resolver.tls_name)
            self.proxy = DnsproxyStub(f"dot-stub-{resolver.name}", client, upstream)
            self.log = self.proxy.log

    def config(self) -> str:
        """Stubby's YAML configuration.

        Strings are written as JSON strings (valid YAML, nothing of ours can
        break out of them); getdns wants the upstream address as a plain
        scalar, so it is written bare after validation.
        """
        q = json.dumps
        address = ipaddress.IPv4Address(self.resolver.address)
        return "\n".join(
            [
                "resolution_type: GETDNS_RESOLUTION_STUB",
                "dns_transport_list: [GETDNS_TRANSPORT_TLS]",  # TLS only: no fallback to Do53
                "tls_authentication: GETDNS_AUTHENTICATION_REQUIRED",  # the resolver's name must verify
                "tls_query_padding_blocksize: 128",
                "edns_client_subnet_private: 1",
                f"idle_timeout: {int(self.idle_timeout_ms)}",
                "round_robin_upstreams: 0",
                f"listen_addresses: [{STUB_ADDRESS}@{DO53.port}]",
                f"tls_ca_file: {q(str(self.client.ca_file))}",
                f"appdata_dir: {q(str(self.client.run_dir / 'stubby'))}",
                "upstream_recursive_servers:",
                f"  - address_data: {address}",
                f"    tls_port: {DOT.port}",
                f"    tls_auth_name: {q(self.resolver.tls_name)}",
                "",
            ]
        )

    def start(self) -> None:
        if self.proxy is not None:
            if not self.proxy.alive():
                self.client.set_system_resolver(STUB_ADDRESS)
                self.proxy.start()
            return
        if self.stub is not None and self.stub.alive():
            return  # persistent stub, still running
        self.client.set_system_resolver(STUB_ADDRESS)
        self._start_stubby()

    @property
    def stub_started_at(self) -> float | None:
        return self.proxy.started_at if self.proxy is not None else self.stubby_started_at

    def reset_connection(self) -> int:
        if self.persistent:
            return 0
        if self.proxy is not None:
            self.proxy.restart()
        else:
            self.stop()
            self._start_stubby()
        return 0  # the stub's connection is new; the browser holds none

    def _start_stubby(self) -> None:
        """Stubby started with the arm's configuration; it listens within 5 s (or the error says so)."""
        stubby = require_program("stubby", "stubby")
        account = helper()
        run = self.client.run_dir
        (run / "stubby").mkdir(parents=True, exist_ok=True)
        account.give(run / "stubby")  # getdns keeps its state there
        conf = run / f"stubby-{self.resolver.name}.yml"
        conf.write_text(self.config())
        self.stub = Daemon(
            name=f"stubby-{self.resolver.name}",
            namespace=self.client.namespace,
            # It parses the resolver's answers: unprivileged, keeping only the right to listen on port 53.
            argv=account.run_as([account.program(stubby), "-C", str(conf), "-v", "4"], keep=(BIND_LOW_PORT,)),
            log=str(self.log),
            addresses=[f"{STUB_ADDRESS}:{DO53.port}"],
        )
        self.stubby_started_at = time.monotonic()
        self.stub.start()
        if netns.wait_tcp(self.client.namespace, [(STUB_ADDRESS, DO53.port)], timeout=5.0):
            self.stop()
            raise HarnessError(f"stubby did not listen on {STUB_ADDRESS}:{DO53.port} within 5 s (log: {self.log})")

    def problem(self) -> str | None:
        alive = self.proxy.alive() if self.proxy is not None else self.stub is not None and self.stub.alive()
        return None if alive else f"the DoT stub ({self.stub_program}) is not running"

    def begin_visit(self) -> None:
        self.log_mark = log_size(self.log)

    def authentication_failed(self, trr_failure: str | None) -> bool:
        """The stub logged a certificate that did not verify since the visit began."""
        if self.proxy is not None:
            return verify_failed_since(self.log, self.log_mark)
        try:
            with open(self.log, "rb") as f:
                f.seek(self.log_mark)
                return VERIFY_FAILED in f.read()
        except OSError:
            return False

    def finish_visit(self) -> None:
        """End of a visit: a per-visit stub goes, a persistent one stays."""
        if not self.persistent:
            self.stop()

    def stop(self) -> None:
        if self.proxy is not None:
            self.proxy.stop()
        if self.stub is not None:
            terminate([self.stub.pid] if self.stub.alive() else [], grace=1.0)
            self.stub, self.stubby_started_at = None, None

    def describe(self) -> dict:
        return {
            **super().describe(),
            "stub": self.stub_program,
            "tls_name": self.resolver.tls_name,
            "stub_persistent": self.persistent,
            # dnsproxy has no idle timeout of its own to set: it keeps the connection while it runs.
            "idle_timeout_ms": self.idle_timeout_ms if self.proxy is None else None,
        }
