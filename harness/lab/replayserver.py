"""The lab's replay server: what the replay web's nginx does not answer from its files (docs/replay.md).

Run by `lab up --web DIR` in the server namespace as
`python -m harness.lab.replayserver CONFIG`. The replay web's nginx
(harness/lab/replayfront.py) terminates TLS and HTTP/2 and serves every
request that has an exact recorded answer from a file; everything else
(fuzzy matches, misses, other methods and statuses) it passes here over
HTTP/1.1 on a Unix socket. This server binds that socket as root, drops to
the helper account, and answers from the archive
(harness/replay/matching.py), after the recorded server wait unless the lab
turns waits off. Every miss, fuzzy match, answer it cannot give as recorded
(an error: a header or status HTTP cannot carry, a failure while sending) and
answer whose body was made up at import (filled) is one JSON line in the
events log, with the time and the URL, so a visit can count its own. A
request that failed in the original (status 0) is answered with
FAILED_STATUS, on which nginx closes without an answer, as the original did.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import socket
import sys
import time
import traceback
from dataclasses import dataclass
from typing import IO, NoReturn

import h11

from harness.lab.privileges import drop_privileges
from harness.lab.replayfront import FAILED_STATUS
from harness.replay.archive import Archive, Exchange
from harness.replay.matching import ExchangeIndex, body_for, page_urls, response_headers

NOT_FOUND = b"not in the replay archive\n"
#: How often a worker checks that the server it belongs to is still there.
PARENT_POLL_S = 0.5


@dataclass(frozen=True)
class Reply:
    status: int
    headers: list[tuple[str, str]]
    body: bytes
    wait_s: float


@dataclass(frozen=True)
class Request:
    """What nginx passed on: the browser's scheme, Host, method and target."""

    scheme: str
    host: str
    method: str
    target: str

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host}{self.target}"


@dataclass(frozen=True)
class Answer:
    """A recorded exchange as this server sends it: what HTTP can carry of it, and why that is not all."""

    status: int
    headers: list[tuple[str, str]]
    body: bytes
    problem: str  # "" when sent exactly as recorded


def sendable(e: Exchange, site: str) -> Answer:
    """The answer to send for ``e``, with a reason for each part HTTP/1.1 cannot carry as recorded (dropped)."""
    if e.failure or e.status == 0:
        return Answer(FAILED_STATUS, [], b"", "")
    problems, headers = [], []
    for name, value in response_headers(e):
        try:
            h11.Response(status_code=200, headers=[(name, value)])
            headers.append((name, value))
        except h11.LocalProtocolError:
            problems.append(f"header {name[:40]!r} cannot be sent")
    status = e.status
    if not 200 <= status <= 999 or status == FAILED_STATUS:
        problems.append(f"status {status} cannot be sent")
        status = 502
    return Answer(status, headers, body_for(e, site), "; ".join(problems))


class Replayer:
    """The archive's answers, each made once (headers, HTML made deterministic) before the workers fork, and
    the events log."""

    def __init__(self, archive: Archive, wait: bool, events: IO[str]):
        records = archive.load_all()
        self.index = ExchangeIndex(records)
        self.pages = {url for r in records for url in page_urls(r)}
        self.wait = wait
        self.events = events
        self.answers: dict[int, Answer] = {
            id(e): sendable(e, site) for candidates in self.index.by_key.values() for _, e, site in candidates
        }

    def reply(self, host: str, method: str, target: str, scheme: str = "https") -> Reply:
        request = Request(scheme, host, method, target)
        match = self.index.match(host, method, target, scheme)
        if match.exchange is None or match.site is None:
            self.log("miss", request, {"recorded_query": None})
            return Reply(404, [("content-type", "text/plain")], NOT_FOUND, 0.0)
        e: Exchange = match.exchange
        answer = self.answers[id(e)]
        if match.fuzzy:
            self.log("fuzzy", request, {"recorded_query": match.recorded_query})
        if answer.problem:
            self.log("error", request, {"reason": answer.problem})
        if e.filled:
            self.log("filled", request, {})
        wait = e.wait_ms / 1000 if self.wait else 0.0
        return Reply(answer.status, answer.headers, b"" if method.upper() == "HEAD" else answer.body, wait)

    def log(self, kind: str, request: Request, extra: dict) -> None:
        """One event (miss, fuzzy, error, filled) as a JSON line, with its time, URL and whether it is a page."""
        url = request.url
        line = {"time": time.time(), "kind": kind, "url": url, "host": request.host, "method": request.method}
        line |= {"target": request.target, "page": url in self.pages, "worker": os.getpid()}
        self.events.write(json.dumps(line | {k: v for k, v in extra.items() if v is not None}) + "\n")
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
            fields = {k.decode().lower(): v.decode() for k, v in request.headers}
            host, scheme = fields.get("host", ""), fields.get("x-scheme", "https")
            method, target = request.method.decode(), request.target.decode()
            reply = replayer.reply(host, method, target, scheme)
            if reply.wait_s:
                await asyncio.sleep(reply.wait_s)
            try:
                await _send(conn, writer, reply)
            except h11.LocalProtocolError as exc:  # nginx then answers 502: a made-up answer, counted
                reason = f"cannot be sent ({exc})"
                replayer.log("error", Request(scheme, host, method, target), {"reason": reason})
                return
            if conn.our_state is not h11.DONE or conn.their_state is not h11.DONE:
                return
            conn.start_next_cycle()
            request = None
        elif isinstance(event, h11.ConnectionClosed | h11.PAUSED):
            return


async def _send(conn: h11.Connection, writer: asyncio.StreamWriter, reply: Reply) -> None:
    headers = reply.headers + [("content-length", str(len(reply.body)))]
    writer.write(conn.send(h11.Response(status_code=reply.status, headers=headers)))
    if reply.body:
        writer.write(conn.send(h11.Data(data=reply.body)))
    writer.write(conn.send(h11.EndOfMessage()))
    await writer.drain()


# -- the server -------------------------------------------------------------


def _handler(replayer: Replayer):
    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await serve_h1(replayer, reader, writer)
        except (ConnectionError, h11.ProtocolError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()

    return handle


def _listen(path: str) -> socket.socket:
    """The Unix socket nginx passes requests to, bound before the archive loads (nginx's first requests wait in
    its backlog) and open to nginx's workers, which run as another account."""
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    os.chmod(path, 0o666)
    sock.listen(1024)
    sock.setblocking(False)
    return sock


async def serve(replayer: Replayer, sock: socket.socket, parent: int) -> None:
    """Answer on the socket until killed, or until the supervising ``parent`` is gone."""
    server = await asyncio.start_unix_server(_handler(replayer), sock=sock)
    while os.getppid() == parent:  # a worker whose parent was killed (SIGKILL) must not keep serving
        await asyncio.sleep(PARENT_POLL_S)
    server.close()


def _start_worker(replayer: Replayer, sock: socket.socket, workers: list[int]) -> None:
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
            asyncio.run(serve(replayer, sock, parent))
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
    """Bind the socket, drop privileges, fork the workers (the config's ``workers``, sharing the socket) and
    answer until killed.

    More than one worker because one Python process answers one request at a time, and a page whose URLs
    carry changing query strings sends most of its requests here.
    """
    with open(argv[1]) as f:
        config = json.load(f)
    sock = _listen(config["socket"])
    events = open(config["events"], "a")  # noqa: SIM115  # every worker appends to it until killed
    replayer = Replayer(Archive(config["archive"]), bool(config["wait"]), events)
    if config.get("user"):
        drop_privileges(config["user"], "replay server")
    workers: list[int] = []
    signal.signal(signal.SIGTERM, lambda _signum, _frame: _stop(workers, 0))  # a lab stops the server by its pid
    for _ in range(max(1, int(config.get("workers", 1)))):
        _start_worker(replayer, sock, workers)
    print(f"replay server: {len(replayer.index.by_key)} URLs on {config['socket']}, {len(workers)} workers")
    sys.stdout.flush()
    os.wait()
    _stop(workers, 1)  # a worker ended on its own: a broken server, stopped whole


if __name__ == "__main__":
    main(sys.argv)
