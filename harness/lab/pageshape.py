"""The page-shape model: how many hostnames, requests and bytes a synthetic page has."""

from __future__ import annotations

import math
import random
from dataclasses import dataclass
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from harness.paths import project_path
from harness.profile import load_profile
from harness.sitelist import check_label

_Z90 = 1.2815515655446004  # standard normal 90th percentile

RESOURCE_TYPES = ("img", "js", "css")

# A third-party label becomes the first label of lab hostnames (<label>.<site>) in unbound's local-data,
# nginx's server names and certificates: one lower-case DNS label, nothing that could end a quoted string.
DnsLabel = Annotated[str, AfterValidator(check_label)]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class HostnameShape(_Strict):
    median: float = Field(gt=0)
    mean: float = Field(gt=0)
    max: int = Field(ge=1)
    first_party_min: int = Field(ge=1)
    first_party_max: int = Field(ge=1, le=4)

    @model_validator(mode="after")
    def _consistent(self) -> HostnameShape:
        if self.mean < self.median:
            raise ValueError("mean must be at least the median (the model is log-normal)")
        if self.first_party_max < self.first_party_min:
            raise ValueError("first_party_max must be at least first_party_min")
        return self


class RequestShape(_Strict):
    median: float = Field(gt=1)
    p90: float = Field(gt=1)


class ByteShape(_Strict):
    median_kb: float = Field(gt=0)
    p90_kb: float = Field(gt=0)
    object_min_bytes: int = Field(ge=64)
    object_max_bytes: int = Field(ge=64)


class TypeShape(_Strict):
    request_share: dict[str, float]
    byte_share: dict[str, float]
    object_sigma: float = Field(ge=0, le=4)

    @model_validator(mode="after")
    def _shares(self) -> TypeShape:
        for name, shares in (("request_share", self.request_share), ("byte_share", self.byte_share)):
            if set(shares) != set(RESOURCE_TYPES):
                raise ValueError(f"{name} must give exactly {list(RESOURCE_TYPES)}")
            if any(v < 0 for v in shares.values()) or abs(sum(shares.values()) - 1) > 1e-6:
                raise ValueError(f"{name} must be non-negative and sum to 1")
        return self


class ThirdPartyShape(_Strict):
    pool_domains: int = Field(ge=1)
    labels: list[DnsLabel] = Field(min_length=1)
    zipf_exponent: float = Field(ge=0)

    @field_validator("labels")
    @classmethod
    def _distinct_labels(cls, value: list[str]) -> list[str]:
        # A label given twice would name the same hostname twice, and double its Zipf weight unnoticed.
        twice = next((label for i, label in enumerate(value) if label in value[:i]), None)
        if twice:
            raise ValueError(f"'{twice}' is listed twice")
        return value


class LateShape(_Strict):
    share: float = Field(ge=0, le=1)


class PageShape(_Strict):
    """The model's parameters, as in profiles/web/page-shape.toml."""

    hostnames: HostnameShape
    requests: RequestShape
    bytes: ByteShape
    types: TypeShape
    third_party: ThirdPartyShape
    late: LateShape


def load_page_shape(path: str) -> PageShape:
    """Load and validate a page-shape profile."""
    return load_profile(project_path(path), PageShape)


@dataclass(frozen=True)
class LogNormal:
    """A log-normal distribution given by mu and sigma of the underlying normal."""

    mu: float
    sigma: float

    @classmethod
    def from_median_mean(cls, median: float, mean: float) -> LogNormal:
        # mean = exp(mu + sigma^2 / 2), median = exp(mu)
        return cls(math.log(median), math.sqrt(2 * math.log(mean / median)))

    @classmethod
    def from_median_p90(cls, median: float, p90: float) -> LogNormal:
        return cls(math.log(median), max(0.0, math.log(p90 / median) / _Z90))

    def sample(self, rng: random.Random) -> float:
        return rng.lognormvariate(self.mu, self.sigma)


@dataclass(frozen=True)
class PageCounts:
    """The drawn size of one page."""

    hostnames: int
    first_party: int
    late_hostnames: int
    requests: int  # subresources, the HTML not included
    total_bytes: int


def draw_counts(shape: PageShape, rng: random.Random) -> PageCounts:
    """Draw hostnames, requests and bytes for one page."""
    h = shape.hostnames
    hostnames = min(h.max, max(1, round(LogNormal.from_median_mean(h.median, h.mean).sample(rng))))
    first_party = min(hostnames, rng.randint(h.first_party_min, h.first_party_max))
    third = hostnames - first_party
    late = min(third, round(third * shape.late.share))
    r = shape.requests
    requests = round(LogNormal.from_median_p90(r.median, r.p90).sample(rng)) - 1
    # Every hostname serves at least one object, and the late loader is one more.
    requests = max(requests, hostnames + (1 if late else 0))
    b = shape.bytes
    total = LogNormal.from_median_p90(b.median_kb * 1000, b.p90_kb * 1000).sample(rng)
    return PageCounts(hostnames, first_party, late, requests, int(total))
