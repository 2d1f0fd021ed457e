"""The broker: Redis, started by the tool for a lab or single host, or any Redis a deployment gives.

A broker URL must carry a password (`redis://:PASSWORD@host:port/0`, or
`rediss://` for TLS); the one the tool starts binds to loopback or a lab
address only, keeps an append-only file synced on every write (a restart
loses no queued visit and no finished result), and runs as the `redis`
account Debian's package creates, never as root.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import signal
import socket
import ssl
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import parse_qs, quote, urlsplit

import redis

from harness.accounts import Account
from harness.daemons import running
from harness.errors import HarnessError

BROKER_DIR = Path("/var/lib/dnsstudy/broker")  # AOF and the password: on disk, they must survive a reboot
REDIS_ACCOUNT = "redis"
DEFAULT_PORT = 6380  # not Redis's default 6379: a system Redis may own that


def read_url_file(path: Path) -> str:
    """A broker URL kept in a file (a container secret, or the `url` of `broker up --foreground`); one-line errors."""
    try:
        url = path.read_text().strip()
    except OSError as exc:
        raise HarnessError(f"broker URL file {path}: {exc.strerror}") from None
    if not url:
        raise HarnessError(f"broker URL file {path}: empty")
    return url


def bind_address(host: str) -> str:
    """The address to bind for ``host``: itself if an IP, else what the name resolves to (a container's own name)."""
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    try:
        return socket.gethostbyname(host)
    except OSError:
        raise HarnessError(f"broker host {host}: the name does not resolve") from None


def check_url(url: str) -> str:
    """A broker URL, checked: redis:// or rediss://, with a password; a one-line error naming what is wrong."""
    parts = urlsplit(url)
    shown = display(url)
    if parts.scheme not in ("redis", "rediss"):
        raise HarnessError(f"broker URL {shown}: the scheme must be redis:// or rediss://")
    if not parts.password:
        raise HarnessError(f"broker URL {shown}: no password (redis://:PASSWORD@host:port/0); the broker needs one")
    if not parts.hostname:
        raise HarnessError(f"broker URL {shown}: no host")
    return url


def tls_options(url: str) -> dict | None:
    """For a rediss:// URL, what Celery and kombu need to verify the broker (its query names a CA file), else None.

    The broker's certificate is always verified: a URL asking for less is refused.
    """
    parts = urlsplit(url)
    if parts.scheme != "rediss":
        return None
    query = parse_qs(parts.query)
    wanted = query.get("ssl_cert_reqs", ["required"])[0]
    if wanted not in ("required", "CERT_REQUIRED"):
        raise HarnessError(
            f"broker URL {display(url)}: ssl_cert_reqs={wanted}: the broker's certificate is always verified"
        )
    options: dict = {"ssl_cert_reqs": ssl.CERT_REQUIRED}
    if "ssl_ca_certs" in query:
        options["ssl_ca_certs"] = query["ssl_ca_certs"][0]
    return options


def display(url: str) -> str:
    """The URL with its password hidden, for messages and logs."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    host = parts.netloc.rsplit("@", 1)[1]  # as written: the password may hold escapes, the host never an '@'
    return parts._replace(netloc=f"{parts.username or ''}:***@{host}", query="").geturl()


def connect(url: str, timeout: float = 5.0) -> redis.Redis:
    """A client of the broker, once it answered a PING; a one-line error for a wrong password or no answer."""
    check_url(url)
    tls = tls_options(url) or {}
    bare = urlsplit(url)._replace(query="").geturl()
    client = redis.Redis.from_url(bare, socket_timeout=timeout, socket_connect_timeout=timeout, **tls)
    try:
        client.ping()
    except redis.AuthenticationError:
        raise HarnessError(f"broker {display(url)}: the password was refused") from None
    except redis.ResponseError as exc:
        if "WRONGPASS" in str(exc) or "NOAUTH" in str(exc):
            raise HarnessError(f"broker {display(url)}: the password was refused") from None
        raise HarnessError(f"broker {display(url)}: {exc}") from None
    except redis.ConnectionError as exc:
        raise HarnessError(f"broker {display(url)}: cannot connect ({exc})") from None
    return client


@dataclass
class RedisService:
    """A redis-server the tool runs: bound to ``host``, with a password and an fsynced append-only file."""

    name: str = "default"
    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    root: Path = BROKER_DIR
    tls: bool = False  # TLS only (rediss://), with a CA of its own: `ca.pem` in its directory is what clients trust

    @property
    def directory(self) -> Path:
        return self.root / self.name

    @property
    def url(self) -> str:
        """The URL workers and the coordinator use (it holds the password: keep it out of shell history)."""
        password = quote(self.password(), safe="")
        if self.tls:
            ca = quote(str(self.directory / "ca.pem"), safe="/")
            return f"rediss://:{password}@{self.host}:{self.port}/0?ssl_cert_reqs=required&ssl_ca_certs={ca}"
        return f"redis://:{password}@{self.host}:{self.port}/0"

    def password(self) -> str:
        path = self.directory / "password"
        try:
            return path.read_text().strip()
        except FileNotFoundError:
            raise HarnessError(f"broker '{self.name}' was never started: run 'dnsstudy broker up'") from None

    def pid(self) -> int | None:
        """The running server's pid, or None. A server killed (SIGKILL leaves its pid file) and not yet reaped
        is a zombie that signal 0 still finds: not running (a chaos run's `broker up` took it for a live one)."""
        try:
            pid = int((self.directory / "redis.pid").read_text())
        except (FileNotFoundError, ValueError):
            return None
        return pid if running(pid) else None

    def serve(self) -> int:
        """Run the server in the foreground, as a container's main process, until it exits; returns its status.

        Writes the URL to `url` in its directory once the server answers, and removes it when the
        server ends, so the file's presence means a live broker (the compose file's health check).
        """
        account = Account.lookup(REDIS_ACCOUNT)
        url_file = self.directory / "url"
        url_file.unlink(missing_ok=True)
        self._prepare(account, daemonize=False)
        # A stop asked for before the server exists is passed on as soon as it does.
        server: subprocess.Popen | None = None
        asked: list[int] = []

        def forward(signum: int, _frame: object) -> None:  # a container's stop: Redis fsyncs its AOF and exits
            asked.append(signum)
            if server is not None:
                server.send_signal(signum)

        for stop in (signal.SIGTERM, signal.SIGINT):
            signal.signal(stop, forward)
        # Its own session: a terminal's Ctrl-C reaches it once, through us, not twice.
        argv = account.run_as(["redis-server", str(self.directory / "redis.conf")])
        server = subprocess.Popen(argv, start_new_session=True)
        if asked:
            server.send_signal(asked[0])
        try:
            if self._answers_while(server):
                temporary = url_file.with_name(".url.tmp")
                temporary.unlink(missing_ok=True)
                with os.fdopen(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
                    out.write(self.url + "\n")
                os.replace(temporary, url_file)  # whole or absent: a health check never reads half a URL
            return server.wait()
        finally:
            url_file.unlink(missing_ok=True)
            if server.poll() is None:
                server.terminate()
                server.wait()

    def _answers_while(self, server: subprocess.Popen) -> bool:
        """Wait for the server to answer for as long as it runs (replaying a large AOF takes a while)."""
        while server.poll() is None:
            try:
                connect(self.url, timeout=1).close()
                return True
            except HarnessError:
                time.sleep(0.2)
        return False

    def up(self) -> str:
        """Start the server (a no-op if it runs); returns its URL once it answers."""
        if self.pid() is None:
            account = Account.lookup(REDIS_ACCOUNT)
            self._prepare(account)
            config = self.directory / "redis.conf"
            argv = account.run_as(["redis-server", str(config)])
            subprocess.run(argv, check=True, timeout=10, capture_output=True)  # daemonizes once it listens
            self._wait()
        connect(self.url)
        return self.url

    def down(self) -> None:
        """Stop the server (its data stays on disk for the next `up`)."""
        pid = self.pid()
        if pid is None:
            return
        os.kill(pid, signal.SIGTERM)  # Redis fsyncs the AOF and exits
        for _ in range(100):
            if self.pid() is None:
                return
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)

    def _prepare(self, account: Account, daemonize: bool = True) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        os.chmod(self.directory, 0o700)
        password = self.directory / "password"
        if not password.exists():
            password.write_text(secrets.token_urlsafe(24) + "\n")
            os.chmod(password, 0o600)
        config = self.directory / "redis.conf"
        listen = [f"port {self.port}"] if not self.tls else ["port 0", f"tls-port {self.port}", *self._tls()]
        config.write_text(
            "\n".join(
                [
                    f"bind {bind_address(self.host)}",
                    *listen,
                    "protected-mode yes",
                    f"requirepass {self.password()}",
                    f"daemonize {'yes' if daemonize else 'no'}",
                    f"pidfile {self.directory / 'redis.pid'}",
                    f"logfile {self.directory / 'redis.log'}",
                    f"dir {self.directory}",
                    "appendonly yes",
                    "appendfsync always",  # a finished visit's result survives a power cut, not just a kill
                    'save ""',  # the AOF is the persistence; no RDB snapshots besides
                    "",
                ]
            )
        )
        os.chmod(config, 0o600)
        account.give(self.directory)

    def _tls(self) -> list[str]:
        """A CA and a certificate for the bound address, made once; the configuration lines that load them."""
        from harness.lab.ca import CertificateAuthority, new_key, write_key

        ca_file, cert, key = self.directory / "ca.pem", self.directory / "broker.pem", self.directory / "broker.key"
        if not ca_file.exists():
            ca = CertificateAuthority.create(f"dnsstudy broker {self.name}")
            server_key = new_key()
            names = ["localhost"] if self.host == bind_address(self.host) else ["localhost", self.host]
            cert.write_bytes(ca.issue(names, [bind_address(self.host)], server_key))
            write_key(server_key, key)
            ca_file.write_bytes(ca.cert_pem)  # last: its presence says the set is complete
        return [
            f"tls-cert-file {cert}",
            f"tls-key-file {key}",
            f"tls-ca-cert-file {ca_file}",
            "tls-auth-clients no",  # clients prove themselves with the password; they verify the server
        ]

    def _wait(self) -> None:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            try:
                connect(self.url, timeout=1).close()
                return
            except HarnessError:
                time.sleep(0.1)
        log = self.directory / "redis.log"
        tail = log.read_text().strip().splitlines()[-1:] if log.exists() else []
        raise HarnessError(f"broker '{self.name}' did not answer within 10 s: {' '.join(tail) or 'no log'}")
