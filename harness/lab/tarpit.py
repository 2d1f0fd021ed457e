"""A server that accepts TCP connections and never answers, and ignores UDP queries.

The kernel completes TCP handshakes into the listen backlog even though we
never call accept(), so a client sees a connected socket that stays silent:
the lab's stand-in for a hung server (page-load timeouts) and a silent
resolver (DNS timeouts).

`lab up` starts it as root by absolute path in isolated mode
(`python -I /abs/path/harness/lab/tarpit.py ADDRESS USER`): -I implies -P,
so the working directory is never on sys.path and no code from it runs.
Root only binds the ports below 1024; then the process becomes USER (the
helpers' account), with no groups, no capabilities and no new privileges,
before it sees a packet. It uses the standard library alone, so the account
needs no access to the checkout.
"""

from __future__ import annotations

import ctypes
import os
import pwd
import signal
import socket
import sys

PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 24, 38  # <linux/prctl.h>


def drop_privileges(user: str) -> None:
    """Become ``user`` for good: the capability bounding set emptied, groups, gid, then uid (which clears every
    capability), and no new privileges."""
    entry = pwd.getpwnam(user)
    if entry.pw_uid == 0:
        raise SystemExit(f"tarpit: refusing to run as '{user}': it is root")
    libc = ctypes.CDLL(None, use_errno=True)
    last_cap = int(open("/proc/sys/kernel/cap_last_cap").read())
    for cap in range(last_cap + 1):  # the bounding set too: nothing can be regained, not even by exec
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    os.setgroups([])
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SystemExit(f"tarpit: prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}")


def main(address: str, user: str) -> None:
    """Listen on ``address`` (TCP 80, 443, 853 and UDP 53) as ``user`` and answer nothing until SIGTERM."""
    sockets = []
    for port in (80, 443, 853):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        s.bind((address, port))
        s.listen(1024)
        sockets.append(s)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind((address, 53))
    sockets.append(udp)
    drop_privileges(user)
    print(f"tarpit: listening on {address} tcp/80,443,853 udp/53 as {user}, answering nothing", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        signal.pause()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
