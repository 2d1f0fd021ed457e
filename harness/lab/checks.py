"""Service checks run from inside the client namespace, with real clients.

Run as `ip netns exec <client> python -I /abs/path/harness/lab/checks.py
SPEC.json USER`, so name resolution goes through the namespace's own
resolv.conf, as a browser there would. Prints one JSON list of check results.
It starts as root, so it is started by absolute path in isolated mode (-I,
which implies -P): the working directory is never on sys.path, and `harness`
is imported from the installed package, not from whatever `harness/` the
caller's directory holds. Once it has read its spec it becomes USER (the
helpers' account, harness/lab/privileges.py) for good, before it sends a
query or parses an answer; what its clients import on first use (httpx's
transports) the account reads from the project's environment, as mitmdump
reads its own (docs/security.md).
"""

from __future__ import annotations

import base64
import json
import os
import pwd
import socket
import ssl
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import partial
from pathlib import Path

import dns.message
import dns.query
import dns.rcode
import dns.rdatatype
import httpx

from harness.lab.privileges import drop_privileges
from harness.paths import BUILD_BIN
from harness.protocols import DOH3, DOQ


@dataclass
class CheckResult:
    """One check: what was tried, whether it worked, and what was seen."""

    name: str
    ok: bool
    detail: str
    ms: float


def _answer(response: dns.message.Message) -> str:
    rcode = dns.rcode.to_text(response.rcode())
    addrs = [rr.address for rrset in response.answer for rr in rrset if rrset.rdtype == dns.rdatatype.A]
    return f"{rcode} {','.join(addrs)}".strip()


def _expect(response: dns.message.Message, expected: str | None) -> tuple[bool, str]:
    seen = _answer(response)
    if expected is None:
        return response.rcode() == dns.rcode.NXDOMAIN, seen
    return seen == f"NOERROR {expected}", seen


def do53(server: str, name: str, expected: str | None, tcp: bool) -> tuple[bool, str]:
    q = dns.message.make_query(name, "A")
    r = (dns.query.tcp if tcp else dns.query.udp)(q, server, timeout=2)
    return _expect(r, expected)


def dot(server: str, tls_name: str, ca: str, name: str, expected: str | None) -> tuple[bool, str]:
    ctx = ssl.create_default_context(cafile=ca)
    q = dns.message.make_query(name, "A")
    r = dns.query.tls(q, server, timeout=2, ssl_context=ctx, server_hostname=tls_name)
    return _expect(r, expected)


def doh(url: str, ca: str, name: str, expected: str | None, post: bool) -> tuple[bool, str]:
    wire = dns.message.make_query(name, "A", id=0).to_wire()
    with httpx.Client(http2=True, verify=ca, timeout=3) as client:
        if post:
            resp = client.post(url, content=wire, headers={"content-type": "application/dns-message"})
        else:
            b64 = base64.urlsafe_b64encode(wire).rstrip(b"=").decode()
            resp = client.get(url, params={"dns": b64}, headers={"accept": "application/dns-message"})
    ok, seen = _expect(dns.message.from_wire(resp.content), expected)
    return ok and resp.http_version == "HTTP/2", f"{resp.http_version} {resp.status_code} {seen}"


def https(url: str, ca: str) -> tuple[bool, str]:
    with httpx.Client(http2=True, verify=ca, timeout=3) as client:
        resp = client.get(url)
    return (
        resp.status_code == 200 and resp.http_version == "HTTP/2",
        f"{resp.http_version} {resp.status_code} {len(resp.content)} B",
    )


def replayed(sample: dict, ca: str) -> tuple[bool, str]:
    """One answer of a replayed web as the archive recorded it: its status, protocol and bytes."""
    with httpx.Client(http2=True, verify=ca, timeout=5) as client:
        resp = client.get(sample["url"])
        resp.read()
    seen = f"{resp.http_version} {resp.status_code} {resp.num_bytes_downloaded} B"
    want = f"{sample['http_version']} {sample['status']}" + (
        f" {sample['bytes']} B" if sample["bytes"] is not None else ""
    )
    ok = seen == want if sample["bytes"] is not None else seen.startswith(want + " ")
    return ok, seen if ok else f"{seen}, recorded {want}"


def http3(url: str, ca: str, status: int = 200, size: int | None = None) -> tuple[bool, str]:
    """One answer over HTTP/3 through the project's h3fetch (httpx has no HTTP/3): ``status`` and, if given,
    ``size`` bytes of body as sent."""
    argv = [str(_program("h3fetch")), "-ca", ca, "-answer", url]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=10)
    if proc.returncode != 0:
        return False, (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[0]
    got = json.loads(proc.stdout)
    if got.get("error"):
        return False, got["error"]
    seen = f"{got['proto']} {got['status']} {got.get('bytes', 0)} B"
    want = f"HTTP/3.0 {status}" + (f" {size} B" if size is not None else "")
    ok = seen == want if size is not None else seen.startswith(want + " ")
    return ok, seen if ok else f"{seen}, expected {want}"


def quic(protocol: str, address: str, endpoint: str, tls_name: str, ca: str, name: str) -> tuple[bool, str]:
    """DoQ or DoH3 through the project's quictimer (dnspython's QUIC needs aioquic, which we do not ship)."""
    argv = [
        str(_program("quictimer")),
        "--protocol",
        protocol,
        "--server",
        address,
        "--tls-name",
        tls_name,
        "--ca-file",
        ca,
        "--timeout-ms",
        "2000",
    ]
    argv += ["--port", endpoint.rsplit(":", 1)[1]] if protocol == DOQ.name else ["--url", endpoint]
    proc = subprocess.run(argv, input=f"{name}\n", capture_output=True, text=True, timeout=10)
    if proc.returncode != 0:
        return False, (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[0]
    record = json.loads(proc.stdout)
    ok = record["status"] == "ok" and record["rcode"] == 0 and (record["answers"] or 0) > 0
    return (
        ok,
        f"{record['status']} rcode {record['rcode']} {record['answers']} answer(s) {record['error'] or ''}".strip(),
    )


def system_resolver(name: str, expected: str | None) -> tuple[bool, str]:
    try:
        addrs = sorted({str(ai[4][0]) for ai in socket.getaddrinfo(name, 443, socket.AF_INET)})
    except socket.gaierror as exc:
        return expected is None, f"gaierror {exc.errno}"
    return addrs == [expected], ",".join(addrs)


def _run(name: str, fn: Callable[[], tuple[bool, str]], deadline: float) -> CheckResult:
    """Retry until the deadline: daemons may still be starting."""
    while True:
        start = time.perf_counter()
        try:
            ok, detail = fn()
        except Exception as exc:  # a failed check is a result, not a crash
            ok, detail = False, f"{type(exc).__name__}: {exc}"
        ms = (time.perf_counter() - start) * 1000
        if ok or time.monotonic() >= deadline:
            return CheckResult(name, ok, detail, round(ms, 2))
        time.sleep(0.1)


def account() -> tuple[bool, str]:
    """Who the checks run as: not root, no capability left, no new privileges (they parse the lab's answers)."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line)
    caps = int(status["CapEff"], 16) | int(status["CapPrm"], 16) | int(status["CapBnd"], 16)
    uid, no_new = os.getuid(), status["NoNewPrivs"].strip()
    said = f"{pwd.getpwuid(uid).pw_name} (uid {uid}), capabilities {caps:#x}, no new privileges {no_new}"
    return uid != 0 and caps == 0 and no_new == "1", said


def run_checks(spec: dict) -> list[CheckResult]:
    """Every check the spec asks for (see harness.lab.lab.Lab.check_spec), after the account they run as."""
    deadline = time.monotonic() + spec.get("wait", 5)
    ca = spec["ca"]
    probe, probe_addr = spec["probe_name"], spec["probe_address"]
    outside = spec["outside_name"]
    results = [_run("account", account, deadline)]
    for r in spec["resolvers"]:
        n, addr, tls = r["name"], r["address"], r["tls_name"]
        url = f"https://{tls}/dns-query"
        results += [
            _run(f"{n} do53-udp", partial(do53, addr, probe, probe_addr, False), deadline),
            _run(f"{n} do53-tcp", partial(do53, addr, probe, probe_addr, True), deadline),
            _run(f"{n} dot", partial(dot, addr, tls, ca, probe, probe_addr), deadline),
            _run(f"{n} doh-post", partial(doh, url, ca, probe, probe_addr, True), deadline),
            _run(f"{n} doh-get", partial(doh, url, ca, probe, probe_addr, False), deadline),
            *(_run(f"{n} {p}", partial(quic, p, addr, r[p], tls, ca, probe), deadline) for p in (DOQ.name, DOH3.name)),
            _run(f"{n} nxdomain-outside", partial(do53, addr, outside, None, False), deadline),
        ]
    results.append(_run("system-resolver", lambda: system_resolver(probe, probe_addr), deadline))
    for url in spec["web_urls"]:
        results.append(_run(f"https {url}", partial(https, url, ca), deadline))
        if spec.get("web_http3"):
            results.append(_run(f"http3 {url}", partial(http3, url, ca), deadline))
    for sample in spec.get("replayed", []):
        results.append(_run(f"replay {sample['site']}: {sample['url']}", partial(replayed, sample, ca), deadline))
        if sample.get("http3"):
            check = partial(http3, sample["url"], ca, sample["status"], sample["bytes"])
            results.append(_run(f"http3 replay {sample['site']}: {sample['url']}", check, deadline))
    return results


def _program(name: str) -> Path:
    """The project's helper ``name`` by its real path (under /opt/dnsstudy): the account the checks run as may
    not search the checkout's directories."""
    return (BUILD_BIN / name).resolve()


def main() -> None:
    """Read the spec as root, become the helpers' account (argv[2]), run the checks, print them."""
    with open(sys.argv[1]) as f:
        spec = json.load(f)
    drop_privileges(sys.argv[2], "lab checks")
    print(json.dumps([asdict(r) for r in run_checks(spec)]))


if __name__ == "__main__":
    main()
