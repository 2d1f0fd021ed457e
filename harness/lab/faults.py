"""Lab faults: a resolver made unreachable or untrustworthy on purpose, to rehearse how failures are counted.

What a user of an encrypted transport meets on the Internet, reproduced at
a lab resolver (docs/lab.md):

  drop:PROTO      packets to the resolver's PROTO port vanish (a network that blocks 853)
  reject:PROTO    they are answered with TCP resets (ICMP port unreachable over UDP)
  silent:PROTO    connections are accepted and never answered (the lab's tarpit)
  drop-https:do53 answers to HTTPS (type 65) queries over UDP vanish, all others pass (a middlebox that
                  strips HTTPS records: only an unencrypted transport shows it a query's type)
  untrusted-cert  the resolver presents a certificate from a CA the client does not trust
  wrong-name      the resolver presents a lab-CA certificate for another name

Path faults are nftables rules in the server namespace, in a table of their
own (drop-https on the answers leaving, matching the question's type where its
name ends, one rule per name length); certificate faults swap the resolver's
certificate (made at `lab up`) and restart its unbound and QUIC front, since
unbound reads certificates only when it starts. What is applied, and who applied it, is the lab's state
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
PATH_KINDS = ("drop", "reject", "silent", "drop-https")
#: The question's name starts past the UDP header (8 bytes) and the DNS header (12); it ends with a zero byte,
#: and the type (65: HTTPS) and class (1: IN) follow. Names run from 2 bytes ("a" is 3) to 255 on the wire.
QUESTION_AT = 20
NAME_LENGTHS = range(3, 256)
HTTPS_QUESTION_TAIL = "0x0000410001"  # the name's zero byte, type 65, class IN
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
    """Protocols a path fault of ``kind`` can hit: encrypted ones; `silent` needs TCP (the tarpit's);
    `drop-https` needs a query's type in the clear, over UDP (Do53)."""
    if kind == "drop-https":
        return [p for p in protocols() if not p.encrypted and "udp" in p.transports]
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
    """The fault table: filter rules for drop and reject, DNAT to the tarpit for silent, the answers' filter for
    drop-https."""
    by_name = {p.name: p for p in protocols()}
    filters, nat, answers = [], [], []
    for f in faults:
        p = by_name[f.protocol or ""]
        address = lab.resolver(f.resolver).address
        port = lab.resolver(f.resolver).port(p)
        if f.kind == "drop-https":
            answers += _https_answer_rules(address, port)
            continue
        for l4 in p.transports:
            # Only what arrives over the link: the lab's own readiness probes inside the namespace pass.
            match = f'iifname "{SERVER_IF}" ip daddr {address} {l4} dport {port}'
            if f.kind == "drop":
                filters.append(f"{match} drop")
            elif f.kind == "reject":
                filters.append(f"{match} reject" + (" with tcp reset" if l4 == "tcp" else ""))
            else:  # silent: the tarpit accepts on the same port and never answers
                nat.append(f"{match} dnat ip to {lab.config.addresses.hang}")
    return (
        f"table inet {TABLE}\ndelete table inet {TABLE}\n"
        f"table inet {TABLE} {{\n"
        f"  chain input {{\n    type filter hook input priority -10; policy accept;\n{_body(filters)}  }}\n"
        f"  chain prerouting {{\n    type nat hook prerouting priority -100; policy accept;\n{_body(nat)}  }}\n"
        f"  chain output {{\n    type filter hook output priority -10; policy accept;\n{_body(answers)}  }}\n"
        "}\n"
    )


def _body(rules: list[str]) -> str:
    return "".join(f"    {r}\n" for r in rules)


def _https_answer_rules(address: str, port: int) -> list[str]:
    """Drop the resolver's UDP answers to HTTPS queries leaving over the link: a rule per length of the
    question's name, each matching the name's last (zero) byte, type 65 and class IN right after it. A name's
    bytes are never zero before its end, so no shorter length matches a longer name."""
    match = f'oifname "{SERVER_IF}" ip saddr {address} udp sport {port}'
    return [
        f"{match} @th,{(QUESTION_AT + length - 1) * 8},40 {HTTPS_QUESTION_TAIL} counter drop" for length in NAME_LENGTHS
    ]


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
