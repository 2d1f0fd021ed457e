"""A recorded HTTPS record (RFC 9460) rewritten for a replay lab: what the lab cannot honour taken out.

Each rule has its reason (docs/replay.md, "HTTPS records"): the lab's own address for `ipv4hint`, no
`ipv6hint` (no IPv6 in the lab), no HTTP/3 in `alpn` unless the name's lab address offers it (a replay lab
with `http3`, harness/lab/replayweb.py; elsewhere an h3 alpn sends the browser to a UDP port where nothing
listens), no `ech` (the replay servers hold no matching keys), no `port` other
than 443 (the replay front listens on 443), no key the rewrite does not know, `mandatory` pruned to the kept
keys; an AliasMode record, or one whose TargetName is not ".", only where the target is a name the replay
zone has. Records are read and written with dnspython's SVCB/HTTPS classes, never by hand.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import dns.exception
import dns.name
import dns.rdata
import dns.rdataclass
import dns.rdatatype
from dns.rdtypes.IN.HTTPS import HTTPS
from dns.rdtypes.svcbbase import ALPNParam, IPv4HintParam, MandatoryParam, ParamKey

#: The kinds of change counted in a replay plan, each a rule of the module's docstring.
KINDS = (
    "ipv4hint",  # rewritten to the lab address
    "ipv6hint",  # dropped
    "h3",  # h3 (and h3-NN) taken out of alpn
    "alpn",  # alpn (and no-default-alpn) dropped: nothing was left
    "ech",  # dropped
    "port",  # a port other than 443 dropped
    "unknown_key",  # a key the rewrite does not know (keyNNNN, dohpath, ohttp) dropped
    "mandatory",  # pruned to the kept keys
    "dropped",  # the whole record: AliasMode or a TargetName the replay zone does not have
)
#: Keys kept (rewritten where a rule says so); any other is dropped as "unknown_key".
KNOWN = {
    ParamKey.MANDATORY,
    ParamKey.ALPN,
    ParamKey.NO_DEFAULT_ALPN,
    ParamKey.PORT,
    ParamKey.IPV4HINT,
    ParamKey.IPV6HINT,
    ParamKey.ECH,
}
REPLAY_PORT = 443


@dataclass(frozen=True)
class Rewritten:
    """One record as the replay zone publishes it (None: dropped), and the kinds of change made to it."""

    text: str | None
    changes: tuple[str, ...]


def parse_https(text: str) -> HTTPS:
    """An HTTPS record's data in presentation form; ValueError saying why when it cannot be read."""
    try:
        rdata = dns.rdata.from_text(dns.rdataclass.IN, dns.rdatatype.HTTPS, text)
    except (dns.exception.DNSException, ValueError, TypeError) as exc:
        raise ValueError(f"not an HTTPS record's data ({exc})") from None
    assert isinstance(rdata, HTTPS)  # from_text of type HTTPS makes one
    return rdata


def _is_h3(alpn: bytes) -> bool:
    """HTTP/3 and its drafts (h3-29 and the like)."""
    return alpn == b"h3" or alpn.startswith(b"h3-")


def announces_h3(text: str) -> bool:
    """True when the record's `alpn` names HTTP/3; False too when it cannot be read (the rewrite says why)."""
    try:
        alpn = parse_https(text).params.get(ParamKey.ALPN)
    except ValueError:
        return False
    return alpn is not None and any(_is_h3(i) for i in alpn.ids)


def rewrite_https(
    text: str, owner: str, address_of: Callable[[str], str | None], h3_at: frozenset[str] = frozenset()
) -> Rewritten:
    """``text`` (an HTTPS record of ``owner``) rewritten for a replay lab whose zone puts a name on the address
    ``address_of`` gives (None: not in the zone), and whose addresses ``h3_at`` offer HTTP/3. ValueError when
    the record cannot be read."""
    record = parse_https(text)
    target = record.target.to_text(omit_final_dot=True).lower()
    serves = owner if record.target == dns.name.root else target
    address = address_of(serves)
    if record.priority == 0 or record.target != dns.name.root:
        # AliasMode points elsewhere, and so does a TargetName: only a name the lab serves can be followed
        if record.target == dns.name.root or address is None:
            return Rewritten(None, ("dropped",))
        if record.priority == 0:
            return Rewritten(record.to_text(), ())
    params, changes = _rewrite_params(dict(record.params), address, address in h3_at)
    out = HTTPS(record.rdclass, record.rdtype, record.priority, record.target, params)
    return Rewritten(out.to_text(), tuple(changes))


def _rewrite_params(params: dict, address: str | None, keep_h3: bool = False) -> tuple[dict, list[str]]:
    """The ServiceMode keys the lab can honour (h3 in `alpn` only with ``keep_h3``), and the kinds of change."""
    changes: list[str] = []
    for key in [k for k in params if k not in KNOWN]:
        del params[key]
        changes.append("unknown_key")
    for key, kind in ((ParamKey.IPV6HINT, "ipv6hint"), (ParamKey.ECH, "ech")):
        if key in params:  # tested by key: a key without a value holds None
            del params[key]
            changes.append(kind)
    port = params.get(ParamKey.PORT)
    if port is not None and port.port != REPLAY_PORT:
        del params[ParamKey.PORT]  # the record stays (what a study measures), the browser goes to 443
        changes.append("port")
    alpn = params.get(ParamKey.ALPN)
    if alpn is not None and any(_is_h3(i) for i in alpn.ids) and not keep_h3:
        changes.append("h3")
        kept = tuple(i for i in alpn.ids if not _is_h3(i))
        if kept:
            params[ParamKey.ALPN] = ALPNParam(kept)
        else:
            del params[ParamKey.ALPN]
            params.pop(ParamKey.NO_DEFAULT_ALPN, None)  # it needs an alpn beside it
            changes.append("alpn")
    if ParamKey.IPV4HINT in params and address is not None:
        if tuple(params[ParamKey.IPV4HINT].addresses) != (address,):
            params[ParamKey.IPV4HINT] = IPv4HintParam((address,))
            changes.append("ipv4hint")
    elif ParamKey.IPV4HINT in params:
        del params[ParamKey.IPV4HINT]  # no lab address to give: a recorded one would lead out of the lab
        changes.append("ipv4hint")
    mandatory = params.get(ParamKey.MANDATORY)
    if mandatory is not None:
        kept_keys = tuple(k for k in mandatory.keys if k in params)
        if kept_keys != tuple(mandatory.keys):
            changes.append("mandatory")
            if kept_keys:
                params[ParamKey.MANDATORY] = MandatoryParam(kept_keys)
            else:
                del params[ParamKey.MANDATORY]
    return params, changes
