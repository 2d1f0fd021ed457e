"""How a lab process that root starts becomes an unprivileged account for good (standard library only).

The tarpit, the replay server and the lab's checks start as root (to bind low ports, or to read what only root
may), then call `drop_privileges` before they see a packet: the capability bounding set emptied, no groups,
the account's gid and uid (which clears every capability), and no new privileges, so not even an exec can
regain any. Whatever they import must be imported before: the account may have no access to the checkout.
"""

from __future__ import annotations

import ctypes
import os
import pwd

PR_CAPBSET_DROP, PR_SET_NO_NEW_PRIVS = 24, 38  # <linux/prctl.h>


def drop_privileges(user: str, who: str) -> None:
    """Become ``user`` for good; ``who`` names the process in the one-line error (SystemExit) if it cannot."""
    entry = pwd.getpwnam(user)
    if entry.pw_uid == 0:
        raise SystemExit(f"{who}: refusing to run as '{user}': it is root")
    libc = ctypes.CDLL(None, use_errno=True)
    with open("/proc/sys/kernel/cap_last_cap") as f:
        last_cap = int(f.read())
    for cap in range(last_cap + 1):  # the bounding set too: nothing can be regained, not even by exec
        libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0)
    os.setgroups([])
    os.setgid(entry.pw_gid)
    os.setuid(entry.pw_uid)
    if libc.prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SystemExit(f"{who}: prctl(PR_SET_NO_NEW_PRIVS) failed: {os.strerror(ctypes.get_errno())}")
