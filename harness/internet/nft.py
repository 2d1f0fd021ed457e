"""nftables in the host's namespace: the side's firewall and the forwarding guard are loaded and deleted here."""

from __future__ import annotations

import re
import subprocess

from harness.errors import HarnessError

#: Linux interface names. Every name the Internet side puts into an nftables rule is checked against it.
IFNAME = re.compile(r"[A-Za-z0-9_.:-]{1,15}")


def load(script: str, what: str) -> None:
    """Run an nftables script (one transaction); a one-line HarnessError naming ``what`` if nft refuses it."""
    done = subprocess.run(["nft", "-f", "-"], input=script, capture_output=True, text=True, timeout=30)
    if done.returncode != 0:
        raise HarnessError(f"nft refused {what}: {done.stderr.strip()}")


def delete_table(family: str, table: str) -> bool:
    """Delete an nftables table that may not exist; True if there was one."""
    return subprocess.run(["nft", "delete", "table", family, table], capture_output=True, timeout=30).returncode == 0
