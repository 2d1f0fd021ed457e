"""The lab's replay server: a web from an archive (docs/replay.md), HTTP/1.1 and HTTP/2 over TLS.

Run by `lab up --web DIR` in the server namespace as
`python -m harness.lab.replayserver CONFIG`: it binds 443 on each lab web
address with that address's certificate and the HTTP versions its hosts were
recorded with, drops to the helper account, and answers each request from
the archive (harness/replay/matching.py), after the recorded server wait
unless the lab turns waits off. Every miss and fuzzy match is one JSON line
in the events log, with the time, so a visit can count its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import pwd
import signal
import socket
import ssl
import sys
import time
import traceback
from dataclasses import dataclass
from typing import IO, NoReturn

import h2.config
import h2.connection
import h2.events
import h2.exceptions
import h2.settings
import h11

from harness.replay.archive import Archive, Exchange
from harness.replay.matching import ExchangeIndex, Match, body_for, response_headers

NOT_FOUND = b"not in the replay archive\n"
#: How often a worker checks that the server it belongs to is still there.
PARENT_POLL_S = 0.5


@dataclass(frozen=True)
class Reply:
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    wait_s: float


class Replayer:
    """The archive's answers, each made once (headers, HTML made deterministic) before the workers fork, and
    the events log."""

    def __init__(self, archive: Archive, wait: bool, events: IO[str]):
        self.index = ExchangeIndex(archive.load_all())
        self.wait = wait
        self.events = events
        self.answers: dict[int, tuple[list[tuple[str, str]], bytes]] = {
            id(e): (response_headers(e), body_for(e, site))
            for candidates in self.index.by_key.values()
            for _, e, site in candidates
        }

    def reply(self, host: str, method: str, target: str) -> Reply:
        match = self.index.match(host, method, target)
        if match.exchange is None or match.site is None:
            self._log("miss", host, method, target, match)
            return Reply(404, [("content-type", "text/plain")], NOT_FOUND, 0.0)
        if match.fuzzy:
            self._log("fuzzy", host, method, target, match)
        e: Exchange = match.exchange
        headers, body = self.answers[id(e)]
        wait = e.wait_ms / 1000 if self.wait else 0.0
        return Reply(e.status, headers, b"" if method.upper() == "HEAD" else body, wait)

    def _log(self, kind: str, host: str, method: str, target: str, match: Match) -> None:
        line = {"time": time.time(), "kind": kind, "host": host, "method": method, "target": target}
        line["worker"] = os.getpid()
        if match.fuzzy:
            line["recorded_query"] = match.recorded_query
        self.events.write(json.dumps(line) + "\n")
        self.events.flush()


# -- HTTP/1.1 -------------------------------------------------------------


async def serve_h1(replayer: Replayer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    conn = h11.Connection(h11.SERVER)
    request: h11.Request | None = None
    while True:
        event = conn.next_event()
        if event is h11.NEED_DATA:
            data = await reader.read(65536)
            conn.receive_data(data)
            if not data and conn.their_state is not h11.SEND_BODY:
                return
        elif isinstance(event, h11.Request):
            request = event
        elif isinstance(event, h11.EndOfMessage) and request is not None:
            host = dict((k.decode().lower(), v.decode()) for k, v in request.headers).get("host", "")
            reply = replayer.reply(host, request.method.decode(), request.target.decode())
            if reply.wait_s:
                await asyncio.sleep(reply.wait_s)
            headers = reply.headers + [("content-length", str(len(reply.body)))]
            writer.write(conn.send(h11.Response(status_code=reply.status, headers=headers)))
            if reply.body:
                writer.write(conn.send(h11.Data(data=reply.body)))
            writer.write(conn.send(h11.EndOfMessage()))
            await writer.drain()
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()
            request = None
        elif isinstance(event, h11.ConnectionClosed | h11.PAUSED):
            return


# -- HTTP/2 ---------------------------------------------------------------


class H2Session:
    """One HTTP/2 connection: requests answered on their own tasks, bodies sent within flow control."""

    def __init__(self, replayer: Replayer, reader: asyncio.StreamReader, writer: asyncio.StreamWriter):
        self.replayer, self.reader, self.writer = replayer, reader, writer
        # No header validation (a fifth of the server's CPU per request): the requests are a real browser's, the
        # responses' headers recorded from real servers, lower-cased and without hop-by-hop ones (matching.py).
        config = h2.config.H2Configuration(
            client_side=False,
            header_encoding="utf-8",
            validate_inbound_headers=False,
            normalize_inbound_headers=False,
            validate_outbound_headers=False,
        )
        self.conn = h2.connection.H2Connection(config=config)
        self.window = asyncio.Event()
        self.requests: dict[int, dict[str, str]] = {}
        self.tasks: set[asyncio.Task] = set()

    async def run(self) -> None:
        self.conn.initiate_connection()
        self.conn.update_settings({h2.settings.SettingCodes.MAX_CONCURRENT_STREAMS: 256})
        self._flush()
        while True:
            data = await self.reader.read(65536)
            if not data:
                break
            try:
                events = self.conn.receive_data(data)
            except h2.exceptions.ProtocolError:
                self._flush()
                break
            for event in events:
                self._on(event)
            self._flush()
        for task in self.tasks:
            task.cancel()

    def _on(self, event: h2.events.Event) -> None:
        if isinstance(event, h2.events.RequestReceived):
            # Answered at its StreamEnded event, which h2 reports even when the headers end the stream.
            self.requests[event.stream_id] = {str(k): str(v) for k, v in event.headers or []}
        elif isinstance(event, h2.events.DataReceived):
            self.conn.acknowledge_received_data(event.flow_controlled_length, event.stream_id)
        elif isinstance(event, h2.events.StreamEnded) and event.stream_id in self.requests:
            self._answer(event.stream_id)
        elif isinstance(event, h2.events.WindowUpdated | h2.events.RemoteSettingsChanged):
            self.window.set()
        elif isinstance(event, h2.events.StreamReset):
            self.requests.pop(event.stream_id, None)

    def _answer(self, stream_id: int) -> None:
        task = asyncio.get_running_loop().create_task(self._respond(stream_id))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _respond(self, stream_id: int) -> None:
        headers = self.requests.get(stream_id)
        if headers is None:
            return
        reply = self.replayer.reply(headers.get(":authority", ""), headers.get(":method", "GET"), headers[":path"])
        if reply.wait_s:
            await asyncio.sleep(reply.wait_s)
        try:
            out = [(":status", str(reply.status))] + reply.headers + [("content-length", str(len(reply.body)))]
            self.conn.send_headers(stream_id, out, end_stream=not reply.body)
            self._flush()
            await self._send_body(stream_id, memoryview(reply.body))
        except (h2.exceptions.StreamClosedError, h2.exceptions.ProtocolError, KeyError):
            pass
        finally:
            self.requests.pop(stream_id, None)

    async def _send_body(self, stream_id: int, body: memoryview) -> None:
        while body:
            size = min(self.conn.local_flow_control_window(stream_id), self.conn.max_outbound_frame_size, len(body))
            if size <= 0:
                self.window.clear()
                await self.window.wait()
                continue
            self.conn.send_data(stream_id, body[:size].tobytes(), end_stream=size == len(body))
            body = body[size:]
            self._flush()
            await self.writer.drain()

    def _flush(self) -> None:
        data = self.conn.data_to_send()
        if data:
            self.writer.write(data)


# -- the server -------------------------------------------------------------


def _context(cert: str, key: str, alpn: list[str]) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert, key)
    context.set_alpn_protocols(alpn)
    return context


def _handler(replayer: Replayer):
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        ssl_object = writer.get_extra_info("ssl_object")
        try:
            if ssl_object is not None and ssl_object.selected_alpn_protocol() == "h2":
                await H2Session(replayer, reader, writer).run()
            else:
                await serve_h1(replayer, reader, writer)
        except (ConnectionError, h11.ProtocolError, asyncio.IncompleteReadError, ssl.SSLError):
            pass
        finally:
            writer.close()

    return handle


def _drop_privileges(user: str) -> None:
    entry = pwd.getpwnam(user)
    os.setgroups([])
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)


#: A listening socket and the TLS context of its address.
Listener = tuple[socket.socket, ssl.SSLContext]


def _listen(spec: dict) -> socket.socket:
    """A listening socket on the spec's address (bound as root: port 443). Each worker binds its own with
    SO_REUSEPORT, so the kernel spreads new connections over the workers, as nginx's reuseport does."""
    sock = socket.socket(socket.AF_INET6 if ":" in spec["address"] else socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    sock.bind((spec["address"], spec.get("port", 443)))
    sock.listen(1024)
    sock.setblocking(False)
    return sock


async def serve(replayer: Replayer, listen: list[Listener], parent: int) -> None:
    """Answer on every listening socket until killed, or until the supervising ``parent`` is gone."""
    handle = _handler(replayer)
    servers = [await asyncio.start_server(handle, sock=sock, ssl=context) for sock, context in listen]
    while os.getppid() == parent:  # a worker whose parent was killed (SIGKILL) must not keep the addresses
        await asyncio.sleep(PARENT_POLL_S)
    for server in servers:
        server.close()


def _start_worker(replayer: Replayer, listen: list[Listener], workers: list[int]) -> None:
    """Fork one worker and add it to ``workers``; the child serves and never returns. SIGTERM stays blocked
    until the child is on the list (a SIGTERM then ends it too) and, in the child, until it has dropped the
    parent's handler: it dies of the signal by default."""
    parent = os.getpid()
    signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})
        status = 1
        try:
            asyncio.run(serve(replayer, listen, parent))
            status = 0
        except BaseException:
            traceback.print_exc()  # into the server's log: why the replay server stopped
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(status)
    workers.append(pid)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGTERM})


def _stop(workers: list[int], status: int) -> NoReturn:
    """End the workers, wait for them (none keeps an address after the server is gone), exit with ``status``."""
    for pid in workers:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGTERM)
    for pid in workers:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, 0)
    raise SystemExit(status)


def main(argv: list[str]) -> None:
    """Bind every listen address, drop privileges, fork the workers and answer until killed.

    Workers as nginx's (the config's ``workers``): one Python process answers one request at a time, and
    a page's parallel requests would queue behind each other where nginx's two workers serve them side by side.
    """
    with open(argv[1]) as f:
        config = json.load(f)
    events = open(config["events"], "a")  # noqa: SIM115  # every worker appends to it until killed
    replayer = Replayer(Archive(config["archive"]), bool(config["wait"]), events)
    count = max(1, int(config.get("workers", 1)))
    contexts = [_context(spec["cert"], spec["key"], spec["alpn"]) for spec in config["listen"]]
    listeners = [[(_listen(spec), c) for spec, c in zip(config["listen"], contexts, strict=True)] for _ in range(count)]
    if config.get("user"):
        _drop_privileges(config["user"])
    workers: list[int] = []
    signal.signal(signal.SIGTERM, lambda _signum, _frame: _stop(workers, 0))  # a lab stops the server by its pid
    for listen in listeners:
        _start_worker(replayer, listen, workers)
    print(f"replay server: {len(replayer.index.by_key)} URLs on {len(contexts)} addresses, {len(workers)} workers")
    sys.stdout.flush()
    os.wait()
    _stop(workers, 1)  # a worker ended on its own: a broken server, stopped whole


if __name__ == "__main__":
    main(sys.argv)
