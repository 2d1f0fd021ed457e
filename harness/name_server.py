"""The client namespace's name server: one fixed address in resolv.conf, led by NAT to the arm's server.

A browser reads resolv.conf when it starts. Chromium reads it again only when its watcher of /etc sees the
file change, which it never does in a network namespace (`ip netns exec` bind-mounts the namespace's file, so a
change is an event of /etc/netns/<ns>/); a running Chromium kept the name server of its start and a reused one
had to be replaced at each change between Do53 through one resolver, Do53 through another and the stub arms.
So resolv.conf names `NAME_SERVER` for the namespace's life, and a NAT rule in the namespace's output path sends
DNS to it on to the server the arm chose: the resolver (destination rewritten: the resolver sees the client's
own address, as before) or the stub on loopback (redirected). The counting table (harness/arms/evidence.py)
hooks in after the NAT, so its counters see where the packets went, not the fixed address.

Each change of the server also deletes the connection-tracking entries of queries to `NAME_SERVER`: an entry
keeps the server it was given for as long as it lives (30 s and more), and a later query from the same port
would go where the arm before sent it.
"""

from __future__ import annotations

import errno
import ipaddress
import json

from pyroute2 import Conntrack
from pyroute2.netlink.exceptions import NetlinkError
from pyroute2.netlink.nfnetlink.nfctsocket import NFCTAttrTuple

from harness import netns
from harness.errors import HarnessError

#: Link-local: no router forwards it, so a query the NAT did not lead anywhere stays in the namespace's counters
#: (a query on a DNS port to another server: the proof fails), never reaching a server it was not meant for.
NAME_SERVER = "169.254.53.53"
TABLE = "dnsstudy_name_server"
DNS_PORT = 53


MAP = "lead"


def lead_to(namespace: str, address: str) -> int:
    """From now on, DNS (UDP and TCP, port 53) to `NAME_SERVER` in ``namespace`` goes to ``address``, a server
    elsewhere or on loopback (for a packet the host sends, a destination on loopback is a redirect); the number
    of connection-tracking entries of earlier queries deleted. Read back first, from the namespace itself (any
    process may have changed it): an arm that keeps the server changes nothing."""
    server = str(ipaddress.IPv4Address(address))  # validated: it goes into an nft script
    led = led_to(namespace)
    if led == server:
        return 0
    element = f"add element ip {TABLE} {MAP} {{ {NAME_SERVER} : {server} }}\n"
    netns.nft(namespace, ["-f", "-"], (_table() if led is None else f"flush map ip {TABLE} {MAP}\n") + element)
    return forget_queries(namespace)


def led_to(namespace: str) -> str | None:
    """Where DNS to `NAME_SERVER` in ``namespace`` goes now ("" nowhere), or None if it has no table of ours."""
    try:
        listed = json.loads(netns.nft(namespace, ["-j", "list", "map", "ip", TABLE, MAP]))
    except HarnessError:
        return None
    maps = [item["map"] for item in listed.get("nftables", []) if "map" in item]
    return next((str(value) for key, value in maps[0].get("elem", []) if key == NAME_SERVER), "") if maps else None


def _table() -> str:
    """The NAT table made anew, its map empty: DNS to `NAME_SERVER` goes where the map says."""
    return f"""
table ip {TABLE}
delete table ip {TABLE}
table ip {TABLE} {{
  map {MAP} {{ type ipv4_addr : ipv4_addr; }}
  chain output {{
    type nat hook output priority -100; policy accept;
    ip daddr {NAME_SERVER} meta l4proto {{ udp, tcp }} th dport {DNS_PORT} dnat ip to ip daddr map @{MAP}
  }}
}}
"""


def remove(namespace: str) -> None:
    """No NAT of `NAME_SERVER` in ``namespace`` any more (nothing to do if there is none)."""
    netns.nft(namespace, ["-f", "-"], f"table ip {TABLE}\ndelete table ip {TABLE}\n")
    forget_queries(namespace)


def forget_queries(namespace: str) -> int:
    """Delete the connection-tracking entries of queries to `NAME_SERVER` in ``namespace``; how many there were."""
    deleted = 0
    try:
        with netns.entered(namespace), Conntrack() as tracking:
            for entry in list(tracking.dump_entries(tuple_orig=NFCTAttrTuple(daddr=NAME_SERVER))):
                try:
                    tracking.delete(entry)
                    deleted += 1
                except NetlinkError as exc:
                    if exc.code != errno.ENOENT:  # gone by itself since the dump: nothing left to forget
                        raise
    except (OSError, NetlinkError) as exc:
        raise HarnessError(f"cannot delete the connection tracking of DNS in namespace {namespace}: {exc}") from None
    return deleted
