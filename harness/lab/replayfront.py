"""The replay web's nginx: exact recorded answers from memory, everything else passed to the replay server.

A page's requests come in bursts, and the Python replay server spent about a
millisecond of CPU on each (TLS, HPACK) on the cores the browser needs, so a
replayed page loaded 2-11 % slower than the original (docs/replay.md). Here
nginx, as in the original lab, terminates TLS and HTTP/2 on every replay
address and answers each request that has an exact recorded answer (GET,
status 200, the recorded query string) from memory, with the recorded headers
and, unless waits are off, after the recorded server wait (Lua's non-blocking
sleep, whole milliseconds). Fuzzy matches, misses and every other exchange go
to harness/lab/replayserver.py over a Unix socket, which logs them. Header
values and URLs come from recorded network data: URLs are written into the
map quoted and escaped; bodies go to one file, and headers, content types,
waits and where each body lies to a table, which harness/lab/replayfront.lua
reads at start, one location serving every answer (a location per answer
cost nginx 9 s to start on 30,000: the Lua module's work for each location;
a file per body 0.3-0.8 ms each on this host's disk). An exchange whose URL
or headers cannot be written safely is left to the replay server.
"""

from __future__ import annotations

import re
import string
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from harness.errors import HarnessError
from harness.lab.h3front import ALT_SVC
from harness.lab.nginx import SSL_PROTOCOLS
from harness.replay.archive import Exchange
from harness.replay.matching import ExchangeIndex, body_for, response_headers

#: Debian's dynamic modules: Lua (with its development kit) for the wait, headers-more to drop nginx's own headers.
MODULES = [
    "/usr/lib/nginx/modules/ndk_http_module.so",
    "/usr/lib/nginx/modules/ngx_http_lua_module.so",
    "/usr/lib/nginx/modules/ngx_http_headers_more_filter_module.so",
]
#: nginx's map keeps each key in one hash bucket; a longer URL is answered by the replay server instead.
MAP_BUCKET = 4096
MAX_KEY = MAP_BUCKET - 96
_TOKEN = re.compile(r"^[!#$%&'*+.^_`|~0-9a-z-]+$")
_CONTROL = re.compile(r"[\x00-\x08\x0a-\x1f\x7f]")
_LUA_PLAIN = frozenset(string.ascii_letters + string.digits + "/._-")
_HOSTNAME = re.compile(r"^[a-z0-9_-]+(\.[a-z0-9_-]+)*$")
#: What the replay server answers for a request that failed in the original: nginx then closes without one.
FAILED_STATUS = 599
#: Headers nginx writes itself for a file; the recorded ones replace them.
NGINX_OWN = "Server Last-Modified Accept-Ranges Date"
#: The Lua module that serves each answer (wait, headers, body) from the table `write_answers` writes.
LUA_MODULE = Path(__file__).with_name("replayfront.lua")
#: The bodies nginx holds in memory (all its workers share one copy); what is past it the replay server answers.
MAX_BODIES = 1 << 30
#: The table's field separator (no value `_servable` accepts holds a control character).
SEP = "\x1f"


@dataclass(frozen=True)
class FileAnswer:
    """One exact answer nginx serves itself (its body a slice of the bodies file, held in memory)."""

    number: int
    key: str  # "scheme address host GET /path?query", the map's key
    content_type: str
    headers: list[tuple[str, str]]
    wait_ms: int
    offset: int  # where its body begins in the bodies file
    length: int


def quote(value: str) -> str:
    """``value`` as one double-quoted nginx string, backslashes and quotes escaped (a map's key or value reads
    no variables)."""
    if _CONTROL.search(value):
        raise ValueError(f"control character in {value[:60]!r}")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def lua_string(value: str) -> str:
    """``value`` as a Lua string literal: every byte but letters, digits and ``/._-`` as a decimal escape."""
    return '"' + "".join(chr(b) if chr(b) in _LUA_PLAIN else f"\\{b:03d}" for b in value.encode()) + '"'


def answers_path(run: Path) -> Path:
    """Where `write_answers` writes the table of a run directory."""
    return run / "replay-answers"


def bodies_path(run: Path) -> Path:
    """Where `file_answers` writes the bodies of a run directory."""
    return run / "replay-bodies"


def write_answers(run: Path, answers: list[FileAnswer]) -> Path:
    """The table replayfront.lua reads: a line per answer (number, wait, the body's offset and length, content
    type, headers), fields split by the unit separator."""
    lines = [
        SEP.join(
            [str(a.number), str(a.wait_ms), str(a.offset), str(a.length), a.content_type]
            + [x for kv in a.headers for x in kv]
        )
        for a in answers
    ]
    path = answers_path(run)
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


def file_answers(index: ExchangeIndex, address_of: dict[str, str], run: Path, wait: bool) -> list[FileAnswer]:
    """The exchanges nginx can answer exactly, their bodies written one after another to `bodies_path`.

    The first exchange per (host, method, path, query) answers, as in ExchangeIndex.match.
    """
    with bodies_path(run).open("wb") as bodies:
        return _file_answers(index, address_of, bodies, wait)


def _file_answers(index: ExchangeIndex, address_of: dict[str, str], bodies: BinaryIO, wait: bool) -> list[FileAnswer]:
    answers: list[FileAnswer] = []
    seen: set[str] = set()
    for (host, method, path), candidates in index.by_key.items():
        for query, e, site in candidates:
            target = path + ("?" + query if query else "")
            key = f"{e.scheme} {address_of.get(host, '')} {host} {method} {target}"
            if key in seen:
                continue  # a duplicate: the first answers, here as in the replay server
            seen.add(key)
            if not _servable(e, host, method, key, address_of):
                continue  # the first is the replay server's, and so are its duplicates
            headers = response_headers(e)
            body = body_for(e, site)
            if bodies.tell() + len(body) > MAX_BODIES:
                continue  # past what nginx holds in memory: the replay server's, like its duplicates
            content_type = next((v for k, v in headers if k == "content-type"), "")
            rest = [(k, v) for k, v in headers if k != "content-type"]
            wait_ms = round(e.wait_ms) if wait else 0
            answers.append(FileAnswer(len(answers) + 1, key, content_type, rest, wait_ms, bodies.tell(), len(body)))
            bodies.write(body)
    return answers


def _servable(e: Exchange, host: str, method: str, key: str, address_of: dict[str, str]) -> bool:
    """True when nginx can send the exchange exactly as the replay server would."""
    if method != "GET" or e.status != 200 or e.filled or host not in address_of or len(key.encode()) > MAX_KEY:
        return False
    if _CONTROL.search(key):  # a URL nginx's configuration cannot hold
        return False
    return all(_TOKEN.match(k) and not _CONTROL.search(v) for k, v in response_headers(e))


def require_modules() -> None:
    """Refuse, in one line, a replay without the nginx modules it loads."""
    missing = [m for m in MODULES if not Path(m).exists()]
    if missing:
        raise HarnessError(f"replay web: {', '.join(missing)} missing (bash scripts/setup.sh packages installs them)")


def front_config(run: Path, listen: list[dict], answers: list[FileAnswer], socket: Path, workers: int) -> str:
    """The nginx configuration: per address one server per certificate (HTTP/2 if the address offers it), the
    map of exact answers, one location serving them all (replayfront.lua), and the replay server as the
    fallback."""
    tmp = run / "replay-nginx-tmp"
    out = [f"load_module {m};" for m in MODULES] + [
        "user www-data;",
        f"worker_processes {workers};",
        f"pid {run}/replay-nginx.pid;",
        f"error_log {run}/logs/replay-nginx-error.log warn;",
        "events { worker_connections 8192; }",
        "http {",
        # The last field: the file that answered ("file=" alone: the replay server did).
        '  log_format replay \'$time_iso8601 $remote_addr $host $server_protocol "$request" $status '
        "$body_bytes_sent $request_time $connection file=$replay_object';",
        f"  access_log {run}/logs/replay-nginx-access.log replay buffer=64k flush=1s;",
        *(f"  {kind}_temp_path {tmp}/{kind};" for kind in ("client_body", "proxy", "fastcgi", "uwsgi", "scgi")),
        # The TLS versions the original lab's nginx offers (nginx 1.22's default has no TLSv1.3).
        f"  ssl_protocols {SSL_PROTOCOLS};",
        "  server_tokens off; etag off; if_modified_since off; max_ranges 0;",
        f'  lua_package_path "/usr/share/lua/5.1/?.lua;{LUA_MODULE.parent}/?.lua;;";',
        "  lua_transform_underscores_in_response_headers off;",  # a recorded name as recorded
        f"  init_by_lua_block {{ require('replayfront').load({lua_string(str(answers_path(run)))}, "
        f"{lua_string(str(bodies_path(run)))}) }}",
        f"  map_hash_bucket_size {MAP_BUCKET}; map_hash_max_size {max(2048, 2 * len(answers))};",
        '  map "$scheme $server_addr $host $request_method $request_uri" $replay_object {',
        '    default "";',
        *(f"    {quote(a.key)} {a.number};" for a in answers),
        "  }",
        f"  upstream replay_server {{ server unix:{socket}; keepalive 32; }}",
    ]
    by_address: dict[str, list[FileAnswer]] = {}
    for a in answers:
        by_address.setdefault(a.key.split(" ")[1], []).append(a)
    for spec in listen:
        out += _servers(spec, by_address.get(spec["address"], []))
    out.append("}")
    return "\n".join(out) + "\n"


def _servers(spec: dict, answers: list[FileAnswer]) -> list[str]:
    """One address: a server per certificate (chosen by SNI, the first the default), each with the exact answers
    of its hostnames (the default also those of hostnames no server names); the rest to the replay server."""
    servers = spec["servers"]
    named = {host: i for i, server in enumerate(servers) for host in server["names"] if _HOSTNAME.match(host)}
    blocks = []
    for i, server in enumerate(servers):
        mine = [a for a in answers if named.get(a.key.split(" ")[2], 0) == i]
        blocks.append(_server(spec, server, sorted(h for h, j in named.items() if j == i), i == 0, mine))
    return blocks


def _server(spec: dict, server: dict, names: list[str], default: bool, answers: list[FileAnswer]) -> str:
    """One certificate's server: TLS, its hostnames' exact answers, the rest to the replay server."""
    http2 = " http2" if "h2" in spec["alpn"] else ""
    default_server = " default_server" if default else ""
    lines = [
        "  server {",
        *(
            [f"    listen {spec['address']}:{spec.get('port', 443)} ssl{http2}{default_server};"]
            if spec.get("tls", True)
            else []
        ),
        *([f"    listen {spec['address']}:{spec.get('plain_port', 80)}{default_server};"] if spec.get("plain") else []),
        f"    server_name {' '.join(names) or '_'};",
        f"    ssl_certificate {server['cert']};",
        f"    ssl_certificate_key {server['key']};",
        # HTTP/3 announced where the address offers it (recorded Alt-Svc values are dropped: they name the
        # original's alternatives, not the lab's)
        *([f"    add_header Alt-Svc '{ALT_SVC}' always;"] if spec.get("alt_svc") else []),
        "    if ($replay_object) { rewrite ^ /.replay/$replay_object last; }",
        "    location / {",
        "      proxy_pass http://replay_server; proxy_http_version 1.1; proxy_buffering off;",
        '      proxy_set_header Connection ""; proxy_set_header Host $host; proxy_set_header X-Scheme $scheme;',
        "      proxy_pass_header Server; proxy_pass_header Date;",
        # A request that failed in the original (status 0) fails here too: no answer, the connection (HTTP/1.1)
        # or the stream (HTTP/2) closed, never a made-up 5xx.
        f"      proxy_intercept_errors on; error_page {FAILED_STATUS} = @failed;",
        "    }",
        "    location @failed { return 444; }",
    ]
    if answers:  # every exact answer's file, its wait and headers from the table (replayfront.lua)
        lines += [
            '    location ^~ /.replay/ { internal; default_type "";',
            "      content_by_lua_block { require('replayfront').serve() }",
            f"      more_clear_headers {NGINX_OWN};",
            "      header_filter_by_lua_block { require('replayfront').headers() }",
            "    }",
        ]
    lines.append("  }")
    return "\n".join(lines)
