"""The analysis profile (profiles/analysis/*.toml): thresholds, statistics, labels and colours."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from analysis.metrics import METRICS, Metric, unknown

PROFILE_DIR = Path(__file__).resolve().parent.parent / "profiles" / "analysis"
DEFAULT_PROFILE = PROFILE_DIR / "paper-2019.toml"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GridSettings(_Strict):
    thresholds_ms: tuple[float, float, float]
    indistinguishable_ms: float = Field(gt=0)
    large_difference_ms: float = Field(gt=0)  # the "slower/faster by more than" of each cell's two shares
    # The metrics to pair and draw (analysis/metrics.py), in report order. Defaults to the paper's alone, so a
    # profile written before paint metrics existed reads as it always did.
    metrics: list[str] = Field(default=["onload"], min_length=1)

    @field_validator("metrics")
    @classmethod
    def _known_metrics(cls, names: list[str]) -> list[str]:
        """Refuse unknown or repeated metric names, naming them and the known ones."""
        if bad := unknown(names):
            raise ValueError(f"unknown metric {', '.join(map(repr, bad))} (known: {', '.join(METRICS)})")
        if len(set(names)) != len(names):
            raise ValueError(f"a metric is named twice in {names}")
        return names

    def metric_list(self) -> list[Metric]:
        """The profile's metrics, resolved."""
        return [METRICS[n] for n in self.metrics]


class StatisticsSettings(_Strict):
    confidence: float = Field(gt=0.5, lt=1)
    min_pairs: int = Field(ge=1)


class Labels(_Strict):
    resolvers: dict[str, str] = {}
    protocols: dict[str, str] = {}
    colours: dict[str, str] = {}
    networks: dict[str, str] = {}

    def resolver(self, name: str) -> str:
        return self.resolvers.get(name, name.capitalize())

    def protocol(self, name: str) -> str:
        return self.protocols.get(name, name.upper())

    def network(self, name: str) -> str:
        return self.networks.get(name, name)

    def configuration(self, resolver: str, protocol: str) -> str:
        """'Cloudflare DoT'."""
        return f"{self.resolver(resolver)} {self.protocol(protocol)}"

    def colour(self, protocol: str) -> str:
        return self.colours.get(protocol, "#555555")


class AnalysisSettings(_Strict):
    description: str
    source: str
    grid: GridSettings
    statistics: StatisticsSettings
    labels: Labels = Labels()


def load_settings(path: Path = DEFAULT_PROFILE) -> AnalysisSettings:
    """Load an analysis profile; a mistake is one line naming the file and key."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        return AnalysisSettings.model_validate(data)
    except OSError as exc:
        raise ValueError(f"{path}: cannot read ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: invalid TOML: {exc}") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        # A validator's own ValueError reads better without pydantic's "Value error, " in front of it.
        message = str(first["ctx"]["error"]) if first["type"] == "value_error" else first["msg"]
        raise ValueError(f"{path}: {'.'.join(map(str, first['loc']))}: {message}") from None
