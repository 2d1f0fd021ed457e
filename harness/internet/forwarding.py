"""The host's ip_forward, shared by every live Internet side, and the guard that keeps it to their traffic.

Turning on the host's ip_forward is shared by every live side
(`acquire_forwarding`): the last side down restores the value the first one
found, and while the project is the reason the host forwards, a guard table
drops every forwarded packet that is not a side's.
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from harness.errors import HarnessError
from harness.internet import nft
from harness.internet.nft import IFNAME
from harness.paths import RUN_ROOT

IP_FORWARD = Path("/proc/sys/net/ipv4/ip_forward")

#: Which sides turned ip_forward on, and what it was before the first. Directly under the run root, never in a
#: prefix's directory: `lab down` removes the directory of its prefix, and a lab may share a side's name.
FORWARDING_RECORD = RUN_ROOT / "internet-forwarding.json"
#: The shared guard's table: 10 characters after the "dnsstudy_", which no side's name (8 at most) can give.
GUARD_TABLE = "dnsstudy_forwarding"


@contextmanager
def _forwarding_record() -> Iterator[dict[str, Any]]:
    """The record of live sides, read and written under a lock (several `internet up`s may run at once).

    The lock is on the run root directory itself: a lock file would have to outlive the last side.
    """
    RUN_ROOT.mkdir(parents=True, exist_ok=True)
    fd = os.open(RUN_ROOT, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            record = json.loads(FORWARDING_RECORD.read_text())
        except (OSError, ValueError):
            record = {}
        record.setdefault("sides", {})
        yield record
        if record["sides"]:
            tmp = FORWARDING_RECORD.with_suffix(".tmp")
            tmp.write_text(json.dumps(record, indent=1))
            tmp.replace(FORWARDING_RECORD)
        else:
            FORWARDING_RECORD.unlink(missing_ok=True)
    finally:
        os.close(fd)  # closing releases the lock


def forwarding_record() -> dict[str, Any]:
    """The live sides (name -> host veth) and the ip_forward value before the first (for status and tests)."""
    with _forwarding_record() as record:
        return json.loads(json.dumps(record))


def acquire_forwarding(side: str, veth: str) -> None:
    """Count ``side`` among the sides that need ip_forward, and turn it on.

    The first side records the value it found. When that was 0, the guard keeps the host from forwarding
    anything but the sides' own traffic; it is in place before ip_forward goes on.
    """
    if not IFNAME.fullmatch(veth):
        raise HarnessError(f"interface '{veth}' is not a Linux interface name")
    with _forwarding_record() as record:
        if not record["sides"] or record.get("original") not in ("0", "1"):
            record["original"] = IP_FORWARD.read_text().strip()
        record["sides"][side] = veth
        if record["original"] == "0":
            nft.load(_guard_script(record["sides"].values()), "the forwarding guard")
        IP_FORWARD.write_text("1\n")


def release_forwarding(side: str) -> list[str]:
    """Stop counting ``side``; the last side restores ip_forward and removes the guard. Returns what it did."""
    with _forwarding_record() as record:
        if record["sides"].pop(side, None) is None:
            return []
        original = record.get("original")
        if record["sides"]:
            if original == "0":
                nft.load(_guard_script(record["sides"].values()), "the forwarding guard")
            return [f"forwarding share of {side} ({len(record['sides'])} sides left)"]
        done = [f"forwarding share of {side}"]
        if original in ("0", "1") and IP_FORWARD.read_text().strip() != original:
            IP_FORWARD.write_text(f"{original}\n")
            done.append(f"ip_forward back to {original}")
        if nft.delete_table("ip", GUARD_TABLE):
            done.append(f"nft table {GUARD_TABLE}")
        return done


def _guard_script(veths: Iterable[str]) -> str:
    """Replace the guard: drop every forwarded IPv4 packet that neither enters nor leaves by a side's veth.

    One table for all sides, rewritten as they come and go: a drop in any table is final in nftables,
    so a per-side "drop the rest" would drop the other sides' traffic.
    """
    names = sorted(set(veths))
    for name in names:
        if not IFNAME.fullmatch(name):
            raise HarnessError(f"forwarding record: '{name}' is not a Linux interface name")
    quoted = ", ".join(f'"{n}"' for n in names)
    return f"""table ip {GUARD_TABLE}
delete table ip {GUARD_TABLE}
table ip {GUARD_TABLE} {{
  counter dropped {{}}
  chain forward {{
    type filter hook forward priority filter; policy accept;
    iifname != {{ {quoted} }} oifname != {{ {quoted} }} counter name dropped drop
  }}
}}
"""
