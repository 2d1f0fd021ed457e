"""Firefox preferences kept as data (profiles/firefox/*.toml), each with its reason."""

from __future__ import annotations

import json
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from harness.paths import project_path
from harness.profile import load_profile

QUIET_OFFLINE = "profiles/firefox/quiet-offline.toml"
#: The browser's DNS behaviour a study pins when it names none: current Firefox's defaults.
DNS_CURRENT = "profiles/firefox/dns-current.toml"

PrefValue = bool | int | str


class Pref(BaseModel):
    """One preference and why it is set."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(min_length=1)
    value: PrefValue
    reason: str = Field(min_length=1)

    @field_validator("name")
    @classmethod
    def _plain_name(cls, name: str) -> str:
        if any(c in name for c in "\"'\\\n") or name.strip() != name:
            raise ValueError("a preference name has no quotes, backslashes, spaces or newlines")
        return name


class PrefSet(BaseModel):
    """A file of preferences."""

    model_config = ConfigDict(extra="forbid")
    pref: list[Pref]

    def as_dict(self) -> dict[str, PrefValue]:
        return {p.name: p.value for p in self.pref}


def load_prefs(path: str | Path = QUIET_OFFLINE) -> PrefSet:
    """Load and validate a preference file (errors name the file and line)."""
    return load_profile(project_path(path), PrefSet)


def user_js(prefs: dict[str, PrefValue]) -> str:
    """Render preferences as user.js lines (JSON literals are valid there)."""
    return "".join(f'user_pref("{name}", {json.dumps(value)});\n' for name, value in prefs.items())
