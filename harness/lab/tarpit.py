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
before it sees a packet (harness/lab/privileges.py). It uses the standard
library alone (and that module, which does too), all imported before, so the
account needs no access to the checkout.
"""

from __future__ import annotations

import signal
import socket
import sys

from harness.lab.privileges import drop_privileges


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
    drop_privileges(user, "tarpit")
    print(f"tarpit: listening on {address} tcp/80,443,853 udp/53 as {user}, answering nothing", flush=True)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    while True:
        signal.pause()


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
