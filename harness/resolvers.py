"""Resolver profiles for the Internet (profiles/resolvers/*.toml) and the host's own resolver."""

from __future__ import annotations

import ipaddress
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

from harness.errors import HarnessError
from harness.paths import PROJECT_ROOT
from harness.place import Resolver
from harness.profile import load_profile
from harness.protocols import DOH3, DOQ, names, plain_protocols

RESOLVER_DIR = PROJECT_ROOT / "profiles" / "resolvers"
HOST_RESOLV_CONF = Path("/etc/resolv.conf")
#: Said wherever an IPv6 resolver is refused: the client namespaces (lab and Internet) have IPv4 routes only.
NO_IPV6 = "IPv6 resolvers are not supported yet (the client namespace has IPv4 routes only)"


def ipv4_address(value: str) -> str:
    """``value`` if it is an IPv4 address; a ValueError saying why not (IPv6 named as unsupported)."""
    try:
        address = ipaddress.ip_address(value)
    except ValueError:
        raise ValueError("not an IP address") from None
    if address.version == 6:
        raise ValueError(NO_IPV6)
    return value


def _no_ipv6_host(uri: str | None) -> str | None:
    """``uri`` unless its host is an IPv6 literal (https://[2606:4700::1111]/...), which the client cannot reach."""
    if uri is not None and urlsplit(uri).netloc.split("@")[-1].startswith("["):
        raise ValueError(f"{NO_IPV6}: give a name or an IPv4 address as the URI's host")
    return uri


class ResolverProfile(BaseModel):
    model_config = ConfigDict(extra="forbid")
    description: str = Field(min_length=1)
    source: str = Field(min_length=1)
    address: str
    tls_name: str = Field(min_length=1)
    doh_uri: str = Field(pattern=r"^https://")
    doq_port: int | None = Field(default=None, ge=1, le=65535)
    doh3_uri: str | None = Field(default=None, pattern=r"^https://")

    @field_validator("address")
    @classmethod
    def _ip(cls, value: str) -> str:
        try:
            return ipv4_address(value)
        except ValueError as exc:
            raise ValueError(f"{exc}: give the resolver's IPv4 address") from None

    @field_validator("doh_uri", "doh3_uri")
    @classmethod
    def _uri_host(cls, value: str | None) -> str | None:
        return _no_ipv6_host(value)


def protocols_of(name: str) -> set[str]:
    """The protocols a resolver serves, by name: the host's `default` resolver serves plain DNS only; a
    public profile serves Do53, DoT and DoH, and DoQ and DoH3 where it names their endpoints; a lab
    resolver (no profile file) serves every registered protocol.
    """
    if name == "default":
        return set(plain_protocols())
    if not (RESOLVER_DIR / f"{name}.toml").exists():
        return set(names())
    profile = load_resolver(name)
    missing = {DOQ.name: profile.doq_port is None, DOH3.name: profile.doh3_uri is None}
    return {p for p in names() if not missing.get(p, False)}


def available_resolvers() -> list[str]:
    return ["default", *sorted(p.stem for p in RESOLVER_DIR.glob("*.toml"))]


def host_resolver(resolv_conf: Path = HOST_RESOLV_CONF) -> Resolver:
    """The host's first nameserver, as a Do53-only resolver named `default`."""
    try:
        lines = resolv_conf.read_text().splitlines()
    except OSError as exc:
        raise HarnessError(f"{resolv_conf}: cannot read the host's resolver ({exc.strerror})") from None
    servers = [line.split()[1] for line in lines if line.split()[:1] == ["nameserver"] and len(line.split()) > 1]
    if not servers:
        raise HarnessError(f"{resolv_conf}: no 'nameserver' line, so there is no host resolver to use")
    try:
        ipv4_address(servers[0])
    except ValueError as exc:
        raise HarnessError(
            f"{resolv_conf}: nameserver: {exc} (got {servers[0]!r}); put an IPv4 nameserver first or choose a "
            "resolver profile"
        ) from None
    if ipaddress.ip_address(servers[0]).is_loopback:
        raise HarnessError(
            f"{resolv_conf}: the host's resolver {servers[0]} is on loopback, which the client "
            "namespace cannot reach; choose a resolver profile instead"
        )
    return Resolver(name="default", address=servers[0], tls_name="", doh_uri="")


def load_resolver(name: str) -> Resolver:
    """A resolver by profile name (or `default`)."""
    if name == "default":
        return host_resolver()
    path = RESOLVER_DIR / f"{name}.toml"
    if not path.exists():
        raise HarnessError(f"no resolver profile '{name}' (have: {', '.join(available_resolvers())})")
    p = load_profile(path, ResolverProfile)
    return Resolver(
        name=name, address=p.address, tls_name=p.tls_name, doh_uri=p.doh_uri, doq_port=p.doq_port, doh3_uri=p.doh3_uri
    )
