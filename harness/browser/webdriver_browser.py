"""What every browser driven over WebDriver does alike with its sessions, whichever browser it is: the visit's
session is a fresh one or the reused one given a new visit; the page loads in it, the visit ends it (or, reused,
ends only the visit), and the reused one ends at a block's end. Each browser's own module says how a session is
made (harness/browser/firefox.py, harness/browser/chromium.py); neither inherits the other."""

from __future__ import annotations

from harness.browser.base import Browser, PageLoad, start_failure
from harness.browser.reused import ReusedSession
from harness.browser.webdriver_session import WebDriverSession


class WebDriverBrowser(Browser):
    """A `Browser` whose visits each run in a `WebDriverSession`: `_session` is the current visit's, `_reused`
    the session a reused browser keeps between visits (None for fresh browsers). Subclasses make them in
    `start`."""

    _session: WebDriverSession | None = None
    _reused: ReusedSession | None = None

    def load(self, url: str) -> PageLoad:
        if self._session is None:
            raise RuntimeError(f"{self.product}.load() before start()")
        return self._session.load(url)

    def stop(self) -> None:
        if self._session is self._reused and self._reused is not None:
            self._reused.end_visit()
        elif self._session is not None:
            self._session.stop()
        self._session = None

    def between_visits(self) -> None:
        """A reused browser begins opening the next visit's tab (`ReusedSession.open_next_tab`)."""
        if self._reused is not None and self._session is None:
            self._reused.open_next_tab()

    def start_failure(self) -> str | None:
        """Why the last start failed for the harness's own reasons (`harness.browser.base.start_failure`)."""
        return start_failure(self._session.report) if self._session is not None else None

    def close(self) -> None:
        """End the reused browser, if one runs."""
        if self._reused is not None:
            self._reused.stop()
            self._reused = None

    def warm_resolver(self, name: str) -> str | None:
        """Resolve ``name`` in the running browser, from the visit's tab (see `Browser.warm_resolver`)."""
        return self._session.resolve(name) if self._session is not None else "the browser is not running"
