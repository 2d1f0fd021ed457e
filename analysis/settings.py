"""The analysis profile (profiles/analysis/*.toml): thresholds, statistics, labels and colours."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from analysis.metrics import METRICS, Metric, unknown
from analysis.resampling import METHODS
from analysis.significance import ADJUSTMENTS
from analysis.stats import Reading

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
    # How an interval reads the bootstrap of sites (analysis/resampling.py): "expanded" or "percentile".
    interval: str = "expanded"
    resamples: int = Field(default=1000, ge=100, le=100_000)  # bootstrap resamples of the sites
    seed: int = 1  # of the resamples: the same store gives the same intervals
    # The adjustment of a grid's verdicts unless the study names one (analysis/significance.py).
    adjustment: str = "holm"

    @field_validator("interval")
    @classmethod
    def _known_interval(cls, name: str) -> str:
        if name not in METHODS:
            raise ValueError(f"unknown interval method '{name}' (known: {', '.join(METHODS)})")
        return name

    @field_validator("adjustment")
    @classmethod
    def _known_adjustment(cls, name: str) -> str:
        if name not in ADJUSTMENTS:
            raise ValueError(f"unknown adjustment '{name}' (known: {', '.join(ADJUSTMENTS)})")
        return name


class Spread(_Strict):
    """A network's paired differences as a study plans for them without a pilot (analysis/power.py)."""

    sd_ms: float = Field(gt=0)  # the standard deviation of a cell's paired differences
    site_share: float = Field(ge=0, lt=1)  # the share of their variance that lies between sites


class PowerSettings(_Strict):
    """What `dnsstudy study power` assumes where it has no pilot, and the power it plans for."""

    power: float = Field(default=0.8, gt=0.5, lt=1)
    source: str = Field(min_length=1)  # where the spreads come from
    default: Spread  # a network not named below
    networks: dict[str, Spread] = {}

    def spread(self, network: str) -> Spread:
        return self.networks.get(network, self.default)


class Labels(_Strict):
    resolvers: dict[str, str] = {}
    protocols: dict[str, str] = {}
    colours: dict[str, str] = {}
    networks: dict[str, str] = {}
    browsers: dict[str, str] = {}

    def resolver(self, name: str) -> str:
        return self.resolvers.get(name, name.capitalize())

    def protocol(self, name: str) -> str:
        return self.protocols.get(name, name.upper())

    def network(self, name: str) -> str:
        return self.networks.get(name, name)

    def browser(self, name: str) -> str:
        return self.browsers.get(name, name.capitalize())

    def configuration(self, resolver: str, protocol: str) -> str:
        """'Cloudflare DoT'."""
        return f"{self.resolver(resolver)} {self.protocol(protocol)}"

    def colour(self, protocol: str) -> str:
        return self.colours.get(protocol, "#555555")


class ReplaySettings(_Strict):
    """Studies on a web replayed from an archive (docs/replay.md): when the report flags a site."""

    # A site is flagged when its visits met more misses (requests the archive could not answer) than this
    # per visit, on average: its replayed page is no longer the recorded one.
    misses_per_visit: float = Field(default=0.0, ge=0)


class AnalysisSettings(_Strict):
    description: str
    source: str
    grid: GridSettings
    statistics: StatisticsSettings
    labels: Labels = Labels()
    power: PowerSettings | None = None
    replay: ReplaySettings = ReplaySettings()

    def reading(self) -> Reading:
        """What `analysis.stats.compare` needs of the profile."""
        g, s = self.grid, self.statistics
        return Reading(
            confidence=s.confidence,
            indistinguishable_ms=g.indistinguishable_ms,
            thresholds_ms=g.thresholds_ms,
            min_pairs=s.min_pairs,
            large_difference_ms=g.large_difference_ms,
            interval=s.interval,
            resamples=s.resamples,
            seed=s.seed,
        )


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
