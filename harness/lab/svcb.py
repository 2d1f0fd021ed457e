"""HTTPS records (RFC 9460) in the lab's zones: which sites publish one, which announce HTTP/3 by Alt-Svc only.

A lab whose `[web]` names a profile under `https_records` (profiles/web/https-records.toml) draws, for every
registered domain of the synthetic web, one of three kinds in the profile's shares: "record" (every hostname of
the site has an HTTPS record, `alpn` h3 and h2 and its address as `ipv4hint`, and nginx announces HTTP/3 by
Alt-Svc too), "alt_svc" (the header only) or "none" (neither: the site's pages are HTTP/2 only). The draw is
deterministic from the web's seed and the domain, as the pages are. Without the key no zone has an HTTPS record
and, with `http3`, every site announces it (docs/web.md, "HTTPS records").
"""

from __future__ import annotations

import random
import tomllib
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from harness.paths import project_path

Kind = Literal["record", "alt_svc", "none"]
KINDS: tuple[Kind, ...] = ("record", "alt_svc", "none")
#: What a site of kind "record" publishes for each of its hostnames (the address follows as `ipv4hint`).
ALPN = "h3,h2"


class HttpsShares(BaseModel):
    """The shares of registered domains of each kind; they sum to 1."""

    model_config = ConfigDict(extra="forbid")
    record: float = Field(ge=0, le=1)
    alt_svc: float = Field(ge=0, le=1)
    none: float = Field(ge=0, le=1)

    @model_validator(mode="after")
    def _sum_to_one(self) -> HttpsShares:
        total = self.record + self.alt_svc + self.none
        if abs(total - 1) > 1e-9:
            raise ValueError(f"the shares of record, alt_svc and none sum to {total}, not 1")
        return self


def load_shares(path: str) -> HttpsShares:
    """The `[shares]` of an HTTPS-records profile (a path relative to the project, or absolute)."""
    data = tomllib.loads(project_path(path).read_text())
    return HttpsShares.model_validate(data.get("shares", {}))


def site_kind(seed: int, domain: str, shares: HttpsShares) -> Kind:
    """The kind a registered domain is given: the same for the same seed and domain in every run."""
    draw = random.Random(f"{seed}:https:{domain}").random()
    if draw < shares.record:
        return "record"
    return "alt_svc" if draw < shares.record + shares.alt_svc else "none"


def site_kinds(seed: int, domains: list[str], shares: HttpsShares) -> dict[str, Kind]:
    """Each domain's kind."""
    return {domain: site_kind(seed, domain, shares) for domain in domains}


def https_rdata(address: str, ech: str | None = None) -> str:
    """The HTTPS record's data for a hostname on ``address``: ServiceMode, the name itself, HTTP/3 and HTTP/2,
    and ``ech``, an ECHConfigList in base64 (harness/lab/ech.py), if the lab has one."""
    return f'1 . alpn="{ALPN}" ipv4hint={address}' + (f" ech={ech}" if ech else "")
