"""`LinkProfile`: what a network profile (profiles/network/*.toml) asks of the link, per direction."""

from __future__ import annotations

from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from harness.errors import HarnessError
from harness.paths import PROJECT_ROOT, project_path
from harness.profile import load_profile

NETWORK_DIR = PROJECT_ROOT / "profiles" / "network"


class Direction(BaseModel):
    """Impairments applied to packets travelling one way. Zero or absent: none."""

    model_config = ConfigDict(extra="forbid")
    delay_ms: float = Field(default=0.0, ge=0, le=10_000)
    jitter_ms: float = Field(default=0.0, ge=0, le=10_000)
    loss_percent: float = Field(default=0.0, ge=0, le=100)
    rate_mbit: float | None = Field(default=None, gt=0, le=100_000)  # None: not limited

    @property
    def shaped(self) -> bool:
        return bool(self.delay_ms or self.jitter_ms or self.loss_percent or self.rate_mbit)


class LinkProfile(BaseModel):
    """A network profile: uplink is client -> servers, downlink servers -> client."""

    model_config = ConfigDict(extra="forbid")
    name: str = ""  # the file's stem, filled in at load
    description: str = Field(min_length=1)
    source: str = Field(min_length=1)  # where the figures come from
    uplink: Direction = Direction()
    downlink: Direction = Direction()

    @property
    def shaped(self) -> bool:
        return self.uplink.shaped or self.downlink.shaped

    def round_trip(self) -> dict[str, float]:
        """What a request/response pair sees: added RTT, its jitter (SD) and the chance either packet is lost."""
        up, down = self.uplink, self.downlink
        return {
            "added_rtt_ms": round(up.delay_ms + down.delay_ms, 3),
            "rtt_jitter_ms": round((up.jitter_ms**2 + down.jitter_ms**2) ** 0.5, 3),
            "pair_loss_percent": round(100 * (1 - (1 - up.loss_percent / 100) * (1 - down.loss_percent / 100)), 3),
        }


def available_profiles() -> list[str]:
    return sorted(p.stem for p in NETWORK_DIR.glob("*.toml"))


def load_link_profile(name_or_path: str) -> LinkProfile:
    """A profile by name (profiles/network/NAME.toml) or by path."""
    path = Path(name_or_path)
    if path.suffix != ".toml":
        path = NETWORK_DIR / f"{name_or_path}.toml"
    else:
        path = project_path(path)
    if not path.exists():
        raise HarnessError(f"no network profile '{name_or_path}' (have: {', '.join(available_profiles())})")
    profile = load_profile(path, LinkProfile)
    return profile.model_copy(update={"name": path.stem})
