"""Chromium's DNS settings as data (profiles/chromium/*.toml) and an arm's `BrowserDns` in Chromium's terms.

The study's settings are features, switches and profile preferences; the arm's are
secure DNS (Local State `dns_over_https.*`: "secure" with the resolver's template
for DoH, "off" for every other arm, never "automatic", which falls back) and, for
DoH, a host-resolver rule that maps the DoH server's name to the resolver's
address, so that no lookup of it is made (Firefox's `network.trr.bootstrapAddr`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field

from harness.arms.base import BrowserDns
from harness.errors import HarnessError
from harness.paths import project_path
from harness.profile import load_profile

#: The DNS behaviour a study pins when it names none: the installed build's defaults.
CHROMIUM_DNS_CURRENT = "profiles/chromium/dns-current.toml"

SettingValue = bool | int | str


class ChromiumSetting(BaseModel):
    """One feature, switch or profile preference, its value and why (its source)."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    kind: Literal["feature", "switch", "preference"]
    value: SettingValue
    reason: str = Field(min_length=1)


class ChromiumDns(BaseModel):
    """A file of Chromium DNS settings and the build they were read from."""

    model_config = ConfigDict(extra="forbid")
    version: str = Field(min_length=1)  # the build the defaults were read from (a prefix of --version's)
    setting: list[ChromiumSetting]

    def as_dict(self) -> dict[str, SettingValue]:
        return {s.name: s.value for s in self.setting}

    def switches(self) -> list[str]:
        """Command-line switches: the features enabled and disabled, then the switches that are on."""
        on = [s.name for s in self.setting if s.kind == "feature" and s.value is True]
        off = [s.name for s in self.setting if s.kind == "feature" and s.value is False]
        argv = [f"--enable-features={','.join(on)}"] if on else []
        argv += [f"--disable-features={','.join(off)}"] if off else []
        for s in self.setting:
            if s.kind == "switch" and s.value is not False:
                argv.append(f"--{s.name}" if s.value is True else f"--{s.name}={s.value}")
        return argv

    def preferences(self) -> dict:
        """The profile preferences as the nested JSON of Default/Preferences."""
        return _nested({s.name: s.value for s in self.setting if s.kind == "preference"})


def load_chromium_dns(path: str | Path = CHROMIUM_DNS_CURRENT) -> ChromiumDns:
    """Load and validate a Chromium DNS settings file (errors name the file and line)."""
    settings = load_profile(project_path(path), ChromiumDns)
    kinds = {s.name: s.kind for s in settings.setting}
    for s in settings.setting:
        if s.kind == "feature" and not isinstance(s.value, bool):
            raise HarnessError(f"{path}: feature '{s.name}' must be true or false, not {s.value!r}")
    if len(kinds) != len(settings.setting):
        raise HarnessError(f"{path}: a setting is named twice")
    return settings


def local_state(dns: BrowserDns) -> dict:
    """Local State for ``dns``: secure DNS "secure" with its template, or "off" (the built-in resolver)."""
    if dns.resolver == "system":
        return {"dns_over_https": {"mode": "off", "templates": ""}}
    if dns.http3:
        raise HarnessError("Chromium has no DNS over HTTP/3 of its own: the DoH3 arm must run its stub")
    return {"dns_over_https": {"mode": "secure", "templates": dns.uri}}


def arm_switches(dns: BrowserDns) -> list[str]:
    """The DoH server's name mapped to the resolver's address: Chromium looks it up nowhere."""
    if dns.proxy_port is not None:  # `dnsstudy record` drives Firefox; a proxy here would go unnoticed
        raise HarnessError("Chromium does not record through a proxy: `dnsstudy record` uses Firefox")
    if dns.resolver == "system":
        return []
    host = urlsplit(dns.uri or "").hostname
    if not host or not dns.bootstrap:
        raise HarnessError(f"a DoH setting needs a template with a host and a bootstrap address: {dns}")
    return [f"--host-resolver-rules=MAP {host} {dns.bootstrap}"]


def _nested(flat: dict[str, SettingValue]) -> dict:
    out: dict = {}
    for dotted, value in flat.items():
        *parents, leaf = dotted.split(".")
        node = out
        for part in parents:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out
