"""Network namespaces: create, remove, run programs inside, find their processes."""

from __future__ import annotations

import errno
import ipaddress
import json
import os
import socket
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyroute2 import IPRoute, netns
from pyroute2.netlink.exceptions import NetlinkError

from harness.errors import HarnessError

NETNS_DIR = Path("/run/netns")
ETC_NETNS = Path("/etc/netns")


def exists(name: str) -> bool:
    return (NETNS_DIR / name).exists()


def create(name: str) -> None:
    """Create a namespace (a bind mount under /run/netns) with loopback up."""
    if not exists(name):
        netns.create(name)
    with IPRoute(netns=name) as ipr:
        ipr.link("set", index=ipr.link_lookup(ifname="lo")[0], state="up")


def write_hosts(name: str) -> None:
    """Give a namespace its own /etc/hosts (`ip netns exec` bind-mounts it): loopback names and this host's name.

    Firefox looks up the machine's host name through the system resolver: where the host's /etc/hosts does
    not name it (a container run without it, many cloud images), that query leaves as Do53 and every DoH
    visit's proof fails. The host's other entries stay out, so none of them answers a visit's names.
    """
    etc = ETC_NETNS / name
    etc.mkdir(parents=True, exist_ok=True)
    host = socket.gethostname()
    lines = ["# written by dnsstudy: the namespace's own hosts file", "127.0.0.1\tlocalhost", "::1\tlocalhost"]
    if host != "localhost":
        lines.append(f"127.0.1.1\t{host}")
    (etc / "hosts").write_text("\n".join(lines) + "\n")


def inode(path: Path) -> int | None:
    try:
        return path.stat().st_ino
    except OSError:
        return None


def pids_in(name: str | None) -> list[int]:
    """Processes whose network namespace is ``name`` (like `ip netns pids`); None: the calling thread's."""
    target = inode(NETNS_DIR / name) if name else inode(Path("/proc/thread-self/ns/net"))
    if target is None:
        return []
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        if inode(entry / "ns" / "net") == target:
            found.append(int(entry.name))
    return found


def remove(name: str) -> None:
    """Unmount and delete a namespace and its /etc/netns files."""
    if exists(name):
        netns.remove(name)
    etc = ETC_NETNS / name
    if etc.exists():
        for child in etc.iterdir():
            child.unlink()
        etc.rmdir()


def command(name: str, argv: list[str]) -> list[str]:
    """The argv that runs ``argv`` inside namespace ``name``.

    `ip netns exec` also bind-mounts /etc/netns/NAME/* over /etc, which is
    how the client namespace gets its own resolv.conf.
    """
    return ["ip", "netns", "exec", name, *argv]


def delete_host_link(ifname: str) -> bool:
    """Delete a link of the host's namespace if it is there; True if this call deleted it.

    The host end of a veth whose peer was in a namespace just removed goes away by itself, but later:
    the kernel tears namespaces down asynchronously, so the link can vanish between lookup and delete.
    """
    deleted = False
    with IPRoute() as ipr:
        for index in ipr.link_lookup(ifname=ifname):
            try:
                ipr.link("del", index=index)
                deleted = True
            except NetlinkError as exc:
                if exc.code != errno.ENODEV:  # gone already: what we wanted
                    raise
    return deleted


def run(name: str, argv: list[str], timeout: float = 30, check: bool = True) -> subprocess.CompletedProcess[str]:
    """Run a program inside a namespace and wait for it."""
    return subprocess.run(command(name, argv), capture_output=True, text=True, timeout=timeout, check=check)


def set_sysctl(name: str, key: str, value: str) -> None:
    """Write a sysctl as seen from inside the namespace (net.* sysctls are per namespace)."""
    pid = os.fork()
    if pid == 0:  # the child enters the namespace; the parent stays where it is
        code = 255
        try:
            netns.setns(name, flags=0)  # flags=0: never create a missing namespace
            Path("/proc/sys", *key.split(".")).write_text(value)
            code = 0
        except OSError as exc:
            code = exc.errno or 255
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        why = os.strerror(code) if 0 < code < 255 else "failed"
        # Docker mounts /proc/sys read-only unless the container has `systempaths=unconfined` (docs/deploy.md).
        read_only = code == errno.EROFS
        hint = ": /proc/sys is mounted read-only here (in a container: systempaths=unconfined)" if read_only else ""
        raise HarnessError(f"cannot set {key}={value} in namespace {name}: {why}{hint}")


def host_networks() -> list[tuple[str, ipaddress.IPv4Network]]:
    """(interface, network) of every IPv4 address and route in the host's namespace."""
    found: list[tuple[str, ipaddress.IPv4Network]] = []
    with IPRoute() as ipr:
        names = {link["index"]: link.get_attr("IFLA_IFNAME") for link in ipr.get_links()}
        for addr in ipr.get_addr(family=2):
            net = ipaddress.IPv4Network(f"{addr.get_attr('IFA_ADDRESS')}/{addr['prefixlen']}", strict=False)
            found.append((names.get(addr["index"], "?"), net))
        for route in ipr.get_routes(family=2, table=254):
            dst = route.get_attr("RTA_DST")
            if dst and route["dst_len"] > 0:
                net = ipaddress.IPv4Network(f"{dst}/{route['dst_len']}", strict=False)
                found.append((names.get(route.get_attr("RTA_OIF"), "?"), net))
    return found


def host_addresses() -> list[ipaddress.IPv4Address]:
    """Every IPv4 address of the host's namespace, on any interface."""
    with IPRoute() as ipr:
        return [ipaddress.IPv4Address(a.get_attr("IFA_ADDRESS")) for a in ipr.get_addr(family=2)]


def link_networks(ifname: str) -> list[ipaddress.IPv4Network]:
    """The IPv4 networks directly attached to host interface ``ifname`` (its addresses' prefixes)."""
    with IPRoute() as ipr:
        indexes = ipr.link_lookup(ifname=ifname)
        if not indexes:
            return []
        return [
            ipaddress.IPv4Network(f"{a.get_attr('IFA_ADDRESS')}/{a['prefixlen']}", strict=False)
            for a in ipr.get_addr(family=2, index=indexes[0])
        ]


def wait_tcp(name: str, endpoints: list[tuple[str, int]], timeout: float) -> list[tuple[str, int]]:
    """Wait until every (address, port) accepts TCP inside the namespace.

    Returns the endpoints that still refused when ``timeout`` ran out.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        pending = list(endpoints)
        try:
            netns.setns(name, flags=0)  # flags=0: never create a missing namespace
            deadline = time.monotonic() + timeout
            while pending and time.monotonic() < deadline:
                still = []
                for address, port in pending:
                    try:
                        socket.create_connection((address, port), timeout=0.2).close()
                    except OSError:
                        still.append((address, port))
                pending = still
                if pending:  # a visit's stub listens in 15-30 ms, inside the visit's time: a short poll step
                    time.sleep(0.002)
        finally:
            os.write(write_fd, json.dumps(pending).encode())
            os._exit(0)
    os.close(write_fd)
    with os.fdopen(read_fd) as pipe:
        data = pipe.read()
    os.waitpid(pid, 0)
    return [(address, port) for address, port in json.loads(data or "[]")]


@contextmanager
def entered(name: str | None) -> Iterator[None]:
    """Move the calling thread into namespace ``name`` for the block (None: stay).

    Sockets opened and processes started inside the block belong to the
    namespace; on exit the thread returns to where it was.
    """
    if name is None:
        yield
        return
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        netns.setns(name, flags=0)
        try:
            yield
        finally:
            netns.setns(own, flags=0)
    finally:
        os.close(own)


def free_tcp_port() -> int:
    """A TCP port free on 127.0.0.1 of the current namespace."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def nft(namespace: str, args: list[str], script: str | None = None) -> str:
    """Run nft in ``namespace`` (a script on stdin with ["-f", "-"]); a one-line HarnessError if it fails."""

    try:
        done = subprocess.run(
            command(namespace, ["nft", *args]), input=script, capture_output=True, text=True, timeout=10
        )
    except subprocess.TimeoutExpired:
        raise HarnessError(f"nft in namespace {namespace} did not finish in 10 s") from None
    if done.returncode != 0:
        first = (done.stderr.strip().splitlines() or ["(no message)"])[0]
        raise HarnessError(f"nft in namespace {namespace} failed: {first}")
    return done.stdout
