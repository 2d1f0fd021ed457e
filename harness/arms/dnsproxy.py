"""AdGuard dnsproxy as the client's stub resolver: plain DNS on 127.0.0.1:53, an encrypted upstream.

The stub of Kosek et al.'s DoQ page-load harness, and a DoT stub to set
beside Stubby (whose first query on a new connection waits for Nagle,
docs/visit.md). The upstream is a DNS stamp (sdns://), which carries the
resolver's address and the name its certificate must carry: the stub
connects to the address and authenticates the name, with no bootstrap
query over Do53 (which the arms' proofs forbid). It trusts the client's CA
file only (Go reads SSL_CERT_FILE), and runs as the helpers' account.

This module registers no arm: the DoQ arm and the DoT arm use it.
"""

from __future__ import annotations

import base64
import struct
import time
from pathlib import Path

from harness import netns
from harness.accounts import BIND_LOW_PORT, helper
from harness.daemons import Daemon, terminate
from harness.errors import HarnessError
from harness.paths import built_program
from harness.place import ClientSide
from harness.protocols import DO53

STUB_ADDRESS = "127.0.0.1"
#: DNS stamp protocol identifiers (https://dnscrypt.info/stamps-specifications).
STAMP_DOH, STAMP_DOT, STAMP_DOQ = 0x02, 0x03, 0x04
#: Go's crypto/tls prefix for a certificate that does not verify (untrusted, expired, another name).
VERIFY_FAILED = b"tls: failed to verify certificate"


def _lp(text: str) -> bytes:
    raw = text.encode("ascii")
    if len(raw) > 255:
        raise HarnessError(f"a DNS stamp field is longer than 255 bytes: {text!r}")
    return bytes([len(raw)]) + raw


def stamp(kind: int, address: str, port: int, hostname: str, path: str | None = None) -> str:
    """A DoT, DoQ or (with ``path``) DoH stamp: connect to ``address``:``port``, authenticate ``hostname``
    (no hashes pinned)."""
    properties = struct.pack("<Q", 0)  # no promises (DNSSEC, no logs, no filter) are made for a test resolver
    body = bytes([kind]) + properties + _lp(f"{address}:{port}") + b"\x00" + _lp(f"{hostname}:{port}")
    if path is not None:
        body += _lp(path)
    return "sdns://" + base64.urlsafe_b64encode(body).decode().rstrip("=")


class DnsproxyStub:
    """One dnsproxy in the client namespace, forwarding to one upstream."""

    def __init__(self, name: str, client: ClientSide, upstream: str, http3: bool = False):
        self.name, self.client, self.upstream = name, client, upstream
        self.http3 = http3  # a DoH upstream over HTTP/3 (its TCP fallback is the arm's to refuse)
        self.log = client.run_dir / "logs" / "dnsproxy-stub.log"
        self.daemon: Daemon | None = None
        self.started_at: float | None = None  # monotonic seconds, when the running process was started

    def start(self) -> None:
        """Start it and wait until it listens (a one-line error if it does not within 5 s)."""
        account = helper()
        argv = [
            account.program(built_program("dnsproxy")),
            "--listen",
            STUB_ADDRESS,
            "--port",
            str(DO53.port),
            "--upstream",
            self.upstream,
        ] + (["--http3"] if self.http3 else [])
        self.log.parent.mkdir(parents=True, exist_ok=True)
        self.daemon = Daemon(
            name=self.name,
            namespace=self.client.namespace,
            argv=account.run_as(argv, keep=(BIND_LOW_PORT,)),  # it parses the resolver's answers
            log=str(self.log),
            addresses=[f"{STUB_ADDRESS}:{DO53.port}"],
            env={"SSL_CERT_FILE": str(self.client.ca_file)},
        )
        self.started_at = time.monotonic()
        self.daemon.start()
        if netns.wait_tcp(self.client.namespace, [(STUB_ADDRESS, DO53.port)], timeout=5.0):
            self.stop()
            raise HarnessError(f"dnsproxy did not listen on {STUB_ADDRESS}:{DO53.port} within 5 s (log: {self.log})")

    def alive(self) -> bool:
        return self.daemon is not None and self.daemon.alive()

    def restart(self) -> None:
        """A new process, so a new connection (and TLS session) to the upstream at the next query."""
        self.stop()
        self.start()

    def stop(self) -> None:
        if self.daemon is not None:
            terminate([self.daemon.pid] if self.daemon.alive() else [], grace=1.0)
            self.daemon, self.started_at = None, None


def log_size(log: Path) -> int:
    return log.stat().st_size if log.exists() else 0


def verify_failed_since(log: Path, mark: int) -> bool:
    """Whether the stub logged a certificate that did not verify after byte ``mark`` of its log."""
    try:
        with open(log, "rb") as f:
            f.seek(mark)
            return VERIFY_FAILED in f.read()
    except OSError:
        return False
