"""What Chromium's net log (--log-net-log) says about a visit's DNS: the configuration its resolver ran with,
which resolver answered (its built-in client or the system's getaddrinfo), secure DNS, and DoH failures.

The log is JSON: `constants` (event type names, the command line) and `events`. A browser killed before
it closed the log leaves the last event line unterminated; the complete lines before it are read.
"""

from __future__ import annotations

import gc
import ipaddress
import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO
from urllib.parse import urlsplit

#: net/base/net_error_list.h: certificate errors are -200 to -299.
CERT_ERRORS = range(-299, -199)
#: net/dns/public/secure_dns_mode.h
SECURE_DNS_MODES = {0: "off", 1: "automatic", 2: "secure"}
#: How a socket pool group of the DoH server's connections ends, e.g.
#: "dns_bootstrap/pm/https://near.dns.lab.test <null (dns over https)>".
DOH_GROUP = "(dns over https)"
#: net/log/net_log_event_type.h's phases: an event that begins something (a request, a job).
PHASE_BEGIN = 1
#: The names Chromium 156 asks on every start with the harness's quiet switches (seen in a replay lab: sign-in,
#: extension and component updates), whatever the page: `Chromium.own_names`.
CHROMIUM_OWN_NAMES = frozenset({"accounts.google.com", "clients2.google.com", "update.googleapis.com"})


@dataclass
class NetLogDns:
    """The DNS facts of one visit's net log."""

    config: dict = field(default_factory=dict)  # the last DNS_CONFIG_CHANGED: nameservers, doh_config, mode
    command_line: str = ""
    #: lookups answered, by resolver: "built-in" (Do53), "built-in-secure" (DoH), "system" (getaddrinfo)
    answered: Counter = field(default_factory=Counter)
    query_types: set[str] = field(default_factory=set)  # record types the resolver asked for
    secure_modes: set[str] = field(default_factory=set)  # the secure DNS mode of each resolution job
    doh_cert_errors: list[str] = field(default_factory=list)  # net errors of DoH requests that failed on a certificate
    #: The names the browser asks by itself (`Browser.own_names`), and how many of its lookups of them began before
    #: the first lookup of any other name (the page's): through an encrypted arm they open its connection first.
    own_names: frozenset[str] = frozenset()
    own_lookups_before_page: int = 0
    other_lookups: int = 0

    def settings(self, names: dict[str, str]) -> dict[str, object]:
        """The values of the study's settings ``names`` (name -> kind) as the running browser shows them."""
        out: dict[str, object] = {}
        for name, kind in names.items():
            if name == "AsyncDns":
                out[name] = bool(self.config.get("can_use_insecure_dns_transactions"))
            elif name == "UseDnsHttpsSvcb":
                out[name] = "HTTPS" in self.query_types
            elif kind == "feature":
                out[name] = _feature(self.command_line, name)
            elif kind == "switch":
                out[name] = f"--{name}" in self.command_line.split()
        return out

    def summary(self) -> dict:
        """What a visit record keeps: the resolver path, the secure DNS mode, the servers it was configured with."""
        return {
            "resolver_path": dict(self.answered),
            "secure_dns_modes": sorted(self.secure_modes),
            "config_secure_dns_mode": SECURE_DNS_MODES.get(self.config.get("secure_dns_mode", -1)),
            "nameservers": self.config.get("nameservers"),
            "doh_templates": [s.get("template") for s in self.config.get("doh_config", {}).get("servers", [])],
            "own_lookups_before_page": self.own_lookups_before_page if self.own_names else None,
        }


def read_netlog(path: Path, since: int = 0, config: dict | None = None, until: int | None = None) -> NetLogDns | None:
    """The DNS facts of the net log at ``path``; None if there is none (the browser never started).

    A browser that serves many visits reads each visit's part: its events from byte ``since`` on (the log's size
    when the visit began; a line cut there belongs to the visit before), and the resolver's ``config`` as the
    last part left it, since the log says it only when it changes; up to byte ``until`` (`load_netlog`)."""
    return netlog_dns(load_netlog(path, since, until), config)


def load_netlog(path: Path, since: int = 0, until: int | None = None) -> dict | None:
    """The net log at ``path`` parsed: its constants and its events from byte ``since`` on (see `read_netlog`),
    up to byte ``until`` if given (a line cut there is left out); None if there is none. Only the constants and
    the part from ``since`` are read: a browser's log grows with every visit of its life."""
    try:
        with open(path, "rb") as f:
            head = _head(f, since) if since else None
            if head is None:  # the whole log (or its events begin after ``since``: all of them are the visit's)
                f.seek(0)
                return _parse(f.read(-1 if until is None else until).decode(errors="replace"))
            f.seek(since - 1)
            rest = f.read(-1 if until is None else until - since + 1)
    except OSError:
        return None
    if rest[:1] == b"\n":  # the part begins with a line
        rest = rest[1:]
    else:  # a line cut at ``since`` belongs to the visit before
        rest = rest[rest.find(b"\n") + 1 :] if b"\n" in rest else b""
    return _parse((head + rest).decode(errors="replace"))


def _head(f: BinaryIO, before: int, chunk: int = 1 << 16) -> bytes | None:
    """The log's bytes up to the end of the line that opens its events array, if that ends before byte
    ``before``; None otherwise."""
    data, events = b"", -1
    while len(data) < before:
        block = f.read(min(chunk, before - len(data)))
        if not block:
            break
        data += block
        if events < 0:  # searched from the block before's last bytes: the word may span two blocks
            events = data.find(b'"events"', max(0, len(data) - len(block) - 8))
        end = data.find(b"\n", events) if events >= 0 else -1
        if end >= 0:
            return data[: end + 1] if end < before else None
    return None


def netlog_dns(
    data: dict | None, config: dict | None = None, own_names: frozenset[str] = frozenset()
) -> NetLogDns | None:
    """The DNS facts of a parsed net log (`load_netlog`), the resolver's ``config`` as the part before left it;
    ``own_names``: the names the browser asks by itself."""
    if data is None:
        return None
    constants = data.get("constants", {})
    names = {v: k for k, v in constants.get("logEventTypes", {}).items()}
    errors = {v: k for k, v in constants.get("netError", {}).items()}
    command_line = constants.get("clientInfo", {}).get("command_line", "")
    found = NetLogDns(command_line=command_line, config=config or {}, own_names=own_names)
    doh_sources: set[int] = set()
    for event in data.get("events", []):
        _take(found, names.get(event.get("type"), ""), event, doh_sources, errors)
    return found


def _take(found: NetLogDns, name: str, event: dict, doh_sources: set[int], errors: dict) -> None:
    params, source = event.get("params") or {}, int((event.get("source") or {}).get("id", -1))
    if name == "DNS_CONFIG_CHANGED":
        found.config = params
    elif name == "HOST_RESOLVER_MANAGER_JOB" and "secure_dns_mode" in params:
        found.secure_modes.add(SECURE_DNS_MODES.get(params["secure_dns_mode"], str(params["secure_dns_mode"])))
        found.query_types.update(params.get("dns_query_types", []))
    elif name == "HOST_RESOLVER_DNS_TASK" and params.get("secure"):  # a DoH task began on this job
        doh_sources.add(source)
    elif name == "HOST_RESOLVER_DNS_TASK" and params.get("results"):
        found.answered["built-in-secure" if source in doh_sources else "built-in"] += 1
    elif name == "HOST_RESOLVER_SYSTEM_TASK" and event.get("phase") == 2 and "net_error" not in params:
        found.answered["system"] += 1
    elif name == "HOST_RESOLVER_MANAGER_REQUEST" and event.get("phase") == PHASE_BEGIN and "host" in params:
        _count_lookup(found, str(params["host"]))
    elif name == "DOH_URL_REQUEST" or DOH_GROUP in str(params.get("group_id", "")):
        doh_sources.add(source)  # a DoH request, or a socket pool group or connect job of the DoH server's
    if source in doh_sources and params.get("net_error") in CERT_ERRORS:
        found.doh_cert_errors.append(errors.get(params["net_error"], str(params["net_error"])))


def _count_lookup(found: NetLogDns, host: str) -> None:
    """A lookup begun: of one of the browser's own names before any other name, or of another name; not of an
    address (the DoH server's, which the host-resolver rule gives: no query). The host is as the request names
    it ("https://accounts.google.com", "http://clients2.google.com:80", "https://198.18.221.53")."""
    name = urlsplit(host if "://" in host else f"//{host}").hostname or ""  # "//" so "[::1]:443" reads as a host
    try:
        ipaddress.ip_address(name)
        return
    except ValueError:
        pass
    if name not in found.own_names:
        found.other_lookups += 1
    elif not found.other_lookups:
        found.own_lookups_before_page += 1


def _feature(command_line: str, name: str) -> bool | None:
    """Whether the command line enables (True) or disables (False) feature ``name``; None: it names it nowhere."""
    for arg in command_line.split():
        for flag, value in (("--enable-features=", True), ("--disable-features=", False)):
            if arg.startswith(flag) and name in arg[len(flag) :].split(","):
                return value
    return None


def _parse(text: str) -> dict | None:
    """The log's JSON, its cyclic garbage collector paused: a visit's part is some 10,000 events, whose dicts set off
    collections of the whole heap that doubled the parse's mean time (0.05 s against 0.025 s, 2026-11-29); they
    hold no cycles, and the collector runs again after."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _parse_json(text)
    finally:
        if was_enabled:
            gc.enable()


def _parse_json(text: str) -> dict | None:
    if text.rstrip().endswith("}"):  # a closed log; a running one ends in an event's "},"
        try:
            return json.loads(text)
        except json.JSONDecodeError:
            pass
    # Killed mid-log: keep the complete event lines ("{...},") and close the array and object.
    lines = text.splitlines()
    while lines and not lines[-1].rstrip().endswith("},"):
        lines.pop()
    if not lines:
        return None
    try:
        return json.loads("\n".join(lines).rstrip().rstrip(",") + "]}")
    except json.JSONDecodeError:
        return None
