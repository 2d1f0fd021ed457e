"""Claim files (profiles/claims/<source>.toml): the findings of one prior study, each checkable against a store.

A claim names what it compares the way its source does (the resolver
"cloudflare", the network "3g"); a study maps those names onto its own
(analysis/claims.py reads the mapping). Each claim says what the source
found as a region the store's figure must fall in: above or below a value,
within a tolerance of it, or at most / at least it.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

CLAIMS_DIR = Path(__file__).resolve().parent.parent / "profiles" / "claims"
#: The reference study's claims: the report shows them first.
REFERENCE = "hounsel-2019"

#: What a claim's figure is of, and where it is read (analysis/claim_measures.py has one reader per family).
METRICS = (
    "success_share",  # Successful visits, share of counted visits (percentage points)
    "error_share",  # visits of one error class, share of counted visits (percentage points)
    "onload",  # paired onLoad difference, median (ms)
    "fcp",  # paired First Contentful Paint difference, median (ms)
    "resolution_time",  # the timer's lookups paired by name, median difference (ms)
    "handshake_rtt",  # `dnsstudy bench handshake`: share of new connections above some RTTs (percentage points)
    "loss_success",  # `dnsstudy bench loss`: share of queries answered at one loss level (percentage points)
    "bytes",  # bytes on the wire per query
)
#: How the store's figure must lie against `value` (and `tolerance`) for the claim to hold.
EXPECTATIONS = ("greater", "less", "within", "at_most", "at_least")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Conditions(_Strict):
    """Where a claim was made, in its source's names; a key left out is any value."""

    network: str | None = None
    resolver: str | None = None
    protocol: str | None = None
    browser: str | None = None
    browser_life: Literal["fresh", "reused"] | None = None  # the store's browser_session
    loss_percent: float | None = Field(default=None, ge=0, le=100)  # bench loss sweeps only
    error_class: str | None = None  # error_share only: the class counted ("DNS Error")

    def merged(self, side: Conditions) -> Conditions:
        """These conditions with ``side``'s keys put over them."""
        return self.model_copy(update=side.model_dump(exclude_none=True))


class Claim(_Strict):
    """One finding: what it compares, what the source found, and what the store must show."""

    id: str = Field(pattern=r"^[a-z0-9][a-z0-9-]*$")
    citation: str = Field(min_length=1)  # table, figure, page or section of the source
    statement: str = Field(min_length=1)  # the finding in words
    figure: str = Field(min_length=1)  # the source's own number(s), as printed
    metric: Literal[METRICS]  # type: ignore[valid-type]
    conditions: Conditions = Conditions()
    a: Conditions = Conditions()  # the side the figure is of (a - b where b is given)
    b: Conditions | None = None  # the side it is compared with; none: a alone
    expect: Literal[EXPECTATIONS]  # type: ignore[valid-type]
    value: float = 0.0  # in the metric's unit: the boundary or centre of the region
    tolerance: float = Field(default=0.0, ge=0)  # the source's, in the metric's unit ("within 0.03 s")
    above_rtt: float | None = Field(default=None, gt=0)  # handshake_rtt: the multiple of the RTT counted
    min_sample: int = Field(ge=2)  # the fewest units (sites, names, connections, queries) a verdict needs

    @model_validator(mode="after")
    def _coherent(self) -> Claim:
        """Refuse combinations no reader can check, naming the key."""
        if self.expect == "within" and self.tolerance == 0:
            raise ValueError("tolerance: 'within' needs the source's tolerance (> 0)")
        if self.metric == "error_share" and not (self.a.error_class or self.conditions.error_class):
            raise ValueError("conditions.error_class: error_share needs the class counted")
        if self.metric == "handshake_rtt" and self.above_rtt is None:
            raise ValueError("above_rtt: handshake_rtt needs the multiple of the RTT counted")
        if self.metric == "loss_success" and self.sides()[0].loss_percent is None:
            raise ValueError("conditions.loss_percent: loss_success needs the loss level")
        if self.b is None and self.metric in ("onload", "fcp", "resolution_time"):
            raise ValueError(f"b: {self.metric} is a paired difference, it needs the side compared with")
        return self

    def sides(self) -> list[Conditions]:
        """The conditions of a, then of b if there is one."""
        return [self.conditions.merged(self.a)] + ([self.conditions.merged(self.b)] if self.b else [])


class ClaimSource(_Strict):
    """One prior study's claims: its file's stem is the name `--source` takes."""

    source: str = Field(min_length=1)  # the study, cited in full
    link: str = ""  # where it can be read
    notes: str = ""  # what the file leaves out, and why
    claims: list[Claim] = Field(min_length=1)
    name: str = ""  # the file's stem, set at load

    @model_validator(mode="after")
    def _distinct_ids(self) -> ClaimSource:
        seen: set[str] = set()
        for claim in self.claims:
            if claim.id in seen:
                raise ValueError(f"claim '{claim.id}': id: named twice in the file")
            seen.add(claim.id)
        return self


def load_source(path: Path) -> ClaimSource:
    """One claim file, validated; a mistake is one line naming the file, the claim and the key (ValueError)."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ValueError(f"{path}: cannot read ({exc.strerror})") from None
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: invalid TOML: {exc}") from None
    try:
        loaded = ClaimSource.model_validate(data)
    except ValidationError as exc:
        raise ValueError(f"{path}: {_where(exc, data)}") from None
    return loaded.model_copy(update={"name": path.stem})


def _where(exc: ValidationError, data: dict) -> str:
    """The first error as "claim 'ID': key: message" (or "key: message" outside a claim)."""
    first = exc.errors()[0]
    message = str(first["ctx"]["error"]) if first["type"] == "value_error" else first["msg"]
    loc = [str(part) for part in first["loc"]]
    if len(loc) >= 2 and loc[0] == "claims" and loc[1].isdigit():
        claims = data.get("claims") or []
        index = int(loc[1])
        claim = claims[index] if index < len(claims) and isinstance(claims[index], dict) else {}
        name = claim.get("id", f"#{index + 1}")
        key = ".".join(loc[2:])
        if not key and ": " in message:  # a claim-wide check names its key first
            key, message = message.split(": ", 1)
        return f"claim '{name}': {key or '(claim)'}: {message}"
    return f"{'.'.join(loc)}: {message}" if loc else message


def available(directory: Path = CLAIMS_DIR) -> list[str]:
    """The sources with a claim file, the reference study first."""
    names = sorted(p.stem for p in directory.glob("*.toml"))
    return sorted(names, key=lambda n: n != REFERENCE)


def load_sources(names: list[str] | None = None, directory: Path = CLAIMS_DIR) -> list[ClaimSource]:
    """The named sources (all of them unless named), each validated; an unknown name is one line naming the known."""
    known = available(directory)
    for name in names or []:
        if name not in known:
            raise ValueError(f"no claim file for source '{name}' in {directory} (have: {', '.join(known)})")
    return [load_source(directory / f"{name}.toml") for name in (names or known)]
