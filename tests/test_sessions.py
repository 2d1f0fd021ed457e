"""The browsers' WebDriver sessions: their shape, and the request source each may use (fast, no lab)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from harness.browser.account import BrowserAccount
from harness.browser.chromium_session import ChromiumSession
from harness.browser.firefox_reused import ReusedFirefoxSession
from harness.browser.reused import ReusedSession
from harness.browser.session import FirefoxSession
from harness.browser.webdriver_session import WebDriverSession
from harness.errors import HarnessError

ACCOUNT = BrowserAccount("nobody", 65534, 65534, Path("/nonexistent"))


def firefox() -> FirefoxSession:
    return FirefoxSession(ACCOUNT, Path("/nonexistent"), None, Path("/tmp"))


def reused_firefox() -> FirefoxSession:
    return ReusedFirefoxSession(ACCOUNT, Path("/nonexistent"), None, Path("/tmp"))


def chromium() -> ChromiumSession:
    return ChromiumSession(
        ACCOUNT, Path("/nonexistent"), None, Path("/tmp"), switches=[], local_state={}, preferences={}, read_settings={}
    )


SESSIONS: dict[str, tuple[type[WebDriverSession], Callable[[], WebDriverSession]]] = {
    "firefox": (FirefoxSession, firefox),
    "reused firefox": (FirefoxSession, reused_firefox),
    "chromium": (ChromiumSession, chromium),
}


def test_each_browser_s_session_specialises_the_one_webdriver_session_and_no_other_browser_s():
    assert issubclass(FirefoxSession, WebDriverSession) and issubclass(ChromiumSession, WebDriverSession)
    assert not issubclass(ChromiumSession, FirefoxSession) and not issubclass(FirefoxSession, ChromiumSession)
    assert ReusedFirefoxSession.__mro__[1:4] == (ReusedSession, FirefoxSession, WebDriverSession)


@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_an_unknown_request_source_is_one_line_naming_the_key_and_the_value(name, monkeypatch):
    cls, make = SESSIONS[name]
    monkeypatch.setattr(cls, "network_events", "bidj")
    with pytest.raises(HarnessError) as raised:
        make()
    message = str(raised.value)
    assert "\n" not in message and "network_events" in message and "'bidj'" in message and "none" in message


@pytest.mark.parametrize("name", sorted(SESSIONS))
def test_every_browser_may_record_no_request_and_records_by_default(name, monkeypatch):
    cls, make = SESSIONS[name]
    assert make()._source == {FirefoxSession: "recorder", ChromiumSession: "netlog"}[cls]
    monkeypatch.setattr(cls, "network_events", "none")
    assert make()._source == "none"


def test_a_source_of_another_browser_is_refused(monkeypatch):
    monkeypatch.setattr(ChromiumSession, "network_events", "recorder")  # Firefox's recorder
    with pytest.raises(HarnessError, match="'recorder' for ChromiumSession"):
        chromium()
