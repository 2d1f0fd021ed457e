"""A study file (profiles/studies/*.toml): which sites, how often, over which networks, resolvers and protocols.

The same file format drives a lab crawl and an Internet crawl; only the
site list and resolver names differ. Everything is validated at load, and
an error names the file, the line and the key. Sites are resolved from the
list here, so a crawl never starts with a selection the list cannot fill.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from harness.arms import arm_class, browser_protocols
from harness.browser.base import SessionPolicy
from harness.browser.prefs import DNS_CURRENT, load_prefs
from harness.browser.registry import DEFAULT_BROWSER, browser_class, browser_names, launch_group
from harness.browser.starting import browser_life
from harness.errors import HarnessError
from harness.paths import PROJECT_ROOT, checkout_hint, project_path
from harness.plan import PlannedVisit, make_plan
from harness.profile import line_of, load_profile
from harness.resolvers import available_resolvers, load_resolver, protocols_of
from harness.shaping.link_profile import available_profiles
from harness.sitelist import RankedList, Site, fetch_tranco, load_tranco
from harness.timer import timer_protocols

if TYPE_CHECKING:
    from harness.place import Place


def _browser_protocol(name: str) -> str:
    if name not in browser_protocols():
        raise ValueError(f"no browser arm for protocol '{name}' (have: {', '.join(browser_protocols())})")
    return name


def _timer_protocol(name: str) -> str:
    if name not in timer_protocols():
        raise ValueError(f"the timer has no protocol '{name}' (have: {', '.join(timer_protocols())})")
    return name


def _browser(name: str) -> str:
    if name not in browser_names():
        raise ValueError(f"unknown browser '{name}' (have: {', '.join(browser_names())})")
    return name


# Checked against the registry when a study loads, so a newly registered protocol is accepted at once.
BrowserProtocol = Annotated[str, AfterValidator(_browser_protocol)]
TimerProtocol = Annotated[str, AfterValidator(_timer_protocol)]
BrowserName = Annotated[str, AfterValidator(_browser)]

STUDY_DIR = PROJECT_ROOT / "profiles" / "studies"
#: The most visits one study may plan. The crawl holds the whole plan in memory (about 180 bytes a visit)
#: and writes it in one transaction before its first visit, so this bounds both at about 360 MB. It is 25
#: rounds of paper-2019's 80,000 visits, half a year at that study's pace of a round a week; a longer
#: campaign is several studies, whose stores the analysis reads together.
MAX_PLANNED_VISITS = 2_000_000
TRANCO_CACHE = PROJECT_ROOT / "tranco" / "cache"


class Selection(BaseModel):
    """A rank range of the list, and the name its sites go by in the results (e.g. "top", "tail")."""

    model_config = ConfigDict(extra="forbid")
    group: str = Field(pattern=r"^[a-z][a-z0-9-]*$")
    ranks: tuple[int, int]
    every: int = Field(default=1, ge=1)  # take every n-th rank: a sample spread over the range

    @field_validator("ranks")
    @classmethod
    def _ordered(cls, value: tuple[int, int]) -> tuple[int, int]:
        if value[0] < 1 or value[1] < value[0]:
            raise ValueError("must be [first, last] with 1 <= first <= last")
        return value


class SiteSource(BaseModel):
    """Where the sites come from: a list file (CSV or zip) or a Tranco list ID."""

    model_config = ConfigDict(extra="forbid")
    list_file: str | None = Field(default=None, alias="list")  # a Tranco-format CSV, or the zip Tranco serves
    tranco_id: str | None = None  # downloaded with the tranco package and cached
    list_id: str | None = None  # the list's Tranco ID, if the file name does not carry it
    list_date: str | None = None  # the day the list was published, for the record
    select: list[Selection] = Field(min_length=1)

    @model_validator(mode="after")
    def _one_source(self) -> SiteSource:
        if (self.list_file is None) == (self.tranco_id is None):
            raise ValueError("give exactly one of 'list' (a file) and 'tranco_id'")
        return self


class LinkCheckSettings(BaseModel):
    """The link check run at the start of every network block (lab only; see docs/network.md)."""

    model_config = ConfigDict(extra="forbid")
    probes: int = Field(default=200, ge=200)
    seconds: float = Field(default=2.0, gt=0, le=60)  # at least this long per direction for the rate test


class TimerStudySettings(BaseModel):
    """The resolution timer run after every block over the block's hostnames."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = True
    protocols: list[TimerProtocol] | None = None  # default: the study's
    timeout_ms: int = Field(default=5000, ge=1)
    idle_timeout_ms: int = Field(default=10000, ge=0)
    concurrency: int = Field(default=1, ge=1, le=64)  # queries in flight; each is still timed on its own

    @field_validator("protocols")
    @classmethod
    def _distinct_protocols(cls, value: list[str] | None) -> list[str] | None:
        return None if value is None else _distinct(value)


class ArmSettings(BaseModel):
    """How the browser's DNS arms run."""

    model_config = ConfigDict(extra="forbid")
    # How long a stub (Stubby for DoT) keeps an idle connection to the resolver; 10 s is Stubby's default.
    stub_idle_timeout_ms: int = Field(default=10000, ge=0, le=3_600_000)
    # The stub program per protocol whose arm runs one, e.g. {dot = "dnsproxy"}; default: the arm's first.
    stubs: dict[str, str] = Field(default_factory=dict)

    @field_validator("stubs")
    @classmethod
    def _known_stubs(cls, value: dict[str, str]) -> dict[str, str]:
        for protocol, stub in value.items():
            have = arm_class(_browser_protocol(protocol)).stubs
            if stub not in have:
                raise ValueError(f"{protocol}: no stub '{stub}' (the {protocol} arm has: {', '.join(have) or 'none'})")
        return value


class BrowserRestart(BaseModel):
    """When a browser that serves many visits (`browser_session = "reused"`) is replaced by a new one."""

    model_config = ConfigDict(extra="forbid")
    # After this many visits (0: never). Measured: PSS grew about 0.5 MiB a visit after the first ten (289 MiB
    # after 1 visit, 352 after 100; docs/visit.md, "A reused browser"), so 200 visits stay near 400 MiB.
    visits: int = Field(default=200, ge=0, le=100_000)
    # Once the browser's processes use more than this (proportional set size, MiB; 0: no limit).
    memory_mb: int = Field(default=2048, ge=0, le=1_000_000)


class LabFault(BaseModel):
    """A lab fault the crawl applies for its whole length (harness/lab/faults.py, docs/lab.md)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    resolver: str

    @field_validator("name")
    @classmethod
    def _known(cls, value: str) -> str:
        from harness.lab.faults import fault_names  # the lab's modules load only for studies that name faults

        if value not in fault_names():
            raise ValueError(f"unknown lab fault '{value}' (have: {', '.join(fault_names())})")
        return value


class StudyAnalysis(BaseModel):
    """How the study's results will be read, declared before its crawl (the store records it with the study).

    The names are the analysis's (analysis/significance.py), repeated here because the harness imports nothing
    of the analysis; a test holds the two lists together."""

    model_config = ConfigDict(extra="forbid")
    # How each grid's verdicts are adjusted together; None: the analysis profile's (Holm).
    multiple_comparisons: Literal["holm", "benjamini-hochberg"] | None = None
    # The smallest median difference (ms) the study means to detect: `study check` warns when its plan cannot.
    minimum_detectable_effect_ms: float | None = Field(default=None, gt=0, le=600_000)
    # Prior studies' names (profiles/claims/*.toml: a resolver "cloudflare", a network "3g") -> this study's
    # resolver or network that stands in for it, for `dnsstudy claims` and the report (docs/analysis.md, "Claims").
    claims_map: dict[Annotated[str, Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")], str] = Field(default_factory=dict)


def _browser_dns(value: str) -> str:
    if not project_path(value).exists():
        raise ValueError(f"no such file: {value}")
    load_prefs(value)  # a bad preference file fails `study check`, naming its own line
    return value


class Study(BaseModel):
    """A study file, validated."""

    model_config = ConfigDict(extra="forbid")
    name: str = Field(pattern=r"^[a-z0-9][a-z0-9._-]*$")
    description: str = Field(min_length=1)
    source: str = ""  # where the design comes from, if it reproduces one
    target: Literal["lab", "internet"]
    lab_profile: str | None = None  # lab studies: the lab they run against (default: profiles/lab/default.toml)
    seed: int
    rounds: int = Field(ge=1, le=MAX_PLANNED_VISITS)  # every round has a visit at least; the plan is checked at load
    duration_days: float | None = Field(default=None, gt=0)  # spread the rounds over this long
    networks: list[str] = Field(min_length=1)
    resolvers: list[str] = Field(min_length=1)
    protocols: list[BrowserProtocol] = Field(min_length=1)
    # The browsers every configuration is visited in: a factor of the plan, crossed with resolvers and protocols.
    browsers: list[BrowserName] = Field(default_factory=lambda: [DEFAULT_BROWSER], min_length=1)
    page_load_timeout_s: float = Field(default=30.0, gt=0, le=600)
    infrastructure_retries: int = Field(default=2, ge=0, le=10)
    sites: SiteSource
    link_check: LinkCheckSettings = LinkCheckSettings()
    timer: TimerStudySettings = TimerStudySettings()
    arms: ArmSettings = ArmSettings()
    # The browser's DNS behaviour (TRR timeouts, caching, prefetch, ...): a preference profile, each value sourced.
    browser_dns: Annotated[str, AfterValidator(_browser_dns)] = DNS_CURRENT
    # A new browser for every visit (the reference design), or one for the visits of a network block, cleared
    # before each (docs/visit.md); and whether the connection to the resolver is open before each navigation.
    browser_session: Literal["fresh", "reused"] = "fresh"
    # How long a fresh browser waits after its start before navigating (0: at once, the reference design's;
    # docs/visit.md, "A browser's first page", says what each choice measures).
    browser_settle_s: float = Field(default=0.0, ge=0, le=60)
    resolver_connection: Literal["cold", "warm"] = "cold"
    # The page's requests may use HTTP/3 (both browsers; in a lab, one whose web serves it). False: HTTP/2 over
    # TCP, the reference study's; Firefox's DoH3 arm turns it on all the same, recorded (docs/web.md, "HTTP/3").
    page_http3: bool = False
    browser_restart: BrowserRestart = BrowserRestart()
    faults: list[LabFault] = Field(default_factory=list)  # lab studies: faults applied while the crawl runs
    # Where the visits run, each by a worker of its own (docs/distributed.md); none: one host, `dnsstudy crawl`.
    vantage_points: list[Annotated[str, Field(pattern=r"^[a-z][a-z0-9-]{0,31}$")]] = Field(default_factory=list)
    analysis: StudyAnalysis = StudyAnalysis()

    @field_validator("networks")
    @classmethod
    def _networks(cls, value: list[str]) -> list[str]:
        known = available_profiles()
        for name in value:
            if name not in known:
                raise ValueError(f"no network profile '{name}' (profiles/network has: {', '.join(known)})")
        return _distinct(value)

    @field_validator("resolvers", "protocols", "vantage_points", "browsers")
    @classmethod
    def _distinct_values(cls, value: list[str]) -> list[str]:
        return _distinct(value)

    @field_validator("browser_session")
    @classmethod
    def _reusable_browsers(cls, value: str, info: ValidationInfo) -> str:
        if value == "reused":  # refused here, not at the first visit of a browser that cannot, mid-crawl
            for name in info.data.get("browsers", []):
                if not browser_class(name).reusable:
                    raise ValueError(f"browser '{name}' cannot serve many visits (it runs fresh only)")
        return value

    @field_validator("analysis")
    @classmethod
    def _claims_map_names_own(cls, value: StudyAnalysis, info: ValidationInfo) -> StudyAnalysis:
        """A claim's name is mapped onto one of this study's resolvers or networks, or the browser life its visits
        will record, nothing else."""
        own = [*info.data.get("resolvers", []), *info.data.get("networks", [])]
        if "browser_session" in info.data:
            policy = SessionPolicy(info.data["browser_session"], settle_s=info.data.get("browser_settle_s") or 0.0)
            own.append(browser_life(policy, warm_started=True))
        for name, target in value.claims_map.items():
            if target not in own:
                raise ValueError(
                    f"claims_map.{name}: '{target}' is none of the study's resolvers or networks, nor its browser life"
                )
        return value

    @field_validator("browser_settle_s")
    @classmethod
    def _settle_fresh_only(cls, value: float, info: ValidationInfo) -> float:
        if value and info.data.get("browser_session") == "reused":
            raise ValueError("a reused browser does not settle: it loads the warm-up page at its start instead")
        return value

    @field_validator("lab_profile")
    @classmethod
    def _lab_profile(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value and info.data.get("target") != "lab":
            raise ValueError("only a study whose target is the lab names a lab profile")
        if value and not project_path(value).exists():
            raise ValueError(f"no such file: {value}")
        return value

    @field_validator("faults")
    @classmethod
    def _faults_at_lab_resolvers(cls, value: list[LabFault], info: ValidationInfo) -> list[LabFault]:
        if value and info.data.get("target") != "lab":
            raise ValueError("only a lab study applies lab faults")
        for fault in value:
            if fault.resolver not in info.data.get("resolvers", []):
                raise ValueError(f"resolver '{fault.resolver}' is not one of the study's resolvers")
        return value

    @field_validator("resolvers")
    @classmethod
    def _internet_resolvers(cls, value: list[str], info: ValidationInfo) -> list[str]:
        if info.data.get("target") == "internet":  # lab resolvers are checked against the lab at crawl time
            known = available_resolvers()
            for name in value:
                if name not in known:
                    raise ValueError(f"no resolver profile '{name}' (have: {', '.join(known)})")
                _check_resolver_profile(name)
        return value

    @property
    def configurations(self) -> list[tuple[str, str]]:
        """(resolver, protocol) pairs visited: every pair the resolver serves (`default`: plain DNS only)."""
        return [(r, p) for r in self.resolvers for p in self.protocols if p in protocols_of(r)]

    @property
    def browsers_apart(self) -> bool:
        """Whether each block runs its browsers, and their launch groups, one after the other (harness/plan.py)."""
        return self.browser_session == "reused"

    @property
    def places(self) -> list[str]:
        """The vantage points' names; [""] for a single-host study."""
        return self.vantage_points or [""]

    @property
    def timer_pairs(self) -> list[tuple[str, str]]:
        """(resolver, protocol) pairs the timer runs after each block."""
        return [
            (r, p) for r in self.resolvers for p in (self.timer.protocols or self.protocols) if p in protocols_of(r)
        ]


def _check_resolver_profile(name: str) -> None:
    """Load a resolver profile now, so a bad one (say an IPv6 address) fails `study check`, not the crawl."""
    if name == "default":
        return  # the host's resolver: read from /etc/resolv.conf where the crawl runs
    try:
        load_resolver(name)
    except HarnessError as exc:  # a ValueError, so pydantic names the study's key and the profile names its own
        raise ValueError(str(exc)) from None


def _distinct(value: list[str]) -> list[str]:
    seen = [v for i, v in enumerate(value) if v in value[:i]]
    if seen:
        raise ValueError(f"'{seen[0]}' is listed twice")
    return value


@dataclass
class LoadedStudy:
    """A study with its sites resolved from the list."""

    path: Path
    study: Study
    sites: list[Site]
    site_list: RankedList

    @property
    def name(self) -> str:
        return self.study.name

    def plan(self) -> list[PlannedVisit]:
        s = self.study
        plan = partial(make_plan, browsers=s.browsers, browsers_apart=s.browsers_apart, launch_group=launch_group)
        return list(plan(self.sites, s.rounds, s.networks, s.configurations, s.seed, s.places))

    @property
    def visits_per_place(self) -> int:
        """Visits each vantage point makes."""
        s = self.study
        return len(self.sites) * s.rounds * len(s.networks) * len(s.configurations) * len(s.browsers)

    @property
    def visit_count(self) -> int:
        return self.visits_per_place * len(self.study.places)

    def record(self) -> dict:
        """What the store keeps as the study's configuration: the file, and the list it resolved to."""
        return {
            "study": self.study.model_dump(mode="json", by_alias=True),
            "file": str(self.path),
            "list": {
                "source": self.site_list.source,
                "list_id": self.site_list.list_id,
                "list_date": self.study.sites.list_date,
                "sites": len(self.sites),
                "converted_idns": self.site_list.converted_idns,
            },
        }


def as_current_study(stored: dict) -> dict:
    """A study as a store recorded it, with keys added since then at their defaults (so an older store resumes)."""
    try:
        return Study.model_validate(stored).model_dump(mode="json", by_alias=True)
    except ValueError:  # no longer valid (e.g. a network profile was removed): compare it as it is
        return stored


def study_path(name_or_path: str) -> Path:
    """A study by name (profiles/studies/NAME.toml) or by path."""
    path = Path(name_or_path)
    if path.suffix != ".toml" and "/" not in name_or_path:
        path = STUDY_DIR / f"{name_or_path}.toml"
        if not path.exists():
            known = ", ".join(sorted(p.stem for p in STUDY_DIR.glob("*.toml")))
            raise HarnessError(f"no study '{name_or_path}' (profiles/studies has: {known}){checkout_hint()}")
    return path


def load_study(name_or_path: str, tranco_cache: Path = TRANCO_CACHE) -> LoadedStudy:
    """Load and validate a study file, and resolve its sites; errors name file, line and key."""
    path = study_path(name_or_path)
    study = load_profile(path, Study)
    text = path.read_text(encoding="utf-8")

    def fail(key: tuple[str | int, ...], message: str) -> HarnessError:
        number = line_of(text, key)
        where = f"{path}:{number}" if number else str(path)
        return HarnessError(f"{where}: {'.'.join(map(str, key))}: {message}")

    source = study.sites
    if source.list_file is not None:
        list_file = project_path(source.list_file)
        if not list_file.exists():
            raise fail(("sites", "list"), f"no such file: {list_file}")
        ranked = load_tranco(list_file, source.list_id)
    else:
        assert source.tranco_id is not None  # SiteSource demands exactly one of the two
        ranked = load_tranco(fetch_tranco(source.tranco_id, tranco_cache), source.tranco_id)
    sites: list[Site] = []
    taken: dict[int, int] = {}
    for index, selection in enumerate(source.select):
        first, last = selection.ranks
        chosen = ranked.select(first, last, selection.group)[:: selection.every]
        if not chosen:
            raise fail(
                ("sites", "select", index, "ranks"), f"the list {ranked.source} has no site ranked {first}-{last}"
            )
        for site in chosen:
            if site.rank in taken:
                raise fail(
                    ("sites", "select", index, "ranks"),
                    f"rank {site.rank} is also in selection {taken[site.rank]}: selections must not overlap",
                )
            taken[site.rank] = index
        sites += chosen
    loaded = LoadedStudy(path=path, study=study, sites=sites, site_list=ranked)
    if loaded.visit_count > MAX_PLANNED_VISITS:  # arithmetic only: nothing of the plan exists yet
        raise fail(("rounds",), _too_many_visits(loaded))
    return loaded


def _too_many_visits(loaded: LoadedStudy) -> str:
    """Why a study's plan is refused: its size, as the product of its keys, against the maximum."""
    s = loaded.study
    return (
        f"{s.rounds} rounds x {len(loaded.sites)} sites x {len(s.networks)} networks x {len(s.configurations)} "
        f"(resolver, protocol) pairs"
        + (f" x {len(s.browsers)} browsers" if len(s.browsers) > 1 else "")
        + (f" x {len(s.places)} vantage points" if s.vantage_points else "")
        + f" plan {loaded.visit_count:,} visits, more than the maximum "
        f"{MAX_PLANNED_VISITS:,} a study may plan (split it into several studies)"
    )


def check_sites(loaded: LoadedStudy, place: Place) -> None:
    """A study's sites must be ones the place serves (a lab serves its synthetic web's sites only)."""
    served = place.served_sites()
    if served is None:
        return
    missing = [site.domain for site in loaded.sites if site.domain not in served]
    if missing:
        number = line_of(loaded.path.read_text(encoding="utf-8"), ("sites",))
        shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
        raise HarnessError(
            f"{loaded.path}:{number}: sites: the {place.kind}'s web does not serve {len(missing)} of the study's "
            f"{len(loaded.sites)} sites ({shown}); choose sites from the {place.kind}'s list or change its web"
        )


def check_resolvers(loaded: LoadedStudy, place: Place) -> None:
    """A study's resolvers must be the place's (a lab has its own); the error names the study file's line."""
    have = place.resolver_names()
    if have is None:  # any resolver profile (checked when the study loaded) the place can reach
        for name in loaded.study.resolvers:
            place.resolver(name)  # e.g. the Internet side's firewall refuses it: one line, before any visit
        return
    text = loaded.path.read_text(encoding="utf-8")
    for name in loaded.study.resolvers:
        if name not in have:
            number = line_of(text, ("resolvers",))
            raise HarnessError(
                f"{loaded.path}:{number}: resolvers: the {place.kind} has no resolver '{name}' "
                f"(it has: {', '.join(have)})"
            )
