"""The lab's declarative settings (profiles/lab/*.toml) and the address plan derived from them."""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from harness.paths import project_path
from harness.profile import load_profile

DEFAULT_LAB_PROFILE = "profiles/lab/default.toml"

# Offsets of fixed hosts inside the server /24 (the address plan is documented
# in docs/lab.md).
GATEWAY_OFFSET = 1
AUTH_OFFSET = 10
RESOLVER_FIRST_OFFSET = 53
REFUSED_OFFSET = 60
HANG_OFFSET = 61
BADCERT_OFFSET = 62
WEB_FIRST_OFFSET = 100
MAX_RESOLVERS = 6
MAX_WEB_ADDRESSES = 150


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class LocalResolver(_Strict):
    """Answers every lab name from local data: a resolver with a warm cache next door."""

    name: str
    kind: Literal["local"]
    description: str = ""
    # False: its local data leave out the web's HTTPS records, so one study can load the same pages with and
    # without them, one resolver beside the other (docs/web.md, "HTTPS records").
    https_records: bool = True


class RecursiveResolver(_Strict):
    """Resolves by asking the lab's authoritative server over a delayed path.

    With ``cache_max_ttl = 0`` nothing stays cached, so every query is a
    cache miss that costs ``upstream_rtt_ms``: a resolver far from the
    authoritative servers, serving from a cold cache.
    """

    name: str
    kind: Literal["recursive"]
    description: str = ""
    upstream_rtt_ms: float = Field(ge=0, le=10_000)
    upstream_jitter_ms: float = Field(default=0, ge=0, le=1_000)
    cache_max_ttl: int = Field(default=0, ge=0, le=86_400)


Resolver = Annotated[LocalResolver | RecursiveResolver, Field(discriminator="kind")]


class WebSettings(_Strict):
    """Which sites the synthetic web serves and how their pages are shaped."""

    sites: str
    top: int = Field(ge=0)
    shape: str
    seed: int
    # A replay archive (docs/replay.md): the lab serves its recorded pages and DNS instead of the synthetic web.
    archive: str | None = None
    # Replay each response after the server's recorded wait (its think time); false: at once.
    replay_wait: bool = True
    # HTTP/3 beside HTTP/2 on every web address (the h3front in front of nginx, announced by Alt-Svc;
    # docs/web.md, "HTTP/3"). The synthetic web only for now.
    http3: bool = False
    # HTTPS records (RFC 9460) in the zones: a profile of the shares of sites with a record, with Alt-Svc only
    # and with neither (profiles/web/https-records.toml; harness/lab/svcb.py). None: no zone has one.
    https_records: str | None = None
    # Encrypted Client Hello: every HTTPS record carries the lab's ECH configuration and the front accepts it,
    # over QUIC and over TCP, which it then takes from nginx (harness/lab/ech.py; docs/web.md, "ECH").
    ech: bool = False

    @model_validator(mode="after")
    def _records_need_http3(self) -> WebSettings:
        if self.https_records and not self.http3:
            raise ValueError("https_records announces HTTP/3 (alpn h3): it needs http3 = true")
        if self.ech and not self.https_records:
            raise ValueError("ech is published in HTTPS records: it needs https_records")
        return self


class LabSettings(_Strict):
    """Everything `lab up` needs; see profiles/lab/default.toml."""

    prefix: str
    subnet: str
    resolvers: list[Resolver] = Field(min_length=1, max_length=MAX_RESOLVERS)
    web_addresses: int = Field(ge=1, le=MAX_WEB_ADDRESSES)
    web: WebSettings
    # Off: no resolver issues TLS 1.3 session tickets, so unbound's DoT and DoH are
    # never resumed. On: unbound issues them and answers DoT without Nagle (docs/lab.md,
    # "Resumption"). The QUIC front (dnsproxy) issues tickets and takes 0-RTT either way.
    tls_resumption: bool = False

    @field_validator("prefix")
    @classmethod
    def _prefix_is_short_name(cls, value: str) -> str:
        # Namespace names are "<prefix>-client" etc.; interface names stay
        # fixed inside the namespaces, so only the namespace name limits length.
        if not re.fullmatch(r"[a-z][a-z0-9]{0,11}", value):
            raise ValueError("must be 1-12 lower-case letters or digits, starting with a letter")
        return value

    @field_validator("subnet")
    @classmethod
    def _subnet_is_slash23(cls, value: str) -> str:
        try:
            net = ipaddress.IPv4Network(value)
        except ValueError as exc:
            raise ValueError(f"not an IPv4 network: {exc}") from exc
        if net.prefixlen != 23:
            raise ValueError("must be an IPv4 /23 (one /24 for the client link, one for the servers)")
        return value

    @model_validator(mode="after")
    def _names_unique(self) -> LabSettings:
        names = [r.name for r in self.resolvers]
        for name in names:
            if not re.fullmatch(r"[a-z][a-z0-9-]{0,20}", name):
                raise ValueError(f"resolver name {name!r} must be a DNS label of lower-case letters, digits, '-'")
        if len(set(names)) != len(names):
            raise ValueError(f"resolver names must be unique, got {names}")
        return self


@dataclass(frozen=True)
class AddressPlan:
    """Every address of one lab, derived from its /23."""

    client_net: ipaddress.IPv4Network
    server_net: ipaddress.IPv4Network

    @property
    def client(self) -> str:
        return str(self.client_net.network_address + 2)

    @property
    def shaper_client_side(self) -> str:
        return str(self.client_net.network_address + GATEWAY_OFFSET)

    @property
    def shaper_server_side(self) -> str:
        return str(self.server_net.network_address + GATEWAY_OFFSET)

    def server(self, offset: int) -> str:
        return str(self.server_net.network_address + offset)

    @property
    def auth(self) -> str:
        return self.server(AUTH_OFFSET)

    def resolver(self, index: int) -> str:
        return self.server(RESOLVER_FIRST_OFFSET + index)

    @property
    def refused(self) -> str:
        return self.server(REFUSED_OFFSET)

    @property
    def hang(self) -> str:
        return self.server(HANG_OFFSET)

    @property
    def badcert(self) -> str:
        return self.server(BADCERT_OFFSET)

    def web(self, count: int) -> list[str]:
        return [self.server(WEB_FIRST_OFFSET + i) for i in range(count)]


@dataclass(frozen=True)
class LabConfig:
    """A validated lab profile plus the names and addresses derived from it."""

    settings: LabSettings
    source: Path

    @property
    def prefix(self) -> str:
        return self.settings.prefix

    @property
    def namespaces(self) -> dict[str, str]:
        """Role -> namespace name."""
        return {role: f"{self.prefix}-{role}" for role in ("client", "shaper", "server")}

    @property
    def addresses(self) -> AddressPlan:
        net = ipaddress.IPv4Network(self.settings.subnet)
        client_net, server_net = net.subnets(new_prefix=24)
        return AddressPlan(client_net=client_net, server_net=server_net)

    @property
    def network(self) -> ipaddress.IPv4Network:
        return ipaddress.IPv4Network(self.settings.subnet)

    def with_overrides(
        self,
        prefix: str | None = None,
        subnet: str | None = None,
        web_archive: str | None = None,
        replay_wait: bool | None = None,
    ) -> LabConfig:
        """Another lab from the same profile (e.g. a second user's, or a test's, or one replaying an archive,
        with or without its recorded waits: ``replay_wait``, None keeping the profile's)."""
        data = self.settings.model_dump()
        if prefix:
            data["prefix"] = prefix
        if subnet:
            data["subnet"] = subnet
        if web_archive:
            data["web"]["archive"] = web_archive
        if replay_wait is not None:
            data["web"]["replay_wait"] = replay_wait
        return LabConfig(settings=LabSettings.model_validate(data), source=self.source)


def load_lab_config(path: str | Path = DEFAULT_LAB_PROFILE) -> LabConfig:
    """Load and validate a lab profile."""
    source = project_path(path)
    return LabConfig(settings=load_profile(source, LabSettings), source=source)
