"""Lab faults: a resolver made unreachable or untrustworthy on purpose, to rehearse how failures are counted.

What a user of an encrypted transport meets on the Internet, reproduced at
a lab resolver (docs/lab.md):

  drop:PROTO      packets to the resolver's PROTO port vanish (a network that blocks 853)
  reject:PROTO    they are answered with TCP resets (ICMP port unreachable over UDP)
  silent:PROTO    connections are accepted and never answered (the lab's tarpit)
  untrusted-cert  the resolver presents a certificate from a CA the client does not trust
  wrong-name      the resolver presents a lab-CA certificate for another name

Path faults are nftables rules in the server namespace, in a table of their
own; certificate faults swap the resolver's certificate (made at `lab up`)
and restart its unbound and QUIC front, since unbound reads certificates
only when it starts. What is applied, and who applied it, is the lab's state
(faults.json, harness/lab/state.py): written before a fault is enforced and
emptied only once every fault is undone, so the state never shows a lab
healthier than it is; `clear` undoes it from any process, and a crawl
refuses to start beside a fault its study does not declare.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import TYPE_CHECKING

from cryptography.hazmat.primitives.asymmetric import ec

from harness import netns
from harness.errors import HarnessError
from harness.lab.ca import CertificateAuthority
from harness.lab.state import load_faults, save_faults
from harness.lab.topology import SERVER_IF
from harness.lab.zones import resolver_tls_name
from harness.place import Fault
from harness.protocols import Protocol, protocols

if TYPE_CHECKING:
    from harness.lab.lab import Lab

TABLE = "dnsstudy_fault"
PATH_KINDS = ("drop", "reject", "silent")
CERT_KINDS = ("untrusted-cert", "wrong-name")
#: The name a wrong-name certificate carries: a lab name, but not the resolver's.
WRONG_NAME = "impostor.dns.lab.test"


#: Who applied a fault through `dnsstudy lab fault apply`.
BY_HAND = "by hand"


def fault_names() -> list[str]:
    """Every fault name `parse_fault` accepts."""
    path = [f"{k}:{p.name}" for k in PATH_KINDS for p in _faultable(k)]
    return path + list(CERT_KINDS)


def _faultable(kind: str) -> list[Protocol]:
    """Protocols a path fault of ``kind`` can hit: encrypted ones; `silent` needs TCP (the tarpit's)."""
    return [p for p in protocols() if p.encrypted and (kind != "silent" or p.carrier == "tcp")]


def parse_fault(name: str, resolver: str, owner: str = BY_HAND) -> Fault:
    """A fault from its name (e.g. "drop:dot"), as applied by ``owner``; ValueError naming the choices otherwise.

    Its kind is one of PATH_KINDS (its protocol the transport it hits) or CERT_KINDS (no protocol).
    """
    if name not in fault_names():
        raise ValueError(f"unknown lab fault '{name}' (have: {', '.join(fault_names())})")
    kind, _, protocol = name.partition(":")
    return Fault(kind, protocol or None, resolver, owner)


def write_certificates(
    certs: Path, ca: CertificateAuthority, key: ec.EllipticCurvePrivateKey, resolver: str, address: str
) -> None:
    """The certificates a certificate fault swaps in for ``resolver``'s, with its key (made at `lab up`)."""
    rogue = CertificateAuthority.create("untrusted CA (lab fault)")
    (certs / f"resolver-{resolver}.untrusted-cert.pem").write_bytes(
        rogue.issue([resolver_tls_name(resolver)], [address], key)
    )
    (certs / f"resolver-{resolver}.wrong-name.pem").write_bytes(ca.issue([WRONG_NAME], [], key))


def applied(lab: Lab) -> list[Fault]:
    """The faults applied to ``lab`` now, each with who applied it (the lab's state)."""
    return load_faults(lab.run_dir)


def apply(lab: Lab, fault: Fault) -> None:
    """Add ``fault`` to what is applied (a no-op if it already is): recorded first, then enforced."""
    lab.resolver(fault.resolver)  # refuses an unknown resolver, naming the known ones
    now = applied(lab)
    if fault in now:
        return
    if fault.kind in CERT_KINDS and any(f.kind in CERT_KINDS and f.resolver == fault.resolver for f in now):
        raise HarnessError(f"resolver '{fault.resolver}' already has a certificate fault: clear it first")
    save_faults(lab.run_dir, now + [fault])  # a fault half-applied when this fails is still on record
    _enforce(lab, now + [fault], previous=now)


def clear(lab: Lab) -> list[Fault]:
    """Undo every fault, then take them off the record; returns what was applied."""
    now = applied(lab)
    _enforce(lab, [], previous=now)
    save_faults(lab.run_dir, [])  # only now: had undoing failed, the record would still name them
    return now


def _enforce(lab: Lab, faults: list[Fault], previous: list[Fault]) -> None:
    """Make the lab match ``faults``: the rule table rebuilt whole, certificates swapped where they changed."""
    netns.nft(lab.namespaces["server"], ["-f", "-"], _ruleset(lab, [f for f in faults if f.kind in PATH_KINDS]))
    before = {f.resolver: f.kind for f in previous if f.kind in CERT_KINDS}
    after = {f.resolver: f.kind for f in faults if f.kind in CERT_KINDS}
    for resolver in sorted(set(before) | set(after)):
        if before.get(resolver) != after.get(resolver):
            _swap_certificate(lab, resolver, after.get(resolver))


def _ruleset(lab: Lab, faults: list[Fault]) -> str:
    """The fault table: filter rules for drop and reject, DNAT to the tarpit for silent."""
    by_name = {p.name: p for p in protocols()}
    filters, nat = [], []
    for f in faults:
        p = by_name[f.protocol or ""]
        address = lab.resolver(f.resolver).address
        port = lab.resolver(f.resolver).port(p)
        for l4 in p.transports:
            # Only what arrives over the link: the lab's own readiness probes inside the namespace pass.
            match = f'iifname "{SERVER_IF}" ip daddr {address} {l4} dport {port}'
            if f.kind == "drop":
                filters.append(f"{match} drop")
            elif f.kind == "reject":
                filters.append(f"{match} reject" + (" with tcp reset" if l4 == "tcp" else ""))
            else:  # silent: the tarpit accepts on the same port and never answers
                nat.append(f"{match} dnat ip to {lab.config.addresses.hang}")
    body = "".join(f"    {r}\n" for r in filters)
    nat_body = "".join(f"    {r}\n" for r in nat)
    return (
        f"table inet {TABLE}\ndelete table inet {TABLE}\n"
        f"table inet {TABLE} {{\n"
        f"  chain input {{\n    type filter hook input priority -10; policy accept;\n{body}  }}\n"
        f"  chain prerouting {{\n    type nat hook prerouting priority -100; policy accept;\n{nat_body}  }}\n"
        "}\n"
    )


def _swap_certificate(lab: Lab, resolver: str, kind: str | None) -> None:
    """Put the fault's certificate (or, with None, the resolver's own) in place and restart its daemons."""
    certs = lab.run_dir / "certs"
    live, own = certs / f"resolver-{resolver}.pem", certs / f"resolver-{resolver}.own.pem"
    if not own.exists():
        shutil.copyfile(live, own)
    source = own if kind is None else certs / f"resolver-{resolver}.{kind}.pem"
    tmp = live.with_suffix(".tmp")
    shutil.copyfile(source, tmp)
    tmp.replace(live)
    lab.restart({f"resolver-{resolver}", f"quic-{resolver}"})
