"""Chromium's QUIC and a place's own CA: the hosts a place's CA signs over QUIC are allowed that root, none forced.

Chromium's QUIC refuses a certificate whose root it does not ship (ERR_QUIC_CERT_ROOT_NOT_KNOWN), even one the
NSS database trusts, except for the hosts of the origins of ``--origin-to-force-quic-on``, whatever their ports
(net/quic/quic_session_pool.cc, HostsFromOrigins; proof_verifier_chromium.cc, ShouldAllowUnknownRootForHost);
only an origin whose host and port both match is forced onto QUIC. So each host named at a port no page uses
(`DECOY_QUIC_PORT`) is allowed the place's CA over QUIC and nothing is forced: Chromium still discovers HTTP/3
by HTTPS record or Alt-Svc, and still falls back to HTTP/2 (docs/web.md, "HTTP/3").

A lab with HTTP/3 names its web's hosts (`ClientSide.quic_ca_hosts`); the real web has real certificates, so an
Internet side names none. Without this, Chromium in an HTTP/3 lab would measure HTTP/2 only, silently.
"""

from __future__ import annotations

from collections.abc import Sequence

from harness.errors import HarnessError

#: The switch whose origins' hosts Chromium's QUIC allows an unknown root.
SWITCH = "origin-to-force-quic-on"
#: A port no page requests: naming a host at it forces nothing onto QUIC.
DECOY_QUIC_PORT = 9
#: The longest switch allowed. Chromium copies it to the command lines of its network and storage services, which
#: its zygote receives in one message: Chromium 156 dies at its start (SIGTRAP, no page) once the switch's value
#: passes about 64,700 bytes (measured 2026-11-29: 3,764 hosts of the lab web, 64,631 bytes, start; 3,777,
#: 64,859 bytes, die), half Linux's limit on one argument (MAX_ARG_STRLEN, 128 KiB). What is left of 64 KiB is
#: for the other switches copied beside it.
MAX_SWITCH_BYTES = 60_000


def unknown_root_hosts(hostnames: Sequence[str]) -> str:
    """The value of ``--origin-to-force-quic-on`` that allows ``hostnames`` an unknown root over QUIC and forces
    none of them: each host at the decoy port."""
    return ",".join(f"{name}:{DECOY_QUIC_PORT}" for name in hostnames)


def with_quic_ca_hosts(switches: list[str], hosts: Sequence[str]) -> list[str]:
    """``switches`` with ``hosts`` allowed the place's CA over QUIC (unchanged when there are none).

    A profile's own ``--origin-to-force-quic-on`` is kept, in its place, with the decoys after its origins:
    Chromium reads a switch once (the last one given wins), and the union keeps every origin it forced forced
    (an origin is forced by its exact host and port; a decoy's port is one no page uses), `*` included. A switch
    longer than Chromium starts with is a one-line error, before any browser starts."""
    if not hosts:
        return switches
    decoys = unknown_root_hosts(hosts)
    own = next((i for i, s in enumerate(switches) if s == f"--{SWITCH}" or s.startswith(f"--{SWITCH}=")), None)
    if own is None:
        merged, argument = list(switches), f"--{SWITCH}={decoys}"
        merged.append(argument)
    else:
        kept = switches[own].partition("=")[2]
        argument = f"--{SWITCH}={kept},{decoys}" if kept else f"--{SWITCH}={decoys}"
        merged = [*switches[:own], argument, *switches[own + 1 :]]
    size = len(argument.encode())
    if size > MAX_SWITCH_BYTES:
        raise HarnessError(
            f"Chromium's --{SWITCH} for the {len(hosts)} hosts the place's CA signs over QUIC would be {size} "
            f"bytes, over the {MAX_SWITCH_BYTES} Chromium starts with: serve HTTP/3 from a smaller web (fewer sites, "
            "or HTTPS records, where only the hosts that announce HTTP/3 are named)"
        )
    return merged


def quic_ca_hosts(command_line: str) -> int:
    """How many hosts a browser's command line (as its net log reports it) allows an unknown root over QUIC at
    the decoy port: 0 when it names none."""
    count = 0
    for argument in command_line.split():
        if argument.startswith(f"--{SWITCH}="):
            origins = argument.partition("=")[2].split(",")
            count = sum(1 for o in origins if o.rpartition(":")[2] == str(DECOY_QUIC_PORT) and o.rpartition(":")[0])
    return count
