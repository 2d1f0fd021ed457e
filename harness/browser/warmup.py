"""The warm-up of a reused browser: one page from a server on the client's loopback, before its first visit.

A browser's first page pays for what later pages find done: the content
process, the parser, style, script engine, image decoders and fonts used for
the first time, TLS and HTTP/2 set up, the browser's code for each request
run for the first times (docs/visit.md, "A browser's first page").
A reused browser loads this page right after its start, so that its first
measured visit is like its later ones. The page comes from an nginx the
harness starts in the client namespace, as the browser account, on
127.0.0.1 (a numeric URL: no name to resolve, nothing for a visit's counters
or the resolver to see), over TLS and HTTP/2 with a certificate of its own,
issued by a CA made for this server alone whose key is never written
(nothing else can be signed by it). The browser is told to trust that CA
(`WarmupServer.ca_der`); the page is loaded in a user context of its own,
removed after it, through WebDriver BiDi alone, so every browser that
speaks BiDi warms the same way (`warm_up`).
"""

from __future__ import annotations

import base64
import hashlib
import os
import signal
import socket
import struct
import subprocess
import time
import zlib
from dataclasses import asdict, dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import serialization

from harness import netns
from harness.accounts import Account
from harness.browser.bidi import BidiEventLog
from harness.lab.ca import CertificateAuthority, new_key, write_key

#: How long the warm-up page may take, from the tab's creation to its tab's removal.
WARM_UP_TIMEOUT_S = 15.0
#: Requests the page's script makes after its own (images, stylesheets, scripts, fetches in turn): a page makes
#: many (the synthetic google.com 72), and the browser's per-request code (and Firefox's request recorder) runs
#: faster once it has run often. In probes a reused Firefox's first visit loaded 10 % slower than its later ones
#: after a warm-up page of 6 requests, 2-5 % after one of 206 (docs/visit.md, "A browser's first page").
REQUESTS = 200
#: What the record calls the page (its URL changes with the port).
PAGE = f"loopback HTTPS/HTTP2 page: HTML parser, CSS, script, PNG and SVG images, a web font, {REQUESTS} requests"

_HTML = """<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>dnsstudy warm-up</title>
<link rel="stylesheet" href="style.css"><script src="app.js" defer></script></head>
<body><header><h1>warm-up</h1><nav><a href="#a">a</a> <a href="#b">b</a></nav></header>
<main><section id="a"><p>The quick brown fox jumps over the lazy dog.</p><img src="image.png" alt="png">
<img src="image.svg" alt="svg"></section><section id="b"><table><tr><th>x</th><td>1</td></tr></table>
<form><input name="q" value="text"><button type="button">go</button></form></section></main></body></html>
"""
_CSS = """@font-face { font-family: "WarmUp"; src: url("font.ttf"); }
body { font-family: "WarmUp", sans-serif; display: grid; grid-template-columns: 1fr 3fr; gap: 1em; }
header { display: flex; justify-content: space-between; transform: rotate(0.5deg); }
section:nth-child(odd) p::first-letter { font-size: 200%; color: rgb(200 30 30 / 80%); }
img { width: 32px; height: 32px; border-radius: 4px; box-shadow: 0 0 4px #888; }
@media (min-width: 100px) { main { columns: 2; } }
"""
#: The page's script: some of what a page's scripts do (JSON, regular expressions, sorting, the DOM), then
#: `window.warmUp`: a promise of one line saying what was used, resolved once fonts and images are ready.
_JS = """"use strict";
const data = JSON.parse(JSON.stringify(Array.from({length: 500}, (_, i) => ({i, s: "item-" + (i * 7919 % 500)}))));
data.sort((a, b) => a.s.localeCompare(b.s));
const list = document.createElement("ul");
for (const d of data.filter(d => /-[0-9]*7$/.test(d.s))) {
  const li = document.createElement("li"); li.textContent = d.s; list.appendChild(li);
}
document.querySelector("main").appendChild(list);
const images = Array.from(document.images);
const load = (element, done) => new Promise((resolve, reject) => {
  element.onload = () => resolve(done(element)); element.onerror = reject;
});
const request = i => {
  const url = `?n=${i}`;
  if (i % 4 === 0) return fetch("style.css" + url).then(r => r.text());
  if (i % 4 === 1) { const img = new Image(); img.src = "image.png" + url; return img.decode(); }
  const element = document.createElement(i % 4 === 2 ? "script" : "link");
  if (i % 4 === 2) element.src = "extra.js" + url;
  else { element.rel = "stylesheet"; element.href = "style.css" + url; }
  const loaded = load(element, e => e.remove());
  document.head.appendChild(element);
  return loaded;
};
const requests = Promise.allSettled(Array.from({length: REQUESTS}, (_, i) => request(i)));
window.warmUp = Promise.all([document.fonts.load('16px "WarmUp"'), ...images.map(img => img.decode())])
  .then(async ([faces]) => {
    const made = (await requests).filter(r => r.status === "fulfilled").length;
    const nav = performance.getEntriesByType("navigation")[0];
    return `ok protocol=${nav.nextHopProtocol} fonts=${faces.length} images=${images.length} requests=${made} ` +
      `items=${list.children.length} height=${document.body.getBoundingClientRect().height > 0}`;
  });
"""
_SVG = """<svg xmlns="http://www.w3.org/2000/svg" width="32" height="32" viewBox="0 0 32 32">
<defs><linearGradient id="g"><stop offset="0" stop-color="#36c"/><stop offset="1" stop-color="#c63"/>
</linearGradient></defs>
<circle cx="16" cy="16" r="14" fill="url(#g)"/><path d="M8 16h16M16 8v16" stroke="#fff" stroke-width="2"/></svg>
"""


@dataclass
class BrowserWarmup:
    """What a reused browser's warm-up was, how long it took, and whether it succeeded (the record's
    `browser_warmup`)."""

    page: str
    seconds: float
    ok: bool
    detail: str  # what the page reported (e.g. "ok protocol=h2 fonts=1 images=2 ..."), or why it failed

    def to_dict(self) -> dict:
        return asdict(self)


class WarmupServer:
    """nginx on 127.0.0.1 of ``namespace``, as ``account``, serving the warm-up page from ``work`` (a directory
    of the account's) over TLS and HTTP/2; a context manager: started on entry, killed on exit."""

    def __init__(self, namespace: str | None, account: Account, work: Path):
        self.namespace, self.account = namespace, account
        self.dir = work / "warm-up"
        self.port = 0
        self._proc: subprocess.Popen | None = None
        ca = CertificateAuthority.create("dnsstudy warm-up (key discarded)")
        key = new_key()
        (self.dir / "site").mkdir(parents=True)
        (self.dir / "cert.pem").write_bytes(ca.issue([], ["127.0.0.1"], key))
        write_key(key, self.dir / "key.pem")
        #: The CA the browser must trust, DER; its key goes with ``ca`` (never written).
        self.ca_der = ca.cert.public_bytes(serialization.Encoding.DER)
        self.spki_sha256 = _spki_sha256(x509.load_pem_x509_certificate((self.dir / "cert.pem").read_bytes()))
        _write_site(self.dir / "site")

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}/"

    @property
    def ca_base64(self) -> str:
        return base64.b64encode(self.ca_der).decode()

    def __enter__(self) -> WarmupServer:
        with netns.entered(self.namespace):
            self.port = netns.free_tcp_port()
        (self.dir / "nginx.conf").write_text(_nginx_config(self.dir, self.port))
        self.account.give(self.dir)
        argv = self.account.run_as(
            [
                "/usr/sbin/nginx",
                "-p",
                str(self.dir),
                "-e",
                str(self.dir / "error.log"),
                "-c",
                str(self.dir / "nginx.conf"),
            ]
        )
        if self.namespace:
            argv = netns.command(self.namespace, argv)
        self._proc = subprocess.Popen(
            argv,
            env={"PATH": "/usr/sbin:/usr/bin:/bin", "LANG": "C.UTF-8"},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        self._await_listening()
        return self

    def _await_listening(self, limit: float = 5.0) -> None:
        assert self._proc is not None
        deadline = time.monotonic() + limit
        with netns.entered(self.namespace):
            while time.monotonic() < deadline:
                if self._proc.poll() is not None:
                    raise RuntimeError(f"the warm-up server (nginx) exited: {self._error_log()}")
                try:
                    socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                    return
                except OSError:
                    time.sleep(0.01)
        raise RuntimeError(f"the warm-up server (nginx) did not listen within {limit:g} s")

    def _error_log(self) -> str:
        try:
            lines = (self.dir / "error.log").read_text().strip().splitlines()
        except OSError:
            return "no error log"
        return lines[-1] if lines else "no message"

    def __exit__(self, *exc: object) -> None:
        if self._proc is not None:
            try:
                os.killpg(self._proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            self._proc.wait(timeout=5)
            self._proc = None


def warm_up(bidi: BidiEventLog, server: WarmupServer, timeout: float = WARM_UP_TIMEOUT_S) -> BrowserWarmup:
    """Load ``server``'s page in a new user context and tab of the browser behind ``bidi``, wait until its fonts
    and images are ready, then remove the tab and the user context; never raises (a failure is the record's).

    Works in any browser that speaks WebDriver BiDi; the browser must trust ``server.ca_der`` first."""
    t = time.monotonic()
    opened: dict[str, str] = {}
    try:
        opened["userContext"] = bidi.command("browser.createUserContext", {}, timeout)["userContext"]
        created = bidi.command("browsingContext.create", {"type": "tab", "userContext": opened["userContext"]})
        opened["context"] = created["context"]
        bidi.command("browsingContext.navigate", {**_in(opened), "url": server.url, "wait": "complete"}, timeout)
        expression = {"expression": "window.warmUp", "target": _in(opened), "awaitPromise": True}
        detail = _page_said(bidi.command("script.evaluate", expression, timeout))
    except Exception as exc:  # the browser's or the server's failure: the harness's, recorded
        detail = f"{type(exc).__name__}: {_first_line(exc)}"
    try:
        if "context" in opened:
            bidi.command("browsingContext.close", _in(opened))
        if "userContext" in opened:
            bidi.command("browser.removeUserContext", {"userContext": opened["userContext"]})
    except Exception as exc:
        detail = f"closing the warm-up's tab: {type(exc).__name__}: {_first_line(exc)} ({detail})"
    bidi.take()  # the warm-up's events are no visit's
    return BrowserWarmup(PAGE, round(time.monotonic() - t, 3), warmed(detail), detail)


def warmed(detail: str) -> bool:
    """Whether the page's line says it used all it should: HTTP/2, the font, both images, every request, its
    script's list."""
    said = dict(part.split("=", 1) for part in detail.split()[1:] if "=" in part) if detail.startswith("ok ") else {}
    return (
        said.get("protocol") == "h2"
        and said.get("fonts", "0") != "0"
        and said.get("images") == "2"
        and said.get("requests") == str(REQUESTS)
        and said.get("items", "0") != "0"
    )


def _in(opened: dict[str, str]) -> dict[str, str]:
    return {"context": opened["context"]}


def _page_said(said: dict) -> str:
    """The page's own line, or why there is none (an error page has no `window.warmUp`)."""
    if said.get("type") == "exception":
        return f"the page's script failed: {said.get('exceptionDetails', {}).get('text', '')}"
    result = said.get("result", {})
    return result.get("value", "") if result.get("type") == "string" else f"the page said nothing ({result})"


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else ""


def _write_site(site: Path) -> None:
    """The page and what it uses; the font is the system's sans-serif (fontconfig, which both browsers need)."""
    (site / "index.html").write_text(_HTML)
    (site / "style.css").write_text(_CSS)
    (site / "app.js").write_text(_JS.replace("REQUESTS", str(REQUESTS)))
    (site / "extra.js").write_text("window.extraRuns = (window.extraRuns || 0) + 1;\n")
    (site / "image.svg").write_text(_SVG)
    (site / "image.png").write_bytes(_png(32, 32))
    (site / "font.ttf").symlink_to(_system_font())


def _system_font() -> Path:
    """The file fontconfig gives for sans-serif (a TrueType or OpenType font)."""
    found = subprocess.run(
        ["fc-match", "--format=%{file}", "sans-serif"], capture_output=True, text=True, timeout=10
    ).stdout.strip()
    if not found.endswith((".ttf", ".otf")) or not Path(found).exists():
        raise RuntimeError(f"no TrueType or OpenType sans-serif font for the warm-up page (fc-match said {found!r})")
    return Path(found)


def _png(width: int, height: int) -> bytes:
    """A gradient, as an RGB PNG (the decoder is what the page exercises)."""
    rows = b"".join(
        b"\x00" + bytes(v for x in range(width) for v in (x * 8 % 256, y * 8 % 256, 128)) for y in range(height)
    )

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b"")


def _spki_sha256(cert: x509.Certificate) -> str:
    """base64 of the SHA-256 of the certificate's public key (what Chromium's --ignore-certificate-errors-spki-list
    takes)."""
    spki = cert.public_key().public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo)
    return base64.b64encode(hashlib.sha256(spki).digest()).decode()


def _nginx_config(directory: Path, port: int) -> str:
    """One process (no master), as the account that starts it, HTTPS and HTTP/2 on 127.0.0.1:``port`` only."""
    temp = "".join(
        f"  {kind}_temp_path {directory}/tmp-{kind};\n" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")
    )
    return (
        f"daemon off;\nmaster_process off;\nworker_processes 1;\npid {directory}/nginx.pid;\n"
        f"error_log {directory}/error.log warn;\nevents {{ worker_connections 64; }}\nhttp {{\n"
        "  access_log off;\n"
        + temp
        + "  types { text/html html; text/css css; text/javascript js; image/png png; image/svg+xml svg; "
        "font/ttf ttf; }\n"
        '  add_header Cache-Control "no-store" always;\n'
        "  server {\n"
        f"    listen 127.0.0.1:{port} ssl http2;\n"
        f"    ssl_certificate {directory}/cert.pem;\n    ssl_certificate_key {directory}/key.pem;\n"
        f"    ssl_protocols TLSv1.2 TLSv1.3;\n    root {directory}/site;\n  }}\n}}\n"
    )
