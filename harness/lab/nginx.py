"""nginx configuration: every lab hostname over HTTPS with HTTP/2 (and, with the HTTP/3 front, its upstream)."""

from __future__ import annotations

from pathlib import Path

from harness.lab.h3front import ALT_SVC, UPSTREAM
from harness.lab.zones import LAB_ZONE, ZoneData

#: nginx's worker processes, one per core of the machine this was measured on; the replay server runs as many,
#: so a replayed page meets a server of the same parallelism as the original.
WORKER_PROCESSES = 2
#: The TLS versions every lab web server offers. Said, not left to nginx: Debian's nginx 1.22 offers TLSv1 to
#: TLSv1.2 by default (TLSv1.3 only from 1.23.4), and a replay front on that default gave Firefox TLS 1.2 where
#: the original had given 1.3, which made google.com's replay load 11 % faster than the original (issue 42).
SSL_PROTOCOLS = "TLSv1.2 TLSv1.3"
#: Paths of the lab's own host (www.lab.test) that leave state in a browser, which no study page uses: the lab
#: tests show that a reused browser's next visit has none of it (tests/test_reuse.py). Each says one
#: thing besides the page: `hsts` an HSTS policy, `cached` a cacheable answer (the only one the lab serves:
#: everything else is no-store), `alt-svc` an HTTP/3 alternative on the same host's port 443, where nothing
#: listens on UDP (a browser that uses the alternative sends QUIC datagrams there, then falls back to TCP).
STATE_PREFIX = "/dnsstudy-state/"
STATE_HEADERS = {
    "hsts": 'Strict-Transport-Security "max-age=3600"',
    "cached": 'Cache-Control "max-age=3600"',
    "alt-svc": "Alt-Svc 'h3=\":443\"; ma=3600'",
}
#: Every visit starts a fresh browser; no cache hides a lookup.
CACHE_CONTROL = "no-store"
MIME_TYPES = "/etc/nginx/mime.types"


def nginx_config(
    zones: ZoneData,
    run: Path,
    web_root: Path,
    certs: dict[str, Path],
    web_key: Path,
    badcert: tuple[str, Path, Path],
    http3: bool = False,
) -> str:
    """One server block per zone, on the address that zone's names resolve to.

    ``certs`` maps a zone to its certificate (the zone and *.zone); all web
    certificates share ``web_key``. ``badcert`` is (address, cert, key) of a
    server whose certificate comes from a CA no client trusts. ``http3``: the
    HTTP/3 front runs (harness/lab/h3front.py): every zone also listens on its
    loopback upstream, and every answer carries ``Alt-Svc`` but those of a zone
    whose HTTPS kind is "none" (harness/lab/svcb.py). With ECH in the zones
    the front also takes TCP 443 of the web addresses (it decrypts ECH, nginx
    cannot): the zones then listen on the upstream only.
    """
    out = _head(run)
    if http3:
        out.append(f"  add_header Alt-Svc '{ALT_SVC}' always;")
    front_takes_tcp = http3 and bool(zones.ech)
    for zone in zones.records:
        addresses = _served_addresses(zones, zone)
        if addresses and zone in certs:
            silent = http3 and zone in silent_zones(zones)
            listens = [] if front_takes_tcp else addresses
            out.append(_zone_server(zone, listens, web_root, certs[zone], web_key, http3, silent))
    out.append(_badcert_server(badcert, web_root))
    out.append("}")
    return "\n".join(out) + "\n"


def _head(run: Path) -> list[str]:
    """The main context and the http settings, up to the server blocks (the http block stays open)."""
    tmp = run / "nginx-tmp"
    return [
        "user www-data;",
        f"worker_processes {WORKER_PROCESSES};",
        f"pid {run}/nginx.pid;",
        f"error_log {run}/logs/nginx-error.log warn;",
        "events { worker_connections 8192; }",
        "http {",
        f"  include {MIME_TYPES};",
        "  default_type application/octet-stream;",
        # The last two: the connection's serial number, and "r" if its TLS session was resumed ("." if not).
        '  log_format lab \'$time_iso8601 $remote_addr $ssl_server_name $server_protocol "$request" '
        "$status $body_bytes_sent $request_time $connection $ssl_session_reused';",
        f"  access_log {run}/logs/nginx-access.log lab buffer=64k flush=1s;",
        f"  client_body_temp_path {tmp}/body;",
        f"  proxy_temp_path {tmp}/proxy;",
        f"  fastcgi_temp_path {tmp}/fastcgi;",
        f"  uwsgi_temp_path {tmp}/uwsgi;",
        f"  scgi_temp_path {tmp}/scgi;",
        "  sendfile on;",
        "  server_tokens off;",
        "  server_names_hash_max_size 65536;",
        "  server_names_hash_bucket_size 128;",
        f"  ssl_protocols {SSL_PROTOCOLS};",
        f'  add_header Cache-Control "{CACHE_CONTROL}" always;',
        "  keepalive_timeout 65s;",
    ]


def silent_zones(zones: ZoneData) -> frozenset[str]:
    """The zones that do not announce HTTP/3: their sites' HTTPS kind is "none" (harness/lab/svcb.py)."""
    return frozenset(zone for zone, kind in zones.https.items() if kind == "none")


def _served_addresses(zones: ZoneData, zone: str) -> list[str]:
    """The web addresses the zone's names resolve to, sorted."""
    names = zones.records[zone]
    return sorted(set(names.values()) & set(_web_addresses(zones, zone)))


def _zone_server(
    zone: str, addresses: list[str], web_root: Path, cert: Path, key: Path, http3: bool, silent: bool = False
) -> str:
    """The server block of one zone (the zone and *.zone), listening on each of ``addresses`` (and on the
    HTTP/3 front's upstream, where the zone is picked by the Host the front passes on). ``silent``: the zone
    does not announce HTTP/3; an add_header of its own stops nginx inheriting the http block's (Alt-Svc with
    them), so it repeats Cache-Control alone."""
    listens = "".join(f"    listen {a}:443 ssl http2;\n" for a in addresses)
    if http3:
        listens += f"    listen {UPSTREAM[0]}:{UPSTREAM[1]};\n"
    if silent:
        listens += f'    add_header Cache-Control "{CACHE_CONTROL}" always;\n'
    pages = _zone_root(web_root, zone)
    return (
        "  server {\n" + listens + f"    server_name {zone} *.{zone};\n"
        f"    ssl_certificate {cert};\n"
        f"    ssl_certificate_key {key};\n"
        f"    root {pages};\n"
        f"    location /o/ {{ root {web_root}; }}\n" + (_state_locations() if zone == LAB_ZONE else "") + "  }"
    )


def _state_locations() -> str:
    """The lab host's state paths (`STATE_PREFIX`): a small HTML page each, the prefix's own too, and each path's
    header. An `add_header` in a location drops the ones it would inherit: each says no-store again, but `cached`."""

    def page(name: str) -> str:
        return f"default_type text/html; return 200 '<!doctype html><title>dnsstudy state</title><p>{name}';"

    out = f"    location = {STATE_PREFIX} {{ {page('state')} }}\n"
    for name, header in STATE_HEADERS.items():
        keep = "" if name == "cached" else f'add_header Cache-Control "{CACHE_CONTROL}" always; '
        out += f"    location = {STATE_PREFIX}{name} {{ add_header {header} always; {keep}{page(name)} }}\n"
    return out


def _zone_root(web_root: Path, zone: str) -> Path:
    """The `root` of a zone's server block."""
    return web_root / "pages" / zone if zone != LAB_ZONE else web_root / "lab"


def front_files(web_root: Path, zones: list[str], silent: frozenset[str] = frozenset()) -> dict:
    """What the zones' server blocks serve from files, as the HTTP/3 front reads it (h3front/files.go): each
    zone's root, the shared objects (`location /o/`), the MIME types and the headers nginx adds; a ``silent``
    zone (one that does not announce HTTP/3, `_zone_server`) adds Cache-Control alone."""

    def site(zone: str) -> dict:
        root = {"names": [zone, f"*.{zone}"], "root": str(_zone_root(web_root, zone))}
        return root | {"add_headers": [["Cache-Control", CACHE_CONTROL]]} if zone in silent else root

    return {
        "mime_types": MIME_TYPES,
        "sites": [site(zone) for zone in zones],
        "shared": {"/o/": str(web_root)},
        "add_headers": [["Cache-Control", CACHE_CONTROL], ["Alt-Svc", ALT_SVC]],
    }


def _badcert_server(badcert: tuple[str, Path, Path], web_root: Path) -> str:
    """The default server: the badcert address, with a certificate from the untrusted CA."""
    addr, cert, key = badcert
    return (
        "  server {\n"
        f"    listen {addr}:443 ssl http2 default_server;\n"
        "    server_name _;\n"
        f"    ssl_certificate {cert};\n"
        f"    ssl_certificate_key {key};\n"
        f"    root {web_root}/lab;\n"
        "  }"
    )


def _web_addresses(zones: ZoneData, zone: str) -> list[str]:
    # Infrastructure names of lab.test point at resolvers and special hosts;
    # only www.lab.test is a web server.
    if zone == LAB_ZONE:
        return [zones.records[zone][f"www.{LAB_ZONE}"]]
    return list(zones.records[zone].values())
