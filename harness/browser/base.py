"""The interface every browser implements, what one page load reports, and the registry of browsers by name.

A visit needs from a browser only this: `start` it for a DNS arm, `load` one
URL within a time limit and collect what the page reports (`PageLoad`: the
network events, in WebDriver BiDi's shape, the HAR is built from, onLoad, DOMContentLoaded, FCP, LCP, the
navigation's outcome), `stop` it, and the HAR of what it loaded (`har`).
From the place it needs the client namespace, whether to trust the place's
CA, the account it runs as and the arm's preferences. Adding a browser, or
another way to run one, is one new `Browser` subclass decorated with
`register_browser` and imported by harness/browser/registry.py;
harness/visit.py does not change.

A browser may serve many visits (`SessionPolicy`, mode "reused"): then
`start` reuses the running browser, having cleared everything one visit
could leave to the next, `stop` ends only the visit, and `close` ends the
browser (a network block's end). A browser says it can with `reusable`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar, TypeVar

from harness import __version__
from harness.browser.account import BrowserAccount
from harness.browser.har import PageInfo, build_har
from harness.errors import HarnessError
from harness.place import ClientSide

if TYPE_CHECKING:
    from harness.arms.base import BrowserDns, DnsArm


@dataclass
class PageLoad:
    """Everything the browser observed from `start` to `stop` of one visit; classification happens elsewhere."""

    exception: str | None = None  # the WebDriver exception class of the navigation, if any
    message: str | None = None  # its first line, kept raw and never parsed
    document_uri: str | None = None  # e.g. about:neterror?e=dnsNotFound&...
    error_page: bool = False  # the document is the browser's own page (an error page), not the site's
    page: PageInfo | None = None
    bidi_on_load_ms: float | None = None
    next_hop_protocol: str | None = None
    # The BiDi navigation events and the network events (Chromium's from BiDi, Firefox's from the harness's
    # recorder in BiDi's shape) the HAR is built from.
    events: list[dict] = field(default_factory=list)
    driver_failure: str | None = None  # the driver or browser failed (not the page)
    watchdog_fired: bool = False
    phases: dict[str, float] = field(default_factory=dict)
    trr_failure: str | None = None  # the error page's id of its DNS-over-HTTPS failure, e.g. ...-trr-only-timeout
    net_error: str | None = None  # Chromium: the navigation request's net::ERR_* code (its error page names none)
    paint: dict = field(default_factory=dict)  # fcp and lcp in ms from navigation start, None where not reported
    prefs: dict = field(default_factory=dict)  # the DNS settings' values read back from the running browser
    ready: dict | None = None  # what a reused browser had ready before the navigation (`ReusedSession._await_ready`)

    def add_phases(self, phases: dict[str, float]) -> PageLoad:
        """This load, with ``phases`` timed outside the browser (a warm-up query) added to its own."""
        self.phases.update(phases)
        return self


#: How browsers serve visits: a new one per visit (the reference design), or one for many visits.
SESSION_MODES = ("fresh", "reused")


@dataclass(frozen=True)
class SessionPolicy:
    """Whether one browser serves many visits, and when a reused one is replaced by a new one."""

    mode: str = "fresh"
    restart_after: int = 0  # a reused browser is replaced after this many visits (0: never)
    memory_limit_mb: int = 0  # ... or once its processes' resident memory passes this (0: no limit)
    settle_s: float = 0.0  # a fresh browser waits this long after its start before navigating (`browser_settle_s`)

    def __post_init__(self) -> None:
        if self.mode not in SESSION_MODES:
            raise HarnessError(f"browser session '{self.mode}': choose one of {', '.join(SESSION_MODES)}")
        if self.restart_after < 0 or self.memory_limit_mb < 0:
            raise HarnessError(f"restart_after and memory_limit_mb must be >= 0 (got {self})")
        if self.settle_s < 0 or (self.settle_s and self.reused):
            raise HarnessError(f"browser_settle_s {self.settle_s:g}: a fresh browser's wait, >= 0 (got {self})")

    @property
    def reused(self) -> bool:
        return self.mode == "reused"


class Browser(ABC):
    """A browser the visits of one place run in.

    Per visit: `start(arm)`, then `load(url)`, then `stop()` (always, even if
    `start` raised). The browser's own failures (it did not start, it hung, its
    driver died) are recorded in the `PageLoad`, never raised: they are the
    harness's failures, not the page's, and the visit says so.
    """

    name: ClassVar[str]  # set by `register_browser`
    product: ClassVar[str]  # the name a HAR's log.browser gives
    version: str  # the browser's version, as a HAR's log.browser gives it
    versions: dict[str, str]  # the browser's and its driver's versions, as the visit record stores them
    default_browser_dns: ClassVar[str]  # the DNS settings a study that names none gets
    #: Transports the browser speaks itself (`BrowserDns`); an arm that needs one it lacks runs its stub instead.
    native_dns: ClassVar[frozenset[str]] = frozenset()
    browser_dns: str  # the DNS settings the study names (a file of preferences)
    dns_settings: dict[str, bool | int | str]  # their values, which every visit reads back from the browser
    # Names the browser asks by itself, whatever the page (its own services): on a replayed web they are not the
    # page's DNS misses (docs/replay.md)
    own_names: ClassVar[frozenset[str]] = frozenset()
    reusable: ClassVar[bool] = False  # whether it can serve many visits (`SessionPolicy` mode "reused")

    @classmethod
    def launch_group(cls, protocol: str, resolver: str) -> str:
        """Which visits one running browser can serve in turn: those of one group need the same DNS settings at
        launch. "" for all: a browser that takes each arm's settings while it runs (Firefox)."""
        return ""

    def __init__(
        self,
        client: ClientSide,
        timeout: float = 30.0,
        margin: float = 10.0,
        browser_dns: str | Path | None = None,
        session: SessionPolicy | None = None,
        page_http3: bool = False,
    ):
        """Every browser is built so; ``browser_dns`` names its DNS settings (None: `default_browser_dns`),
        which the implementation reads into `dns_settings`; ``session`` says whether it serves many visits;
        ``page_http3`` whether the page's own requests may use HTTP/3 (the study's `page_http3`)."""
        if timeout <= 0 or margin <= 0:
            raise HarnessError(f"timeout and margin must be positive (got {timeout} and {margin})")
        self.session = session or SessionPolicy()
        if self.session.reused and not self.reusable:
            raise HarnessError(f"browser {self.name}: it cannot serve many visits (browser_session = 'reused')")
        self.session_ordinal = 0  # the current visit's place in its browser's life: 1 for a new browser's first
        self.restart_reason: str | None = None  # why the current visit's browser replaced the one before, if it did
        self.warmup: dict | None = None  # the warm-up of the current visit's reused browser (harness/browser/warmup.py)
        self.client = client
        self.timeout = timeout  # the page load's time limit
        self.margin = margin  # beyond timeout + margin the whole visit's browser is killed
        self.account = BrowserAccount.lookup()
        self.browser_dns = str(browser_dns or self.default_browser_dns)
        self.page_http3 = page_http3

    def page_http3_for(self, dns: BrowserDns) -> bool:
        """Whether the page may use HTTP/3 in a visit with ``dns``: the study's `page_http3`, unless the browser
        cannot keep its DNS's HTTP/3 apart from the page's (Firefox's DoH3)."""
        return self.page_http3

    def unexpected_version(self) -> str | None:
        """A one-line warning if the installed browser is not the version its DNS settings were read from."""
        return None

    @property
    def trusted_ca(self) -> Path | None:
        """The place's CA, if the browser must trust it besides its own roots (a lab's)."""
        return self.client.ca_file if self.client.browser_trusts_ca else None

    @abstractmethod
    def start(self, arm: DnsArm) -> None:
        """Make a browser ready for one visit in the client namespace, with ``arm``'s preferences."""

    @abstractmethod
    def load(self, url: str) -> PageLoad:
        """Load ``url`` within the time limit and collect what the page and the browser report.

        `stop` adds its own time to the returned `PageLoad`'s phases.
        """

    @abstractmethod
    def stop(self) -> None:
        """End what `start` began, whatever state it is in; nothing of the visit's browser is left running."""

    def start_failure(self) -> str | None:
        """Why the last `start` left no browser ready for the harness's own reasons, which a start tried again may
        not meet (harness/browser/starting.py), or None: it started, or the watchdog ended it."""
        return None

    def close(self) -> None:  # noqa: B027 -- a fresh browser ends with each visit: nothing left to close
        """End the browser a reused session keeps between visits (at a network block's end, or the crawl's)."""

    def between_visits(self) -> None:  # noqa: B027 -- a fresh browser has nothing to make ready
        """Called once a visit's counted window has ended: a reused browser may begin making the next visit's
        user context and tab while the harness judges and stores the visit."""

    def warm_resolver(self, name: str) -> str | None:
        """Resolve ``name`` through the browser's resolver (its own DoH, or the system's and so the stub), so
        that its connection to the resolver is open before the navigation; the error, or None. Called after
        `start`, before `load`."""
        return f"browser {self.name} cannot warm its resolver connection"

    def har(self, load: PageLoad, url: str) -> dict:
        """The HAR 1.2 of ``load`` (one page, one entry per request), naming this browser and its version."""
        page = load.page or PageInfo(url=url)
        return build_har(load.events, page, (self.product, self.version), __version__)


def start_failure(report: PageLoad) -> str | None:
    """The failure a browser's start recorded in ``report`` (its `driver_failure` begins "start:", or "reuse:" for
    a reused browser's preparation of the visit), unless the watchdog ended it (the visit's time is spent)."""
    failure = report.driver_failure
    if failure is None or report.watchdog_fired or not failure.startswith(("start:", "reuse:")):
        return None
    return failure


_BROWSERS: dict[str, type[Browser]] = {}

BrowserClass = TypeVar("BrowserClass", bound=type[Browser])


def register_browser(name: str) -> Callable[[BrowserClass], BrowserClass]:
    """Class decorator: the browser called ``name`` (what `Visitor` and `make_browser` are given)."""

    def register(cls: BrowserClass) -> BrowserClass:
        cls.name = name
        _BROWSERS[name] = cls
        return cls

    return register


def registered_browsers() -> dict[str, type[Browser]]:
    """The browsers registered so far, by name (harness/browser/registry.py imports them all)."""
    return dict(_BROWSERS)
